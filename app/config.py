"""The one settings class. Every knob is an environment variable with the WLM_ prefix."""

import math
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WLM_", env_file=".env", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    workers: int = Field(default=1, ge=1)
    # On SIGTERM, open requests get this long to finish before they are cancelled (long polls and event streams
    # end at once: app/web/shutdown.py); a backstop for a client that stops reading.
    shutdown_grace_seconds: int = Field(default=30, ge=1)
    log_level: str = "info"

    data_dir: Path = Path("data")
    # None: SQLite in the data directory.
    database_url: str | None = None
    # None: the service starts its own redis-server under the data directory.
    redis_url: str | None = None
    # When a 201 is answered for queued work. strict: once Redis has the write on disk (WAITAOF where the server
    # has it, else the server must run with appendfsync always; concurrent inserts share one fsync). fast: once
    # Redis has it in memory; with appendfsync everysec a host crash loses up to the last second of accepted work.
    # The embedded Redis and docker-compose follow this setting.
    durability: Literal["strict", "fast"] = "strict"
    # Strict mode on a Redis master with a replica online: an insert is answered once a replica has it too (WAIT),
    # so the replica promoted when the master dies has it; 503 not_durable if none confirms within this long. At
    # most 4 s: a Redis call unanswered for 5 s is taken for a lost connection.
    replica_wait_ms: int = Field(default=2_000, ge=1, le=4_000)
    # Prefix of every Redis key, so several deployments can share one Redis. It is part of every key's hash tag
    # (`{prefix:node:ae}`) and of the channel patterns processes subscribe to: a brace, a colon or a glob character
    # (`*?[\`) would break them, so it is letters, digits, `_`, `.` and `-`.
    redis_prefix: str = Field(default="wlm", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    # Redis connections per process; more concurrent requests wait for one rather than opening more.
    redis_max_connections: int = Field(default=64, ge=2)
    # Reassign expired requests, flush work records and call exits from this process.
    background_duties: bool = True

    # Taken as the bootstrap admin key on first start; otherwise one is generated and printed once.
    bootstrap_admin_key: str | None = None
    # Verified API keys are cached this long per process. A revoke or a principal's change reaches every process at
    # once over Redis (app/auth/service.py KeyCache); this is the backstop while that word cannot get through. Expiry
    # is checked on every request.
    auth_cache_seconds: float = Field(default=5.0, ge=0)
    # Active connections are cached this long per process (an insert or select then needs no lookup). A queue
    # manager's queues are purged again after twice this time plus a second, so an insert that another process
    # let through on its cached copy after the disconnect does not outlive it.
    connection_cache_seconds: float = Field(default=2.0, ge=0)
    # Goal evaluation: every interval, each service class period is judged on the requests that ended within the
    # window before it.
    goal_interval_seconds: float = Field(default=10.0, gt=0)
    # Start the servers of environments that have a start command, on this host (app/scheduler/duties/launcher.py), as
    # the node named here (default: the policy's only node, or its first).
    launcher: bool = True
    node: str | None = None
    # A launched server that exits with a failure within its first seconds failed to start: no new start of its
    # environment on this node for this long, so a broken command does not spin (five failures in ten minutes: STOPPED).
    failed_start_backoff_seconds: float = Field(default=30.0, gt=0)
    goal_window_seconds: float = Field(default=60.0, gt=0)
    # /metrics serves the queues' figures as the elected scheduler last rendered them while they are no older than
    # this (default: the goal interval), and reads them at the scrape otherwise; 0: every scrape reads them
    # (app/health/exposition.py).
    metrics_max_age_seconds: float | None = Field(default=None, ge=0)
    # Delay samples (RMF's using and delay samples, app/scheduler/duties/delay_sampling.py): every interval the elected
    # scheduler counts the requests of class queues by state, reading at most this many environments on their nodes
    # per tick (each one script call for all its classes): with more, a rotating part of them per tick, each then
    # sampled less often (the samples say how often). The default keeps sampling near 5 % of a core for scheduler
    # and Redis together (docs/benchmarks.md).
    sample_interval_ms: int = Field(default=250, ge=10)
    sample_places_per_tick: int = Field(default=48, ge=1)
    # How long a process trusts its cached copies of the policy, operator states and routing overrides before it
    # checks the settings' counter in the database again (app/shared/generation.py).
    policy_cache_seconds: float = Field(default=1.0, ge=0)

    # Request bodies are refused with 413 from Content-Length, or as soon as the streamed bytes pass the route's
    # limit, before authentication and parsing (app/web/guards.py): a policy, a batch of work, one work request
    # (max_payload_bytes plus room for its other fields), anything else.
    max_policy_bytes: int = Field(default=1_048_576, ge=1024)
    max_batch_bytes: int = Field(default=8_388_608, ge=1024)
    max_body_bytes: int = Field(default=65_536, ge=1024)
    # The hot paths' answers (insert, select) carry the times of their phases (app/web/timing.py), for the
    # benchmarks' latency breakdown (bench/lifecycle.py). Off: nothing is timed.
    timing_header: bool = False

    # Servers and queue managers are told to heartbeat this often. A server that neither selects nor heartbeats
    # for the timeout is taken for dead: its connection is closed and its work given back.
    heartbeat_interval_seconds: float = Field(default=10.0, gt=0)
    heartbeat_timeout_seconds: float = Field(default=30.0, gt=0)
    # Queue-manager exit URLs must match one of these patterns, comma-separated; empty: none allowed. A pattern
    # is scheme://host[:port]/path: the host exact or `*.domain` for its subdomains, the path exact or a prefix
    # ending in `*`. Keeps the service from being pointed at internal hosts.
    exit_url_allowlist: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # The work lifecycle.
    max_payload_bytes: int = Field(default=65_536, ge=16)
    max_result_bytes: int = Field(default=4_096, ge=0)
    max_batch_items: int = Field(default=1_000, ge=1, le=10_000)
    # IWM4AEDF: how many dynamic application environments one queue manager may define.
    max_dynamic_environments: int = Field(default=64, ge=0)
    max_wait_seconds: float = Field(default=60.0, ge=0)
    # No work starved (z/OS blocked workload support, docs/scheduler.md): a request queued longer than this is
    # selected ahead of the importance order (BLWLINTHD), within this share of an environment's selects (BLWLTRPCT).
    blocked_promotion_seconds: float = Field(default=20.0, gt=0)
    blocked_promotion_share: float = Field(default=0.005, gt=0, le=1)
    enclave_ttl_seconds: int = Field(default=86_400, ge=1)
    idempotency_ttl_seconds: int = Field(default=86_400, ge=1)
    # How long an ended request's id is remembered (its tombstone), so a late end is told "already ended" rather than
    # "unknown": as long as a late caller can come, the longest completion time of the policy (a lease starts again
    # at each begin and heartbeat) plus the heartbeat timeout plus the margin (docs/architecture.md, "Tombstones").
    # A policy whose completion time is longer than that leaves is refused (longest_completion_ms).
    tombstone_seconds: int = Field(default=300, ge=1)
    tombstone_margin_seconds: float = Field(default=60.0, ge=0)
    # How long a dead letter (a request abandoned after its last delivery, or failed for good) is kept to retry.
    dead_letter_days: float = Field(default=7, gt=0, le=365)
    # Background duties: lease expiry, work record flushing, exit delivery.
    lease_check_seconds: float = Field(default=0.5, gt=0)
    records_flush_seconds: float = Field(default=1.0, gt=0)
    # How long one process's hold on an environment's records lasts (taken again at each flush): the records a dead
    # scheduler left wait this long for the next. None: ten flush intervals, at least 10 s.
    records_lease_seconds: float | None = Field(default=None, gt=0)
    records_batch: int = Field(default=10_000, ge=1)
    exit_max_attempts: int = Field(default=8, ge=1)
    # The nightly report: the Spark master URL, and the driver's memory where the driver runs the work (local).
    spark_master: str = "local[*]"
    spark_driver_memory: str = "4g"
    # The report's driver JVM maps a class-data archive (spark_jobs/common/class_archive.py) that the first run
    # writes under <data_dir>/spark: later runs start seconds sooner.
    spark_class_archive: bool = True
    # The Java the report's driver runs on; by default JAVA_HOME, else the newest installed Java Spark supports
    # (spark_jobs/common/java_home.py).
    spark_java_home: Path | None = None
    # What-if runs (POST /v1/reports/what-if) and their results are kept this long after they end.
    whatif_retention_days: float = Field(default=30, gt=0, le=3650)
    exit_timeout_seconds: float = Field(default=5.0, gt=0)
    exit_retry_base_seconds: float = Field(default=1.0, gt=0)

    # The elected scheduler (after TIBCO Rendezvous distributed queues: docs/sources.md): every process is a member;
    # the live member of the highest weight runs the background duties. Members heartbeat this often; a scheduler
    # silent for the activation interval is replaced. The heartbeat must be shorter than the activation interval.
    scheduler_weight: int = Field(default=50, ge=1, le=65_535)
    scheduler_heartbeat_seconds: float = Field(default=1.0, gt=0)
    scheduler_activation_seconds: float = Field(default=3.5, gt=0)
    # The slow queue sweeper (after TPF MQSeries': docs/sweeper.md), run by the scheduler every interval.
    sweeper_enabled: bool = True
    sweeper_interval_seconds: float = Field(default=5.0, gt=0)
    # Requests per database blob: what one select's trip to the database brings back.
    sweeper_blob_requests: int = Field(default=1000, ge=1, le=10_000)
    # Queues holding fewer requests in memory are never swept, whatever their service rate.
    sweeper_min_in_memory: int = Field(default=100, ge=0)
    # Server-Sent Event streams (GET /v1/events) one process serves at once; each holds a Redis connection.
    events_max_subscribers: int = Field(default=100, ge=1)

    @property
    def longest_completion_ms(self) -> int:
        """The longest completion time a policy may give: what the tombstones' bound covers."""
        return math.floor((self.tombstone_seconds - self.heartbeat_timeout_seconds - self.tombstone_margin_seconds) * 1000)

    @model_validator(mode="after")
    def _tombstones_cover_a_completion_time(self) -> Self:
        if self.longest_completion_ms < 1:
            raise ValueError(
                f"tombstone_seconds ({self.tombstone_seconds}) must exceed heartbeat_timeout_seconds "
                f"({self.heartbeat_timeout_seconds:g}) plus tombstone_margin_seconds ({self.tombstone_margin_seconds:g}), "
                "and by the longest completion time of the policy"
            )
        return self

    @model_validator(mode="after")
    def _heartbeat_within_activation(self) -> Self:
        if self.scheduler_heartbeat_seconds >= self.scheduler_activation_seconds:
            raise ValueError("scheduler_heartbeat_seconds must be shorter than scheduler_activation_seconds")
        return self

    @property
    def metrics_max_age(self) -> float:
        """How old the scheduler's rendering of the queues' figures may be when /metrics serves it (0: never served)."""
        return self.goal_interval_seconds if self.metrics_max_age_seconds is None else self.metrics_max_age_seconds

    @model_validator(mode="after")
    def _records_lease_outlasts_a_flush_interval(self) -> Self:
        if self.records_lease_seconds is not None and self.records_lease_seconds <= self.records_flush_seconds:
            raise ValueError("records_lease_seconds must be longer than records_flush_seconds")
        return self

    @property
    def records_lease_ms(self) -> int:
        """The records writer's lease (records_lease_seconds), in milliseconds."""
        seconds = self.records_lease_seconds
        return int((max(10 * self.records_flush_seconds, 10) if seconds is None else seconds) * 1000)

    @property
    def records_dir(self) -> Path:
        return self.data_dir / "records"

    @property
    def delay_samples_dir(self) -> Path:
        return self.data_dir / "delay_samples"

    @property
    def spark_class_archive_dir(self) -> Path:
        return self.data_dir / "spark"

    @field_validator("database_url", "redis_url", "bootstrap_admin_key", "spark_java_home", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # Compose and shells pass unset variables as "": that means "use the default", not an empty value.
        return None if value == "" else value

    @field_validator("exit_url_allowlist", mode="before")
    @classmethod
    def _split_patterns(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'wlm.db').resolve()}"


@lru_cache
def get_settings() -> Settings:
    return Settings()
