"""What-if: a recorded day's arrivals replayed under a candidate policy. `simulation.py` is the replay's engine, a
pure discrete-event simulation of the manager over the rules of spark_jobs/manager/ (`model.py` its inputs and
results, `intervals.py` its figures per interval); `replay.py` replays one environment's records beside their own
figures (`candidate.py`: the candidate's plain data as the replay reads it); the Spark job (`job.py`, `extract.py`,
`arguments.py`, `__main__.py`) reads the day and runs one task per environment. What the records lack for it, and the
fallbacks: spark_jobs/contract/replay.py, docs/work-records.md."""
