"""The one HTTP client every outside service is reached through: arXiv (:mod:`pipeline.sources.arxiv.client`),
Semantic Scholar (:mod:`pipeline.sources.s2.client`, the dataset files of :mod:`pipeline.sources.s2.datasets`),
PDF hosts (:mod:`pipeline.sources.pdf.client`) and the LLM endpoint of query expansion
(:mod:`pipeline.query.expand`).

:class:`PoliteClient` is a ``requests.Session`` with one policy:

- **politeness per host**: one connection and at most one request per ``delay_s`` seconds to each host
  (start to start), and a ``User-Agent`` that names the project;
- **retries** (tenacity) on 429, 5xx, timeouts and cut connections, up to ``max_attempts``; the wait is
  the server's ``Retry-After`` when it sends one -- delta-seconds or an HTTP date (RFC 9110), read by
  :func:`parse_retry_after` -- cut to ``PAPERKB_HTTP_RETRY_AFTER_MAX_S``, else full-jitter exponential
  backoff up to ``PAPERKB_RETRY_MAX_BACKOFF_S``;
- **no retries when the host cannot be reached at all** (it does not resolve, refuses, no route:
  :mod:`pipeline.sources.net`): :class:`~pipeline.errors.ServiceUnreachable` at once, naming the setting
  that holds the URL.

A service adds what is its own on top: arXiv retries a body that is not well-formed XML
(``retrying(MalformedResponse)``), S2 stops after ``max_consecutive_failures`` failed requests in a row
(``retrying(stop=...)``), the PDF downloader turns failures into per-paper answers. Other statuses come
back as responses for the caller to read.

Why requests + tenacity and not urllib3's ``Retry``: the raw zone stores bodies the service's own code
has to judge (a truncated OAI page is HTTP 200), so the retry decision has to sit above the transport.
"""

from __future__ import annotations

import email.utils
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from pipeline.errors import ServiceUnreachable
from pipeline.settings import Settings
from pipeline.sources.net import unreachable_reason

log = logging.getLogger(__name__)

# network failures worth another try (a host that cannot be reached at all is told apart by net.py)
TRANSIENT_ERRORS = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)


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


class RetryableHTTP(Exception):
    """A 429, a 5xx, a timeout or a cut connection: worth another try after a pause."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


@dataclass
class HttpStats:
    """What a client did: requests sent (retries included), retries, and where the time went."""

    requests: int = 0
    retries: int = 0
    failures_in_a_row: int = 0  # 429/5xx/transient failures since the last answer that was not one
    backoff_wait_s: float = 0.0  # sleeping imposed by Retry-After / backoff
    http_s: float = 0.0  # time inside requests (network + server)
    limiters: dict[str, RateLimiter] = field(default_factory=dict)

    @property
    def rate_wait_s(self) -> float:
        """Sleeping imposed by the per-host politeness delay."""
        return sum(lim.waited_s for lim in self.limiters.values())


@dataclass(frozen=True)
class Endpoint:
    """What messages name: the service ("arXiv OAI-PMH"), its URL as configured, and the setting that
    holds it (``None`` for hosts no setting names, e.g. open-access PDF links)."""

    service: str
    url: str
    setting: str | None = None


class PoliteClient:
    """One ``requests.Session`` with the politeness and retry policy above, for ``endpoint`` (a call may
    name another endpoint of the same service, e.g. arXiv's API beside its OAI-PMH).
    ``max_attempts`` defaults to ``retry_max_attempts``, ``timeout_s`` to ``http_timeout_s``."""

    def __init__(self, settings: Settings, endpoint: Endpoint, *, delay_s: float = 0.0,
                 max_attempts: int | None = None, timeout_s: float | None = None,
                 headers: dict[str, str] | None = None, sleep: Callable[[float], None] = time.sleep):
        self.settings = settings
        self.endpoint = endpoint
        self.delay_s = delay_s
        self.max_attempts = max(1, settings.retry_max_attempts if max_attempts is None else max_attempts)
        self.timeout_s = settings.http_timeout_s if timeout_s is None else timeout_s
        self.session = requests.Session()
        one_connection = HTTPAdapter(pool_maxsize=1, pool_block=True, max_retries=0)  # per host
        self.session.mount("http://", one_connection)
        self.session.mount("https://", one_connection)
        self.session.headers["User-Agent"] = settings.user_agent
        self.session.headers.update(headers or {})
        self._sleep = sleep
        self._hosts: dict[str, threading.Lock] = {}
        self._hosts_lock = threading.Lock()
        self.stats = HttpStats()

    def close(self) -> None:
        self.session.close()

    # -- one attempt -----------------------------------------------------------------------------
    def _host(self, url: str) -> tuple[threading.Lock, RateLimiter]:
        host = urlsplit(url).netloc.lower()
        with self._hosts_lock:
            if host not in self._hosts:
                self._hosts[host] = threading.Lock()
                self.stats.limiters[host] = RateLimiter(self.delay_s, self._sleep)
            return self._hosts[host], self.stats.limiters[host]

    @property
    def service(self) -> str:
        return self.endpoint.service

    def send(self, method: str, url: str, *, endpoint: Endpoint | None = None, **kwargs: Any) -> requests.Response:
        """One polite attempt. Raises :class:`ServiceUnreachable` when the host cannot be reached,
        :class:`RetryableHTTP` for 429/5xx and transient network errors; returns any other answer."""
        where = endpoint or self.endpoint
        lock, limiter = self._host(url)
        kwargs.setdefault("timeout", self.timeout_s)
        with lock:
            limiter.wait()
            self.stats.requests += 1
            t0 = time.perf_counter()
            try:
                resp = self.session.request(method, url, **kwargs)
            except TRANSIENT_ERRORS as exc:
                reason = unreachable_reason(exc)
                if reason is not None:
                    raise ServiceUnreachable(where.service, where.url, where.setting, reason) from exc
                self.stats.failures_in_a_row += 1
                raise RetryableHTTP(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
            finally:
                self.stats.http_s += time.perf_counter() - t0
        if resp.status_code == 429 or resp.status_code >= 500:
            self.stats.failures_in_a_row += 1
            ra = parse_retry_after(resp.headers.get("Retry-After"))
            resp.close()
            reason = f" {resp.reason}" if resp.reason else ""
            raise RetryableHTTP(f"HTTP {resp.status_code}{reason} on {method} {url}", status=resp.status_code,
                                retry_after=ra)
        self.stats.failures_in_a_row = 0
        return resp

    # -- retries ---------------------------------------------------------------------------------
    def wait_s(self, state: RetryCallState) -> float:
        """``Retry-After`` (capped) when the server sent one, else full-jitter exponential backoff."""
        exc = state.outcome.exception() if state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return retry_after_wait(retry_after, self.settings.http_retry_after_max_s, self.service)
        return wait_random_exponential(multiplier=1, max=max(0.0, self.settings.retry_max_backoff_s))(state)

    def _backoff_sleep(self, seconds: float) -> None:
        self.stats.backoff_wait_s += seconds
        self._sleep(seconds)

    def _before_sleep(self, state: RetryCallState) -> None:
        self.stats.retries += 1
        exc = state.outcome.exception() if state.outcome else None
        log.warning("%s: %s; retrying in %.1fs (attempt %d of %d)", self.service, exc, state.upcoming_sleep,
                    state.attempt_number + 1, self.max_attempts)

    def retrying(self, *extra_retry_on: type[BaseException],
                 stop: Callable[[RetryCallState], bool] | None = None) -> Retrying:
        """A tenacity ``Retrying`` with this client's policy; ``extra_retry_on`` adds the service's own
        retryable failures, ``stop`` its own reason to give up early. The last failure is re-raised."""
        attempts = stop_after_attempt(self.max_attempts)
        return Retrying(
            retry=retry_if_exception_type((RetryableHTTP, *extra_retry_on)),
            stop=attempts if stop is None else (lambda state: attempts(state) or stop(state)),
            wait=self.wait_s,
            sleep=self._backoff_sleep,
            before_sleep=self._before_sleep,
            reraise=True,
        )

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        """:meth:`send` with retries; raises the last :class:`RetryableHTTP` when the attempts run out."""
        return self.retrying()(self.send, method, url, **kwargs)
