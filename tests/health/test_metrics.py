"""/metrics serves the queues' state read from Redis at scrape time (app/health/metrics.py): every replica answers
alike, the oldest queued request's age is its own (not a deleted or selected one's), and the goal evaluation's
gauges come from what the scheduler published, not from the process that computed them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from app.config import Settings
from app.health.metrics import exposition, histogram_exposition
from app.policy.active import bucket_bounds_ms
from app.policy.schemas import PercentileGoal
from app.queues.environments import QueueFigures
from app.queues.keys import AeKeys, parse_token
from app.redis.embedded import EmbeddedRedis
from app.servers.schemas import PeriodPerformance
from app.work import records
from spark_jobs.contract.goals import BUCKET_LABELS, RESPONSE_BUCKET_LIMITS_PCT, TOLERANT_BUCKET_LIMITS_PCT
from tests.conftest import client_of, running_app
from tests.waiting import eventually
from tests.work.conftest import BATCH, grouped_policy, make_world

QUEUE_FAMILIES = ("wlm_queue_depth", "wlm_queue_oldest_age_seconds", "wlm_queue_swept", "wlm_requests_in_flight", "wlm_servers_registered")


async def _scrape(client: httpx.AsyncClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Each sample of /metrics by name and labels."""
    response = await client.get("/metrics")
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _queue(sc: str) -> tuple[tuple[str, str], ...]:
    return (("application_environment", "PAYROLL"), ("node", "LOCAL"), ("service_class", sc))


async def _inserted_ms(redis: Redis, k: AeKeys, token: str) -> int:
    parsed = parse_token(token)
    assert parsed is not None
    return int(json.loads(await redis.hget(k.req, parsed[2]))["inserted"])  # type: ignore[arg-type]


def _redis_ms(time: tuple[int, int]) -> int:
    return int(time[0]) * 1000 + int(time[1]) // 1000


async def test_every_replica_serves_the_queues_alike(client, other, settings: Settings, redis_admin: Redis) -> None:
    world = await make_world(client)
    server = await world.server(tasks=5)
    k = AeKeys(settings.redis_prefix, "LOCAL", "PAYROLL")
    first = await world.insert({"n": 1})
    second = await world.insert({"n": 2})
    await world.insert({"n": 3}, classification=BATCH)
    fourth = await world.insert({"n": 4})

    before = _redis_ms(await redis_admin.time())
    a = await _scrape(client)
    b = await _scrape(other)
    after = _redis_ms(await redis_admin.time())
    assert a[("wlm_queue_depth", _queue("ONLINE"))] == b[("wlm_queue_depth", _queue("ONLINE"))] == 3
    assert a[("wlm_queue_depth", _queue("BATCH"))] == b[("wlm_queue_depth", _queue("BATCH"))] == 1
    for name, labels in a:
        if name in QUEUE_FAMILIES and name != "wlm_queue_oldest_age_seconds":
            assert a[(name, labels)] == b[(name, labels)], (name, labels)
    # The age is the first request's, read by Redis's clock at each scrape: the second replica scraped later.
    inserted = await _inserted_ms(redis_admin, k, first["token"])
    age_a, age_b = a[("wlm_queue_oldest_age_seconds", _queue("ONLINE"))], b[("wlm_queue_oldest_age_seconds", _queue("ONLINE"))]
    assert (before - inserted) / 1000 <= age_a <= age_b <= (after - inserted) / 1000

    # The first deleted, the second selected, a fifth queued: the oldest queued is now the fourth.
    deleted = await client.delete(f"/v1/work/{first['token']}", headers=world.qm, params={"connect_token": world.qm_token})
    assert deleted.status_code in (200, 204), deleted.text
    selected = (await world.select(server, max_items=1)).json()["items"]
    assert [item["token"] for item in selected] == [second["token"]]
    await world.insert({"n": 5})
    before = _redis_ms(await redis_admin.time())
    c = await _scrape(other)
    after = _redis_ms(await redis_admin.time())
    place = (("application_environment", "PAYROLL"), ("node", "LOCAL"))
    assert c[("wlm_queue_depth", _queue("ONLINE"))] == 2
    assert c[("wlm_requests_in_flight", place)] == 1 and c[("wlm_servers_registered", place)] == 1
    inserted = await _inserted_ms(redis_admin, k, fourth["token"])
    assert (before - inserted) / 1000 <= c[("wlm_queue_oldest_age_seconds", _queue("ONLINE"))] <= (after - inserted) / 1000


async def test_resource_groups_and_dead_letters_are_served_alike_by_every_replica(client, other) -> None:
    world = await make_world(client, grouped_policy([{"name": "LIMITED", "max_in_flight": 1, "min_in_flight": 1}], ONLINE="LIMITED"))
    holder, refused = await world.server(), await world.server()
    for n in range(2):
        await world.insert({"n": n})
    held = (await world.select(holder)).json()["items"]
    assert len(held) == 1 and (await world.select(refused, expect=None)).status_code == 204  # the cap refuses it
    dead = (await world.insert({"n": "dead"}, classification=BATCH))["token"]
    assert [i["token"] for i in (await world.select(refused)).json()["items"]] == [dead]
    await world.end(refused, dead, outcome="failed", dead_letter=True)

    a, b = await _scrape(client), await _scrape(other)
    group, place = (("resource_group", "LIMITED"),), (("application_environment", "PAYROLL"), ("node", "LOCAL"))
    online = (*place, ("service_class", "ONLINE"))
    for key in (("wlm_resource_group_in_flight", group), ("wlm_resource_group_max_in_flight", group), ("wlm_dead_letters", place),
                ("wlm_service_class_in_flight", online)):  # fmt: skip
        assert a[key] == b[key] == 1, key
    # The time on the cap is read by Redis's clock at each scrape: the second replica's is as late or later.
    assert 0 < a[("wlm_resource_group_capped_seconds_total", group)] <= b[("wlm_resource_group_capped_seconds_total", group)]


async def test_goal_evaluation_and_server_decisions_are_served_by_every_replica(client, other, app, settings: Settings) -> None:
    await make_world(client)
    k = AeKeys(settings.redis_prefix, "LOCAL", "PAYROLL")
    period = PeriodPerformance.model_validate(_period(performance_index=1.25))
    queues = app.state.wlm.queues  # published as the scheduler publishes them
    await queues.results.publish_performance(k, {"ONLINE:1": period.model_dump_json()})
    await queues.results.publish_decision(k, {}, [], {"ONLINE": 3, "BATCH": 1})
    labels = tuple(sorted((*_queue("ONLINE"), ("period", "1"))))
    for replica in (client, other):
        scraped = await _scrape(replica)
        assert scraped[("wlm_service_class_performance_index", labels)] == 1.25
        assert scraped[("wlm_service_class_avg_response_seconds", labels)] == 0.2
        assert scraped[("wlm_servers_desired", _queue("ONLINE"))] == 3 and scraped[("wlm_servers_desired", _queue("BATCH"))] == 1


def _period(**overrides: object) -> dict[str, object]:
    unknown = ("p50_response_ms", "p90_response_ms", "p99_response_ms", "avg_queue_ms", "avg_execution_ms", "velocity",
               "distribution", "goal_met", "goal_met_share")  # fmt: skip
    return {
        "service_class": "ONLINE", "period": 1, "application_environment": "PAYROLL", "node": "LOCAL", "importance": 1,
        "goal": {"kind": "percentile"}, "window_seconds": 60.0, "evaluated_at": datetime.now(UTC), "ended": 10,
        "ended_per_second": 0.5, "avg_response_ms": 200.0, "performance_index": None, "queued": 0,
        **dict.fromkeys(unknown), **overrides,
    }  # fmt: skip


def test_the_exposition_of_an_empty_queue_a_swept_one_and_an_odd_name() -> None:
    figures = QueueFigures(
        now_ms=10_000, servers=2, in_flight=1, dead_letters=4, in_flight_by_class={"BATCH": 1}, histograms={}, desired={"BATCH": 3},
        performance=[], depths={"ONLINE": 0, "BATCH": 7},
        inserted_ms={"ONLINE": None, "BATCH": 4_000}, swept={"BATCH"}, promoted={"BATCH": 3},
    )  # fmt: skip
    samples = {
        (sample.name, sample.labels.get("service_class")): sample.value
        for family in text_string_to_metric_families(exposition([("PAYROLL", "LOCAL")], [figures]))
        for sample in family.samples
    }
    assert samples[("wlm_queue_oldest_age_seconds", "ONLINE")] == 0 and samples[("wlm_queue_depth", "ONLINE")] == 0
    assert samples[("wlm_queue_oldest_age_seconds", "BATCH")] == 6.0 and samples[("wlm_queue_depth", "BATCH")] == 7
    assert samples[("wlm_queue_swept", "BATCH")] == 1 and samples[("wlm_queue_swept", "ONLINE")] == 0
    assert samples[("wlm_requests_in_flight", None)] == 1 and samples[("wlm_servers_registered", None)] == 2
    assert samples[("wlm_servers_desired", "BATCH")] == 3 and samples[("wlm_dead_letters", None)] == 4
    assert samples[("wlm_service_class_in_flight", "BATCH")] == 1 and samples[("wlm_service_class_in_flight", "ONLINE")] == 0
    assert samples[("wlm_promoted_selects_total", "BATCH")] == 3 and samples[("wlm_promoted_selects_total", "ONLINE")] == 0
    odd = 'A"B\\C'
    parsed = text_string_to_metric_families(exposition([(odd, "N")], [figures]))
    [family] = [f for f in parsed if f.name == "wlm_requests_in_flight"]
    assert family.samples[0].labels["application_environment"] == odd  # escaped as the text format asks


async def test_every_metric_the_grafana_dashboard_queries_is_served(client, app, settings: Settings) -> None:
    """deploy/grafana/wlm-dashboard.json: each metric its panels and variables query is on /metrics once there is
    work, a server, an evaluation and a decision (a misspelt or dropped metric would leave a panel empty)."""
    dashboard = json.loads((Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "wlm-dashboard.json").read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    queries += [variable["definition"] for variable in dashboard["templating"]["list"] if variable["type"] == "query"]
    wanted = {name for query in queries for name in re.findall(r"\bwlm_[a-z_]+", query)}
    assert len(wanted) >= 10 and all(panel["datasource"]["uid"] == "${datasource}" for panel in dashboard["panels"])

    world = await make_world(client, grouped_policy([{"name": "LIMITED", "max_in_flight": 5}], ONLINE="LIMITED"))
    k = AeKeys(settings.redis_prefix, "LOCAL", "PAYROLL")
    queues = app.state.wlm.queues
    await eventually(lambda: queues.redis.hget(k.buckets, "ONLINE"), what="the buckets published by the scheduler")
    server = await world.server()
    ended = await world.insert({"n": 0})
    await world.select(server)
    await world.end(server, ended["token"])  # counted in the histograms
    await world.insert({"n": 1})
    evaluated = PeriodPerformance.model_validate(_period(performance_index=0.8, velocity=50.0))
    await queues.results.publish_performance(k, {"ONLINE:1": evaluated.model_dump_json()})
    await queues.results.publish_decision(k, {}, [], {"ONLINE": 1})
    served = {name for name, _ in await _scrape(client)}
    assert wanted <= served, wanted - served


async def test_without_redis_the_process_counters_are_still_served(settings: Settings, tmp_path) -> None:
    """A scrape while Redis is down: the queues' figures cannot be read (`wlm_queue_metrics_up 0`), but the
    process's own counters, the ones that show the outage, are served."""
    server = EmbeddedRedis(tmp_path / "redis")
    url = server.start()
    try:
        async with running_app(settings.model_copy(update={"redis_url": url})) as application, client_of(application) as client:
            await make_world(client)
            up = await _scrape(client)
            assert up[("wlm_queue_metrics_up", ())] == 1 and ("wlm_queue_depth", _queue("ONLINE")) in up
            server.stop()
            down = await _scrape(client)
            assert down[("wlm_queue_metrics_up", ())] == 0 and not any(name == "wlm_queue_depth" for name, _ in down)
            assert any(name == "wlm_http_requests_total" for name, _ in down)
    finally:
        server.stop()


def test_histograms_are_cumulative_over_the_goal_s_report_buckets() -> None:
    figures = QueueFigures(
        now_ms=0, servers=0, in_flight=0, dead_letters=0, in_flight_by_class={}, desired={}, performance=[], depths={},
        inserted_ms={}, swept=set(), promoted={},
        histograms={"ONLINE|1|r|1": 2, "ONLINE|1|r|6": 1, "ONLINE|1|r|14": 1, "ONLINE|1|r|sum": 900, "REPORTS|1|r|3": 5, "GONE|1|r|1": 1},
    )  # fmt: skip
    bounds = {"ONLINE": [bucket_bounds_ms(PercentileGoal(type="percentile", percentile=90, response_time_ms=250))], "REPORTS": [()]}
    text = histogram_exposition([("PAYROLL", "LOCAL")], [figures], bounds)
    [family] = [f for f in text_string_to_metric_families(text) if f.name == "wlm_service_class_response_seconds"]
    cumulative = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
    assert list(cumulative) == [repr(250 * limit / 100 / 1000) for limit in RESPONSE_BUCKET_LIMITS_PCT] + ["+Inf"]
    assert list(cumulative.values()) == [2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 4]
    totals = {s.name: s.value for s in family.samples if not s.name.endswith("_bucket")}
    assert totals == {"wlm_service_class_response_seconds_count": 4, "wlm_service_class_response_seconds_sum": 0.9}
    # A velocity goal has no response time buckets, and a class the policy no longer has is left out.
    assert {s.labels["service_class"] for s in family.samples} == {"ONLINE"}


async def test_ends_are_counted_in_the_buckets_the_report_puts_them_in(client, other, app, settings: Settings, redis_admin: Redis) -> None:
    world = await make_world(client)
    k = AeKeys(settings.redis_prefix, "LOCAL", "PAYROLL")
    await eventually(lambda: redis_admin.hget(k.buckets, "ONLINE"), what="the buckets published by the scheduler")
    server = await world.server(tasks=10)
    for n in range(6):
        await world.insert({"n": n})
    for item in (await world.select(server, max_items=10)).json()["items"]:
        await world.end(server, item["token"])
    table = await eventually(lambda: (t := records.read(app.state.wlm.settings.records_dir)).num_rows == 6 and t, what="the records")
    expected = [0] * len(BUCKET_LABELS)
    for row in table.to_pylist():
        within = [i for i, limit in enumerate(TOLERANT_BUCKET_LIMITS_PCT) if row["response_time_ms"] * 100 <= limit * 250]
        expected[within[0] if within else len(BUCKET_LABELS) - 1] += 1
    labels = tuple(sorted((*_queue("ONLINE"), ("period", "1"))))
    for replica in (client, other):
        scraped = await _scrape(replica)
        buckets = [
            v for (name, key), v in scraped.items()
            if name == "wlm_service_class_response_seconds_bucket" and tuple(label for label in key if label[0] != "le") == labels
        ]  # fmt: skip
        assert [int(b - a) for a, b in zip([0.0, *buckets], buckets, strict=False)] == expected
        total = sum(row["response_time_ms"] for row in table.to_pylist()) / 1000
        assert scraped[("wlm_service_class_response_seconds_sum", labels)] == pytest.approx(total)
        assert scraped[("wlm_service_class_execution_seconds_count", labels)] == 6
