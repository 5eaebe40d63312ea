"""What the service and the report job must agree on: the work records' columns and footers, the response-time
buckets and the PI's fixed points, the report's intervals. The service imports these modules and the job reads by
them; they import neither the web app nor PySpark, so the job ships without the service (`spark-submit` needs only
pyspark and pyarrow on the executors)."""
