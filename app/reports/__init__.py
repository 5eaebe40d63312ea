"""The workload activity report: what the nightly Spark job (spark_jobs/workload_activity) computes per
service class period and interval, goal against actual, and what the report API and the dashboard read."""
