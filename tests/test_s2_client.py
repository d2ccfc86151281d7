"""pipeline.sources.s2.client against recorded Semantic Scholar answers served by a local HTTP server."""

from __future__ import annotations

import json

import pytest

from pipeline.errors import StepFailed, UserError
from pipeline.raw import RawZone
from pipeline.sources.http import parse_retry_after
from pipeline.sources.s2.client import S2Client, S2NotFound
from s2_replay import S2Replay, fail_first, load_cassette


@pytest.fixture
def replay(httpserver, shared_data):
    return S2Replay(httpserver, shared_data / "s2")


def _client(settings, replay, **over):
    s = settings.model_copy(update={"s2_api_url": replay.api_url, **over})
    return S2Client(s, RawZone(s.raw_dir)), s


def test_batch_with_missing_ids_is_stored_byte_exact(settings, replay, shared_data):
    [rec] = replay.load("test_get_papers_not_found_warning.yaml")
    ids = json.loads(rec["body"])["ids"]
    client, s = _client(settings, replay)
    entry = client.fetch_batch(ids)
    raw = RawZone(s.raw_dir)
    assert raw.read(entry) == rec["content"]  # byte-exact, before any parsing
    assert entry.params["ids"] == ids and entry.params["kind"] == "batch"
    body = json.loads(raw.read(entry))
    assert len(body) == len(ids) and body[0] is None  # the id S2 does not know is a null entry
    [call] = replay.seen
    assert call.method == "POST" and call.path.endswith("/paper/batch")
    assert json.loads(call.body) == {"ids": ids}
    assert call.query["fields"] == s.s2_paper_fields
    assert client.stats.total_calls == 1 and client.stats.calls == {"batch": 1}


def test_references_paging_follows_next(settings, replay, shared_data):
    recorded = replay.load("test_get_paper_references.yaml",
                           alias={"/graph/v1/paper/10.2139/ssrn.2250500": "/graph/v1/paper/DOI-PAPER"})
    client, s = _client(settings, replay, s2_page_size=50)
    entries, offset = [], 0
    while True:
        e = client.fetch_edges("references", "DOI-PAPER", offset)
        entries.append(e)
        nxt = json.loads(RawZone(s.raw_dir).read(e)).get("next")
        if nxt is None:
            break
        offset = nxt
    assert [RawZone(s.raw_dir).read(e) for e in entries] == [r["content"] for r in recorded]
    assert [c.query["offset"] for c in replay.seen] == ["0", "50"]
    assert all(c.query["limit"] == "50" for c in replay.seen)


def test_400_is_a_clear_user_error(settings, replay):
    replay.load("test_bad_query_parameters.yaml")
    client, _ = _client(settings, replay)
    with pytest.raises(UserError, match=r"HTTP 400.*Unrecognized or unsupported fields: \[unknown\]"):
        client.get_paper("10.1093/mind/lix.236.433", fields="unknown")
    assert len(replay.seen) == 1  # a 400 is never retried


def test_403_names_the_api_key(settings, replay, shared_data):
    [rec] = replay.load("test_debug.yaml")
    ids = json.loads(rec["body"])["ids"]
    client, _ = _client(settings, replay, s2_api_key="F@k3K3y")
    with pytest.raises(UserError, match=r"HTTP 403 Forbidden.*S2_API_KEY"):
        client.fetch_batch(ids)
    assert replay.seen[0].headers.get("X-Api-Key") == "F@k3K3y"
    assert len(replay.seen) == 1
    client2, _ = _client(settings, replay)
    with pytest.raises(UserError, match="no S2_API_KEY is set"):
        client2.fetch_batch(ids)
    assert "X-Api-Key" not in replay.seen[1].headers


def test_404_for_a_paper_is_not_found_and_kept(settings, replay, shared_data):
    replay.load("test_not_found.yaml")
    client, s = _client(settings, replay)
    with pytest.raises(S2NotFound, match="Paper with id 0 not found") as err:
        client.get_paper("0", fields="t,i,t,l,e")
    assert err.value.entry.status == 404
    assert RawZone(s.raw_dir).read(err.value.entry) == load_cassette(shared_data / "s2/test_not_found.yaml")[0]["content"]


def test_429_retry_after_is_honoured_then_success(settings, replay):
    [rec] = replay.load("test_get_papers.yaml")
    ids = json.loads(rec["body"])["ids"]
    replay.interceptors.append(fail_first(2, retry_after="1"))
    client, s = _client(settings, replay)
    entry = client.fetch_batch(ids)
    assert RawZone(s.raw_dir).read(entry) == rec["content"]
    assert [c.status for c in replay.seen] == [429, 429, 200]
    gaps = [b.at - a.at for a, b in zip(replay.seen, replay.seen[1:])]
    assert all(g >= 0.95 for g in gaps), gaps  # Retry-After: 1 honoured although retry_max_backoff_s is 0.05
    assert client.stats.retries == 2 and client.consecutive_failures == 0
    assert client.stats.backoff_wait_s >= 2.0


def test_5xx_backs_off_with_jitter_then_success(settings, replay):
    [rec] = replay.load("test_get_papers.yaml")
    replay.interceptors.append(fail_first(3, status=503, retry_after=None))
    client, _ = _client(settings, replay)
    client.fetch_batch(json.loads(rec["body"])["ids"])
    assert [c.status for c in replay.seen] == [503, 503, 503, 200]
    assert 0 <= client.stats.backoff_wait_s <= 3 * settings.retry_max_backoff_s + 1e-9


def test_429_storm_stops_cleanly(settings, replay):
    [rec] = replay.load("test_get_papers.yaml")
    replay.interceptors.append(fail_first(10**9, retry_after="0"))
    client, s = _client(settings, replay, max_consecutive_failures=3, retry_max_attempts=10)
    with pytest.raises(StepFailed, match="3 consecutive failed requests"):
        client.fetch_batch(json.loads(rec["body"])["ids"])
    assert len(replay.seen) == 3
    assert list(RawZone(s.raw_dir).entries("s2")) == []  # 429 bodies are not data


def test_rate_limiter_spaces_requests(settings, replay):
    [rec] = replay.load("test_get_papers.yaml")
    ids = json.loads(rec["body"])["ids"]
    client, _ = _client(settings, replay, s2_delay_s=0.3)
    for _ in range(3):
        client.fetch_batch(ids)
    gaps = [b.at - a.at for a, b in zip(replay.seen, replay.seen[1:])]
    assert all(g >= 0.28 for g in gaps), gaps
    assert 0.5 <= client.stats_dict()["rate_wait_s"] <= 0.7


def test_retry_after_http_date():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert parse_retry_after("nonsense") is None and parse_retry_after(None) is None


def test_a_batch_list_is_paged_only_when_cut_off_absent_or_emptied(shared_data):
    """On the recorded Paper.json (a real record with its lists: 14 of 14 references, 1,000 of 10,059
    citations) and variants of it."""
    import json

    from pipeline.sources.s2.client import list_needs_paging

    paper = json.loads((shared_data / "s2/Paper.json").read_bytes())
    cap = len(paper["citations"])
    assert cap == 1000 and paper["citationCount"] > cap
    assert list_needs_paging(paper, "citations", cap)  # cut at the cap while the count is larger
    assert not list_needs_paging(paper, "references", cap)  # whole
    assert list_needs_paging({k: v for k, v in paper.items() if k != "references"}, "references", cap)  # not given
    assert list_needs_paging({**paper, "references": []}, "references", cap)  # emptied while the count is 14
    assert not list_needs_paging({**paper, "references": [], "referenceCount": 0}, "references", cap)
    assert not list_needs_paging({**paper, "citationCount": cap}, "citations", cap)  # exactly the cap, nothing more


def test_a_retry_after_beyond_the_cap_is_cut_to_it_like_every_source(settings, replay, caplog):
    """One policy for every source (pipeline.sources.http): Retry-After, seconds or an HTTP date, is
    honoured up to PAPERKB_HTTP_RETRY_AFTER_MAX_S; a longer ask is cut and logged."""
    import email.utils
    import logging
    import time as _time

    [rec] = replay.load("test_get_papers.yaml")
    ids = json.loads(rec["body"])["ids"]
    in_an_hour = email.utils.formatdate(_time.time() + 3600, usegmt=True)  # the HTTP-date form
    replay.interceptors.append(fail_first(1, retry_after=in_an_hour))
    client, s = _client(settings, replay, http_retry_after_max_s=0.3)
    with caplog.at_level(logging.WARNING, logger="pipeline.sources.http"):
        entry = client.fetch_batch(ids)
    assert RawZone(s.raw_dir).read(entry) == rec["content"]
    gap = replay.seen[1].at - replay.seen[0].at
    assert 0.25 <= gap < 5, gap  # an hour asked, 0.3 s waited
    assert "Semantic Scholar asked to wait 3600s" in caplog.text or "Semantic Scholar asked to wait 3599s" in caplog.text
