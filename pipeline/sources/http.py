"""What the HTTP clients of the sources share: one reading of ``Retry-After`` and one politeness clock.

arXiv (:mod:`pipeline.sources.arxiv.client`), Semantic Scholar (:mod:`pipeline.sources.s2.client`) and the
PDF downloader (:mod:`pipeline.sources.pdf.client`) each keep their own retry loop (tenacity), because
what counts as a failure differs (a truncated OAI page, S2's consecutive-failure stop, a PDF host that
refuses), but they read ``Retry-After`` the same way (delta-seconds or an HTTP date, RFC 9110) and honour
it up to the same cap, ``PAPERKB_HTTP_RETRY_AFTER_MAX_S``.
"""

from __future__ import annotations

import email.utils
import logging
import time
from datetime import datetime, timezone
from typing import Callable

log = logging.getLogger(__name__)


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date (a date in the past is 0); ``None`` when
    absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def retry_after_wait(retry_after: float, cap_s: float, service: str) -> float:
    """The wait a server's ``Retry-After`` asks for, cut to ``cap_s`` (logged when cut)."""
    if retry_after > cap_s:
        log.warning("%s asked to wait %.0fs (Retry-After); waiting %.0fs (PAPERKB_HTTP_RETRY_AFTER_MAX_S)",
                    service, retry_after, cap_s)
        return cap_s
    return retry_after


class RateLimiter:
    """At most one request per ``delay_s`` seconds (measured start to start, monotonic clock)."""

    def __init__(self, delay_s: float, sleep: Callable[[float], None] = time.sleep):
        self.delay_s = max(0.0, float(delay_s))
        self._sleep = sleep
        self._last: float | None = None
        self.waited_s = 0.0

    def wait(self) -> float:
        now = time.monotonic()
        pause = 0.0
        if self._last is not None and self.delay_s > 0:
            pause = self._last + self.delay_s - now
            if pause > 0:
                self._sleep(pause)
                self.waited_s += pause
            else:
                pause = 0.0
        self._last = time.monotonic()
        return pause
