"""arXiv over HTTP: OAI-PMH ``ListRecords`` pages and API ``id_list`` lookups. The only module
that talks to arXiv.

HTTP goes through the shared :class:`~pipeline.sources.http.PoliteClient`: one connection, at least
``settings.arxiv_delay_s`` between the starts of two requests (arXiv asks for 3 s), retries on
429/5xx/timeouts/cut connections with ``Retry-After`` honoured up to ``settings.http_retry_after_max_s``,
and :class:`~pipeline.errors.ServiceUnreachable` at once, naming ``PAPERKB_ARXIV_OAI_URL`` or
``PAPERKB_ARXIV_API_URL``, when the host does not resolve or refuses. On top of that, arXiv's own rule: a
body that is not well-formed XML (a connection cut mid-answer) is stored, then asked for again.

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
from typing import Any, Callable, TypeVar

import requests

from pipeline.raw import RawEntry, RawZone
from pipeline.settings import Settings
from pipeline.sources.arxiv.records import AtomFeed, MalformedResponse, OaiPage, read_atom_feed, read_oai_page
from pipeline.sources.http import Endpoint, PoliteClient, RetryableHTTP

log = logging.getLogger(__name__)

RAW_SOURCE = "arxiv"
T = TypeVar("T")


class ArxivUnavailable(Exception):
    """arXiv did not answer usefully after every retry (network errors or 5xx)."""


class HttpStatusError(Exception):
    """A non-retryable HTTP status whose body is not a document we understand."""

    def __init__(self, status: int, url: str):
        super().__init__(f"HTTP {status} from {url}")
        self.status = status


class ArxivClient:
    """OAI-PMH pages and API lookups, each stored in the raw zone before it is parsed."""

    def __init__(self, settings: Settings, raw: RawZone | None = None):
        self.settings = settings
        self.raw = raw or RawZone(settings.raw_dir)
        self.oai = Endpoint("arXiv OAI-PMH", settings.arxiv_oai_url, "PAPERKB_ARXIV_OAI_URL")
        self.api = Endpoint("the arXiv API", settings.arxiv_api_url, "PAPERKB_ARXIV_API_URL")
        self.http = PoliteClient(settings, self.oai, delay_s=settings.arxiv_delay_s)

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

    def _get_parsed(self, endpoint: Endpoint, params: dict[str, Any], relpath: str, parse: Callable[[RawEntry], T],
                    explains_error: Callable[[T], bool]) -> tuple[RawEntry, T]:
        """GET ``endpoint``, store the body at ``raw/arxiv/<relpath>``, return it parsed; an HTTP error
        status is :class:`HttpStatusError` unless the parsed body ``explains_error`` (an OAI error code)."""

        def attempt() -> tuple[RawEntry, T]:
            resp = self.http.send("GET", endpoint.url, params=params, endpoint=endpoint)
            entry = self._store(relpath, resp, params)
            try:
                doc = parse(entry)
            except MalformedResponse:
                if resp.status_code >= 400:
                    raise HttpStatusError(resp.status_code, resp.url) from None
                raise
            if resp.status_code >= 400 and not explains_error(doc):
                raise HttpStatusError(resp.status_code, resp.url)
            return entry, doc

        try:
            return self.http.retrying(MalformedResponse)(attempt)
        except RetryableHTTP as exc:
            raise ArxivUnavailable(f"{endpoint.service} ({endpoint.url}) did not answer after "
                                   f"{self.http.max_attempts} attempts: {exc}") from exc

    # -- OAI-PMH ---------------------------------------------------------------------------------
    def oai_page(self, params: dict[str, Any], relpath: str) -> tuple[RawEntry, OaiPage]:
        """Fetch one ``ListRecords`` page, store it at ``raw/arxiv/<relpath>``, return it parsed.

        Raises ``ServiceUnreachable`` at once when the host does not resolve or refuses,
        ``ArxivUnavailable`` when every attempt failed with transient network errors or 5xx,
        ``MalformedResponse`` when the last stored body was still not well-formed (the caller
        rejects it; the body stays in the raw zone), ``HttpStatusError`` for other HTTP errors."""
        return self._get_parsed(self.oai, params, relpath, lambda e: read_oai_page(self.raw.path(e)),
                                lambda page: bool(page.error_code))

    # -- API (Atom) ------------------------------------------------------------------------------
    def api_id_list(self, ids: list[str], relpath: str) -> tuple[RawEntry, AtomFeed]:
        """Ask the arXiv API for ``ids`` (one request), store the feed, return it parsed.

        Raises ``ApiErrorFeed`` when arXiv answers with its error feed (HTTP 400)."""
        params = {"id_list": ",".join(ids), "start": 0, "max_results": len(ids)}
        return self._get_parsed(self.api, params, relpath, lambda e: read_atom_feed(self.raw.read(e)),
                                lambda feed: False)
