"""pipeline.sources.http: the one reading of Retry-After that arXiv, S2 and the PDF downloader share (their
clients are tested against local servers in test_arxiv_client.py, test_s2_client.py, test_fulltext_run.py)."""

from __future__ import annotations

import email.utils
import time

import pytest

from pipeline.sources.http import RateLimiter, parse_retry_after, retry_after_wait


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
