"""The background duties: what the elected scheduler does on its own, one module per duty, run by `runner`.

- leases: requests whose completion time passed go back to their queue, or are abandoned after their last delivery
  (with liveness: silent servers; groups: resource group slots of work no longer in flight; retired: environments
  that left; drained: states that wait for servers to go)
- management: each service class judged against its goal, and the servers decided
- exits: the queue managers' exit calls delivered
- records: work records written to Parquet
- sweeping: the slow queue sweeper's pass
- launcher: the servers of this host started (the exception: it runs on every host, not only on the scheduler)
- and what the composition gives it (`runner.Extra`): the queues' metrics rendered for /metrics (app/health/exposition.py)
"""
