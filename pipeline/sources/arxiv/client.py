"""arXiv over HTTP: OAI-PMH ``ListRecords`` pages and API ``id_list`` lookups. The only module
that talks to arXiv.

Politeness: one ``requests.Session`` with a single pooled connection, and at least
``settings.arxiv_delay_s`` between the starts of two requests (arXiv asks for 3 s).
Retries (tenacity): transient network errors (timeouts, resets), 429/500/502/503/504 and bodies that are not well-formed XML
(a cut connection) are retried up to ``settings.retry_max_attempts`` times; the wait is the
server's ``Retry-After`` when it sends one (up to ``settings.http_retry_after_max_s``, read as every
source reads it: :mod:`pipeline.sources.http`), else exponential up to ``settings.retry_max_backoff_s``. A host that does not resolve or refuses the connection is not
retried: :class:`~pipeline.errors.ServiceUnreachable` names the URL and its setting
(``PAPERKB_ARXIV_OAI_URL`` / ``PAPERKB_ARXIV_API_URL``; see ``pipeline.sources.net``).

Every response body that is going to be parsed is written byte-exact to the raw zone first
(``raw/arxiv/oai/...`` and ``raw/arxiv/api/...``); the parse here only decides what the harvest
does next (resumption token, OAI error code). Transient 5xx/429 bodies are not stored: they carry
no metadata and would only clutter ``--replay``.

Why not Sickle: Sickle's iterator hides page boundaries (we checkpoint the resumption token after
each stored page), hands out decoded text instead of the exact bytes, retries only on status
codes (not on network errors or truncated bodies) and sleeps for an uncapped Retry-After. Used as
a bare request helper it would add nothing over ``requests``, so the OAI protocol (a handful of
query parameters and the ``<error code>``/``<resumptionToken>`` elements) is done here with
requests + lxml (``pipeline.sources.arxiv.records``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from pipeline.sources.arxiv.records import AtomFeed, MalformedResponse, OaiPage, read_atom_feed, read_oai_page
from pipeline.raw import RawEntry, RawZone
from pipeline.settings import Settings
from pipeline.sources.http import RateLimiter, parse_retry_after, retry_after_wait
from pipeline.sources.net import raise_if_unreachable

log = logging.getLogger(__name__)

RAW_SOURCE = "arxiv"
RETRY_STATUSES = {429, 500, 502, 503, 504}


class RetryableHTTP(Exception):
    """A response worth asking again for (429/5xx)."""

    def __init__(self, status: int, url: str, retry_after: float | None):
        super().__init__(f"HTTP {status} from {url}")
        self.status = status
        self.retry_after = retry_after


class ArxivUnavailable(Exception):
    """arXiv did not answer usefully after every retry (network errors or 5xx)."""


class HttpStatusError(Exception):
    """A non-retryable HTTP status whose body is not a document we understand."""

    def __init__(self, status: int, url: str):
        super().__init__(f"HTTP {status} from {url}")
        self.status = status


class PoliteSession:
    """One connection to arXiv, a minimum delay between requests, capped-backoff retries."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.session = requests.Session()
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=1, pool_block=True, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers["User-Agent"] = settings.user_agent
        self._limiter = RateLimiter(settings.arxiv_delay_s)
        self._lock = threading.Lock()
        self.requests_made = 0

    def close(self) -> None:
        self.session.close()

    def get_once(self, url: str, params: dict[str, Any], *, service: str, setting: str) -> requests.Response:
        """One polite GET. Raises ``RetryableHTTP`` for 429/5xx, ``ServiceUnreachable`` when the host does
        not resolve or refuses (``setting`` holds ``url``); returns other responses as they are."""
        with self._lock:
            self._limiter.wait()
            self.requests_made += 1
            try:
                resp = self.session.get(url, params=params, timeout=self.settings.http_timeout_s)
            except requests.ConnectionError as exc:
                raise_if_unreachable(exc, service=service, url=url, setting=setting)
                raise
        if resp.status_code in RETRY_STATUSES:
            ra = parse_retry_after(resp.headers.get("Retry-After"))
            log.warning("arXiv answered HTTP %s%s; will retry", resp.status_code,
                        f" (Retry-After {ra:.0f}s)" if ra is not None else "")
            raise RetryableHTTP(resp.status_code, resp.url, ra)
        return resp

    def _wait(self, state: RetryCallState) -> float:
        cap = self.settings.retry_max_backoff_s
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RetryableHTTP) and exc.retry_after is not None:
            return retry_after_wait(exc.retry_after, self.settings.http_retry_after_max_s, "arXiv")
        return wait_exponential(multiplier=1, min=0, max=cap)(state)

    def retrying(self, *extra_retry_on: type[BaseException]) -> Retrying:
        return Retrying(
            retry=retry_if_exception_type((requests.ConnectionError, requests.Timeout, RetryableHTTP, *extra_retry_on)),
            stop=stop_after_attempt(max(1, self.settings.retry_max_attempts)),
            wait=self._wait,
            reraise=True,
            before_sleep=lambda s: log.info("retrying arXiv request (attempt %d): %s", s.attempt_number + 1,
                                            s.outcome.exception() if s.outcome else ""),
        )


class ArxivClient:
    """OAI-PMH pages and API lookups, each stored in the raw zone before it is parsed."""

    def __init__(self, settings: Settings, raw: RawZone | None = None):
        self.settings = settings
        self.raw = raw or RawZone(settings.raw_dir)
        self.http = PoliteSession(settings)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "ArxivClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _store(self, relpath: str, resp: requests.Response, params: dict[str, Any]) -> RawEntry:
        return self.raw.write(
            RAW_SOURCE, relpath, resp.content, url=resp.url, params=params, status=resp.status_code,
            content_type=resp.headers.get("Content-Type"),
        )

    # -- OAI-PMH ---------------------------------------------------------------------------------
    def oai_page(self, params: dict[str, Any], relpath: str) -> tuple[RawEntry, OaiPage]:
        """Fetch one ``ListRecords`` page, store it at ``raw/arxiv/<relpath>``, return it parsed.

        Raises ``ServiceUnreachable`` at once when the host does not resolve or refuses,
        ``ArxivUnavailable`` when every attempt failed with transient network errors or 5xx,
        ``MalformedResponse`` when the last stored body was still not well-formed (the caller
        rejects it; the body stays in the raw zone), ``HttpStatusError`` for other HTTP errors."""
        url = self.settings.arxiv_oai_url

        def attempt() -> tuple[RawEntry, OaiPage]:
            resp = self.http.get_once(url, params, service="arXiv OAI-PMH", setting="PAPERKB_ARXIV_OAI_URL")
            entry = self._store(relpath, resp, params)
            try:
                page = read_oai_page(self.raw.path(entry))
            except MalformedResponse:
                if resp.status_code >= 400:
                    raise HttpStatusError(resp.status_code, resp.url) from None
                raise
            if resp.status_code >= 400 and not page.error_code:
                raise HttpStatusError(resp.status_code, resp.url)
            return entry, page

        try:
            return self.http.retrying(MalformedResponse)(attempt)
        except (requests.ConnectionError, requests.Timeout, RetryableHTTP) as exc:
            raise ArxivUnavailable(
                f"arXiv OAI-PMH ({url}) did not answer after {self.settings.retry_max_attempts} attempts: {exc}"
            ) from exc

    # -- API (Atom) ------------------------------------------------------------------------------
    def api_id_list(self, ids: list[str], relpath: str) -> tuple[RawEntry, AtomFeed]:
        """Ask the arXiv API for ``ids`` (one request), store the feed, return it parsed.

        Raises ``ApiErrorFeed`` when arXiv answers with its error feed (HTTP 400)."""
        url = self.settings.arxiv_api_url
        params = {"id_list": ",".join(ids), "start": 0, "max_results": len(ids)}

        def attempt() -> tuple[RawEntry, AtomFeed]:
            resp = self.http.get_once(url, params, service="the arXiv API", setting="PAPERKB_ARXIV_API_URL")
            entry = self._store(relpath, resp, params)
            try:
                feed = read_atom_feed(self.raw.read(entry))
            except MalformedResponse:
                if resp.status_code >= 400:
                    raise HttpStatusError(resp.status_code, resp.url) from None
                raise
            if resp.status_code >= 400:
                raise HttpStatusError(resp.status_code, resp.url)
            return entry, feed

        try:
            return self.http.retrying(MalformedResponse)(attempt)
        except (requests.ConnectionError, requests.Timeout, RetryableHTTP) as exc:
            raise ArxivUnavailable(
                f"arXiv API ({url}) did not answer after {self.settings.retry_max_attempts} attempts: {exc}"
            ) from exc
