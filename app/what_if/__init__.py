"""What-if runs over HTTP: a recorded day replayed under a candidate policy by the what-if job (spark_jobs/what_if),
queued, run one at a time in a child process, and kept with their results for WLM_WHATIF_RETENTION_DAYS."""
