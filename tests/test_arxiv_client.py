"""pipeline.sources.arxiv.client over real HTTP: politeness delay, Retry-After, capped backoff, network
errors, truncated bodies, raw zone before parse."""

from __future__ import annotations

import time

import pytest

from arxiv_replay import LAST_PAGE, LIST_PAGE, ArxivReplay
from pipeline.sources.arxiv.records import MalformedResponse
from pipeline.raw import RawZone
from pipeline.sources.arxiv.client import ArxivClient, ArxivUnavailable
from pipeline.sources.http import parse_retry_after

START = {"verb": "ListRecords", "metadataPrefix": "arXivRaw", "set": "cs"}


@pytest.fixture
def replay(httpserver, shared_data):
    return ArxivReplay(shared_data / "arxiv").install(httpserver)


@pytest.fixture
def hs(settings, httpserver):
    return settings.model_copy(update={"arxiv_oai_url": httpserver.url_for("/oai"),
                                       "arxiv_api_url": httpserver.url_for("/api/query"), "retry_max_attempts": 3})


def gaps(log):
    return [b.at - a.at for a, b in zip(log, log[1:])]


def test_politeness_delay_between_requests(hs, replay):
    s = hs.model_copy(update={"arxiv_delay_s": 0.3})
    replay.first = [LIST_PAGE]
    with ArxivClient(s) as c:
        for i in range(3):
            c.oai_page(START, f"oai/t/page-{i}.xml")
        adapter = c.http.session.get_adapter(s.arxiv_oai_url)
        assert adapter._pool_maxsize == 1  # one connection
    # arrival times at the server jitter a little on a busy machine; the client spaces the starts
    assert len(replay.oai_log) == 3 and all(g >= 0.2 for g in gaps(replay.oai_log))
    assert replay.oai_log[-1].at - replay.oai_log[0].at >= 0.55


def test_503_retry_after_is_honoured_but_capped(hs, replay):
    replay.first = [(503, b"busy", {"Retry-After": "5"}), LIST_PAGE]
    s = hs.model_copy(update={"http_retry_after_max_s": 0.4})
    with ArxivClient(s) as c:
        entry, page = c.oai_page(START, "oai/t/page-1.xml")
    g, = gaps(replay.oai_log)
    assert 0.3 <= g < 3  # waited for Retry-After (5 s), cut to the 0.4 s cap
    assert len(page.records) == 6 and entry.status == 200


def test_retry_after_below_the_cap_is_waited_in_full(hs, replay):
    replay.first = [(503, b"busy", {"Retry-After": "1"}), LIST_PAGE]
    with ArxivClient(hs.model_copy(update={"http_retry_after_max_s": 5})) as c:
        c.oai_page(START, "oai/t/page-1.xml")
    assert gaps(replay.oai_log)[0] >= 0.9


def test_persistent_5xx_gives_up_after_the_configured_attempts(hs, replay):
    replay.first = [(503, b"busy", {})]
    with ArxivClient(hs) as c, pytest.raises(ArxivUnavailable, match="after 3 attempts"):
        c.oai_page(START, "oai/t/page-1.xml")
    assert len(replay.oai_log) == 3
    assert list(RawZone(hs.raw_dir).entries("arxiv")) == []  # transient error bodies are not stored


def test_timeouts_are_retried_then_reported(hs, replay):
    # a refused connection or a name that does not resolve is not retried: tests/test_unreachable.py
    answered = []

    def slow():
        time.sleep(0.4)
        answered.append(1)
        return LIST_PAGE

    replay.first = [slow]
    s = hs.model_copy(update={"http_timeout_s": 0.2, "retry_max_attempts": 2})
    with ArxivClient(s) as c, pytest.raises(ArxivUnavailable, match="did not answer after 2 attempts"):
        c.oai_page(START, "oai/t/page-1.xml")
    deadline = time.monotonic() + 10  # let the server finish both, so nothing spills into the next test
    while len(answered) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(replay.oai_log) == 2


def test_truncated_body_is_stored_then_retried(hs, replay, shared_data):
    full = (shared_data / "arxiv" / "oai" / LAST_PAGE).read_bytes()
    replay.first = [full[:3000], LAST_PAGE]
    with ArxivClient(hs) as c:
        entry, page = c.oai_page(START, "oai/t/page-1.xml")
    assert len(replay.oai_log) == 2 and len(page.records) == 3
    manifest = RawZone(hs.raw_dir).manifest_path("arxiv").read_text().splitlines()
    assert len(manifest) == 2  # both bodies were written before they were parsed
    assert RawZone(hs.raw_dir).read(entry) == full


def test_truncated_every_time_raises_malformed(hs, replay, shared_data):
    replay.first = [(shared_data / "arxiv" / "oai" / LAST_PAGE).read_bytes()[:3000]]
    with ArxivClient(hs) as c, pytest.raises(MalformedResponse):
        c.oai_page(START, "oai/t/page-1.xml")
    assert len(replay.oai_log) == 3


def test_retry_after_header_forms():
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
