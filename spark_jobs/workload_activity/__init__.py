"""The RMF-style workload activity report: extract (records, policy goals) → pure transform → load (Parquet,
database). `python -m spark_jobs.workload_activity --date YYYY-MM-DD` or `wlm report run`."""
