"""/metrics serves the queues' figures as the elected scheduler rendered them while they are fresh, and reads them at
the scrape otherwise (app/health/exposition.py): gzipped as one member when the scraper accepts gzip, plain when not,
with every series a scrape that reads the queues itself serves, and the process's own counters always its own."""

from __future__ import annotations

import gzip
import zlib

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.config import Settings
from app.health.exposition import accepts_gzip, deflated, gzipped, inflated
from app.health.records import Expositions
from app.queues.keys import AeKeys
from app.servers.schemas import PeriodPerformance
from tests.conftest import client_of, running_app
from tests.health.test_metrics import _period, _queue
from tests.waiting import eventually
from tests.work.conftest import BATCH, grouped_policy, make_world

MAX_AGE_S = 2.0
MARKER = b"# HELP wlm_test_marker A figure only the stored text has\n# TYPE wlm_test_marker gauge\nwlm_test_marker 7.0\n"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(response: httpx.Response) -> Samples:
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_the_stored_text_and_the_scrape_s_tail_make_one_gzip_member() -> None:
    text, tail = b"wlm_a 1\n" * 5000, b"wlm_http_requests_total 3.0\n"
    stored = deflated(text, 1, 2)
    body = gzipped(stored, tail)
    # One member: a decoder that reads only the first (httpx's) gets everything, and nothing is left after it.
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    assert decoder.decompress(body) == text + tail and decoder.eof and decoder.unused_data == b""
    assert gzip.decompress(body) == text + tail  # the trailer's CRC-32 and length are checked here
    assert inflated(stored) == text and len(stored.deflated) < len(text) // 10


@pytest.mark.parametrize(
    ("header", "taken"),
    [("gzip", True), ("deflate, gzip;q=0.5", True), ("GZIP", True), ("*", True), ("gzip;q=0", False), ("identity", False), ("", False)],
)
def test_gzip_is_sent_only_when_accepted(header: str, taken: bool) -> None:
    assert accepts_gzip(header) is taken


@pytest.mark.parametrize("redis", ["server", "cluster"])
async def test_a_fresh_rendering_is_served_a_stale_one_is_not(settings: Settings, redis: str, request: pytest.FixtureRequest) -> None:
    """No scheduler renders here (no background duties): what is stored is served while younger than the age
    allowed and of the active policy's version, gzipped or not; otherwise the queues are read at the scrape. On a
    Redis Cluster too (the stored text is read back undecoded from a pipeline)."""
    update: dict[str, object] = {"metrics_max_age_seconds": MAX_AGE_S, "background_duties": False}
    if redis == "cluster":
        update["redis_url"] = request.getfixturevalue("shared_cluster").masters[0]
    quiet = settings.model_copy(update=update)
    async with running_app(quiet) as application, client_of(application) as client:
        world = await make_world(client)
        await world.insert({"n": 1})
        queues = application.state.wlm.queues
        kept = Expositions(queues.context)
        version = (await application.state.wlm.policies.current()).version
        assert not await kept.wanted_lately()

        live = await client.get("/metrics")
        assert "content-encoding" not in live.headers and await kept.wanted_lately()
        read = _samples(live)
        assert read[("wlm_queue_metrics_stored", ())] == 0 and read[("wlm_queue_depth", _queue("ONLINE"))] == 1

        now_ms = await queues.clock_ms()
        await kept.keep(deflated(MARKER, now_ms - 500, version))
        zipped = await client.get("/metrics", headers={"Accept-Encoding": "gzip"})
        plain = await client.get("/metrics", headers={"Accept-Encoding": "identity"})
        assert zipped.headers["content-encoding"] == "gzip" and "content-encoding" not in plain.headers
        for served in (_samples(zipped), _samples(plain)):
            assert served[("wlm_test_marker", ())] == 7 and served[("wlm_queue_metrics_stored", ())] == 1
            assert not any(name == "wlm_queue_depth" for name, _ in served)
            # The process's own counters are this scrape's: the scrapes before it are counted.
            metrics_served = ("wlm_http_requests_total", (("method", "GET"), ("route", "/metrics"), ("status", "200")))
            assert served[metrics_served] >= 1

        for stale in (
            deflated(MARKER, now_ms - int(MAX_AGE_S * 1000) - 1000, version),  # older than allowed
            deflated(MARKER, now_ms, version + 1),  # of another policy
        ):
            await kept.keep(stale)
            served = _samples(await client.get("/metrics"))
            assert ("wlm_test_marker", ()) not in served and served[("wlm_queue_metrics_stored", ())] == 0
            assert served[("wlm_queue_depth", _queue("ONLINE"))] == 1


async def test_the_scheduler_s_rendering_has_every_series_of_a_live_read(settings: Settings) -> None:
    """Once a scrape wanted it, the elected scheduler renders the queues; served, its series are those a scrape
    reading the queues itself serves, with the same values, and it says when its figures were read."""
    rendering = settings.model_copy(update={"metrics_max_age_seconds": MAX_AGE_S, "goal_interval_seconds": 3600})
    async with running_app(rendering) as application, client_of(application) as client:
        world = await make_world(client, grouped_policy([{"name": "LIMITED", "max_in_flight": 5}], ONLINE="LIMITED"))
        queues = application.state.wlm.queues
        k = AeKeys(settings.redis_prefix, "LOCAL", "PAYROLL")
        await eventually(lambda: queues.redis.hget(k.buckets, "ONLINE"), what="the buckets published by the scheduler")
        server = await world.server(tasks=2)
        ended = await world.insert({"n": 0})
        await world.select(server)
        await world.end(server, ended["token"])  # counted in the histograms
        await world.insert({"n": 1})
        await world.insert({"n": 2}, classification=BATCH)
        evaluated = PeriodPerformance.model_validate(_period(performance_index=0.8, velocity=50.0))
        await queues.results.publish_performance(k, {"ONLINE:1": evaluated.model_dump_json()})
        await queues.results.publish_decision(k, {}, [], {"ONLINE": 1})

        before_ms = await queues.clock_ms()
        live = _samples(await client.get("/metrics"))
        assert live[("wlm_queue_metrics_stored", ())] == 0

        async def rendered() -> Samples | None:
            served = _samples(await client.get("/metrics"))
            return served if served[("wlm_queue_metrics_stored", ())] == 1 else None

        served = await eventually(rendered, timeout=15, what="a scrape served the scheduler's rendering")
        # The process's own counters change with every scrape (and duty): the rest is the queues'.
        own = {sample.name for family in text_string_to_metric_families(generate_latest().decode()) for sample in family.samples}
        queue_series = {key for key in live if key[0] not in own}
        assert queue_series == {key for key in served if key[0] not in own}
        for name in ("wlm_queue_depth", "wlm_service_class_performance_index", "wlm_resource_group_in_flight"):
            assert any(key[0] == name for key in queue_series), name
        assert any(key[0] == "wlm_service_class_response_seconds_count" and live[key] == 1 for key in queue_series)
        changing = ("wlm_queue_oldest_age_seconds", "wlm_queue_metrics_stored", "wlm_queue_metrics_rendered_timestamp_seconds")
        assert {key: live[key] for key in queue_series if key[0] not in changing} == {
            key: served[key] for key in queue_series if key[0] not in changing
        }
        assert before_ms / 1000 <= served[("wlm_queue_metrics_rendered_timestamp_seconds", ())]
