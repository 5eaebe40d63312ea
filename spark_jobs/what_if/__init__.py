"""What-if: a recorded day's arrivals replayed under a candidate policy. `simulation.py` is the replay's engine, a
pure discrete-event simulation of the manager over the rules of spark_jobs/manager/ (`model.py` its inputs and
results, `intervals.py` its figures per interval); the Spark job that feeds it from the records is planned (issue 40)."""
