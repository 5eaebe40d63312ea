"""Batch jobs on PySpark: the nightly workload activity report."""
