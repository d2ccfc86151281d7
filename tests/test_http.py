"""pipeline.sources.http: the one polite client arXiv, S2, the PDF downloader and the LLM endpoint go through,
against local servers (each service's own rules are tested in test_arxiv_client.py, test_s2_client.py,
test_unreachable.py, test_fulltext_run.py and test_query_search.py)."""

from __future__ import annotations

import email.utils
import socket
import time

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from pipeline.errors import ServiceUnreachable
from pipeline.sources.http import Endpoint, PoliteClient, RateLimiter, RetryableHTTP, parse_retry_after, retry_after_wait


@pytest.mark.parametrize("value, expected", [("120", 120.0), ("1.5", 1.5), (" 7 ", 7.0), ("-3", 0.0), (None, None),
                                             ("", None), ("soon", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)])
def test_retry_after_forms(value, expected):
    assert parse_retry_after(value) == expected


def test_retry_after_as_a_future_http_date():
    in_a_minute = email.utils.formatdate(time.time() + 60, usegmt=True)
    assert 55 <= parse_retry_after(in_a_minute) <= 61


def test_a_long_retry_after_is_cut_to_the_cap_and_logged(caplog):
    assert retry_after_wait(3.0, 10.0, "arXiv") == 3.0
    assert retry_after_wait(3600.0, 600.0, "arXiv") == 600.0
    assert "arXiv asked to wait 3600s (Retry-After); waiting 600s" in caplog.text


def test_rate_limiter_spaces_request_starts():
    slept = []
    limiter = RateLimiter(1.0, sleep=slept.append)
    assert limiter.wait() == 0.0  # the first request does not wait
    assert 0.9 < limiter.wait() <= 1.0 and len(slept) == 1


# ---- the client against real servers ----------------------------------------------------------------------------
def _client(settings, url, **kw):
    return PoliteClient(settings, Endpoint("the test service", url, "PAPERKB_TEST_URL"), **kw)


def _stamped(server: HTTPServer, path: str, answers: list[tuple[int, dict]]):
    """Answer ``path`` with ``answers`` in turn (the last one repeats); returns the arrival times."""
    seen: list[float] = []

    def handler(_request):
        seen.append(time.monotonic())
        status, headers = answers[min(len(seen), len(answers)) - 1]
        return Response("ok" if status == 200 else "busy", status=status, headers=headers)

    server.expect_request(path).respond_with_handler(handler)
    return seen


def test_politeness_is_per_host(settings, httpserver):
    other = HTTPServer(host="127.0.0.1", port=0)
    other.start()
    try:
        a = _stamped(httpserver, "/a", [(200, {})])
        b = _stamped(other, "/b", [(200, {})])
        client = _client(settings, httpserver.url_for("/"), delay_s=0.5)
        client.request("GET", httpserver.url_for("/a"))
        client.request("GET", other.url_for("/b"))  # another host: no wait
        client.request("GET", httpserver.url_for("/a"))  # the same host again: waits its turn
        assert b[0] - a[0] < 0.4 and a[1] - a[0] >= 0.45
        assert client.stats.requests == 3 and 0.3 < client.stats.rate_wait_s <= 0.5
        assert client.session.headers["User-Agent"] == settings.user_agent
    finally:
        other.clear()
        other.stop()


@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_retry_after_in_either_form_is_honoured(settings, httpserver, form):
    # an HTTP date has whole seconds: two seconds ahead is at least one second of wait
    value = "1" if form == "seconds" else email.utils.formatdate(time.time() + 2, usegmt=True)
    seen = _stamped(httpserver, "/x", [(429, {"Retry-After": value}), (200, {})])
    client = _client(settings, httpserver.url_for("/"))
    assert client.request("GET", httpserver.url_for("/x")).status_code == 200
    assert len(seen) == 2 and seen[1] - seen[0] >= 0.9  # although retry_max_backoff_s is 0.05
    assert client.stats.retries == 1 and client.stats.backoff_wait_s >= 0.9


def test_retry_after_is_capped_by_the_setting(settings, httpserver, caplog):
    seen = _stamped(httpserver, "/x", [(503, {"Retry-After": "3600"}), (200, {})])
    client = _client(settings.model_copy(update={"http_retry_after_max_s": 0.3}), httpserver.url_for("/"))
    client.request("GET", httpserver.url_for("/x"))
    assert 0.25 <= seen[1] - seen[0] < 3
    assert "the test service asked to wait 3600s (Retry-After); waiting 0s" in caplog.text


def test_5xx_are_retried_up_to_the_attempts_then_raised(settings, httpserver):
    seen = _stamped(httpserver, "/x", [(502, {})])
    client = _client(settings.model_copy(update={"retry_max_attempts": 3}), httpserver.url_for("/"))
    with pytest.raises(RetryableHTTP) as info:
        client.request("GET", httpserver.url_for("/x"))
    assert info.value.status == 502 and len(seen) == 3 and client.stats.failures_in_a_row == 3
    assert client.stats.backoff_wait_s <= 2 * settings.retry_max_backoff_s + 1e-9  # full jitter, capped


def test_other_statuses_come_back_as_answers(settings, httpserver):
    seen = _stamped(httpserver, "/x", [(404, {})])
    resp = _client(settings, httpserver.url_for("/")).request("GET", httpserver.url_for("/x"))
    assert resp.status_code == 404 and len(seen) == 1


def test_timeouts_are_retried(settings, httpserver):
    calls = []

    def slow_then_fast(_request):
        calls.append(time.monotonic())
        if len(calls) == 1:
            # the test server answers one request at a time: the retry, sent when the client gives up at 1.0 s, waits
            # for this one to end. Only a little longer than the timeout, so that wait stays far below the timeout
            # even on a loaded machine (0.6 s against 0.3 s left the retry ~0.3 s to be answered, and it timed out too)
            time.sleep(1.2)
        return Response("ok")

    httpserver.expect_request("/x").respond_with_handler(slow_then_fast)
    client = _client(settings, httpserver.url_for("/"), timeout_s=1.0)
    assert client.request("GET", httpserver.url_for("/x")).text == "ok"
    assert client.stats.retries == 1


def test_a_refused_connection_is_not_retried(settings):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    client = _client(settings.model_copy(update={"retry_max_attempts": 5, "retry_max_backoff_s": 30.0}), url)
    t0 = time.monotonic()
    with pytest.raises(ServiceUnreachable) as info:
        client.request("GET", url + "/x")
    assert time.monotonic() - t0 < 5 and client.stats.requests == 1
    assert info.value.setting == "PAPERKB_TEST_URL" and info.value.reason == "connection refused"
