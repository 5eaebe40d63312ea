"""The delay samples' Parquet files as the elected scheduler writes them (app/servers/delay_records.py): RMF's using and
delay samples per class queue and minute. Every WLM_SAMPLE_INTERVAL_MS the scheduler counts each sampled class
queue's requests by state (app/servers/delays.py): served (`using`), waiting by delay cause, or waiting with none
(`unknown`: a worker task is free); a minute's counts are one row. A row is written at least once: readers drop
copies by DEDUP_KEY. A minute sampled by two schedulers (a failover) has a row from each, told apart by `scheduler`
and `epoch`: their `samples` add up, and the ticks no scheduler sampled are missing from them, never counted as zero
delay. Waiting requests are counted in their class's first period (as the goal evaluation counts them queued);
served ones in the period their time since insert is in."""

from __future__ import annotations

import pyarrow as pa

# A request's states, in their columns' order: served, the delay causes in their order, waiting with none.
STATE_COLUMNS = (
    "using",
    "environment_state",
    "redelivery",
    "group_cap",
    "no_server",
    "servers_starting",
    "busy_higher",
    "busy_lower",
    "unknown",
)

SCHEMA = pa.schema(
    [
        ("day", pa.date32()),
        # The minute's start (UTC, by Redis's clock).
        ("minute", pa.timestamp("ms", tz="UTC")),
        ("application_environment", pa.string()),
        ("node", pa.string()),
        ("service_class", pa.string()),
        ("period", pa.int32()),
        # The process that sampled (its name in the election) and the epoch it was elected under.
        ("scheduler", pa.string()),
        ("epoch", pa.int64()),
        # Ticks at which this queue was sampled in the minute: 60000 / WLM_SAMPLE_INTERVAL_MS when every queue is
        # sampled at every tick; fewer where the scheduler samples a rotating part of the queues per tick, or was
        # elected (or deposed) within the minute.
        ("samples", pa.int32()),
        # Per state, requests counted in it, summed over the samples.
        *((name, pa.int64()) for name in STATE_COLUMNS),
    ]
)

DEDUP_KEY = ("minute", "application_environment", "node", "service_class", "period", "scheduler", "epoch")
