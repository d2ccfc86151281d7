"""PDF downloads: arXiv (``{arxiv_pdf_url}/{id}``) or S2's openAccessPdf, politely and with retries.

One place talks HTTP for PDFs. A 200 body is written byte-exact to the raw zone
(``raw/pdf/<paper_id>.pdf``, manifest line with url/status/content type) *before* anyone looks at it;
whether it is really a PDF is decided later by the parser, from the raw zone, so ``--replay`` makes
the same decision. Errors are answers, not exceptions:

- 404/403/410 (and other 4xx except 429): permanent, ``FetchResult.reason = 'http_<status>'``;
- 429, 5xx, timeouts and cut connections are retried (tenacity, exponential backoff capped at
  ``retry_max_backoff_s``; a ``Retry-After``, seconds or HTTP date, honoured up to
  ``http_retry_after_max_s`` as every source does: :mod:`pipeline.sources.http`); when the attempts run out the
  reason is ``download_failed`` and the paper is tried again on the next run.

Except when the host cannot be reached at all (it does not resolve, or refuses; see
``pipeline.sources.net``): no retries. The arXiv PDF host (``PAPERKB_ARXIV_PDF_URL``) unreachable
stops the step at once with :class:`~pipeline.errors.ServiceUnreachable`, instead of rejecting every
paper. Another host (an S2 open-access link) unreachable is that paper's ``download_failed``, at once;
``max_consecutive_failures`` of those in a row means no network, and stops the step the same way.

Politeness: one request at a time, at least ``arxiv_delay_s`` seconds apart (arXiv asks for 3 s),
and a ``User-Agent`` that names the project.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from pipeline.errors import ServiceUnreachable
from pipeline.raw import RawEntry, RawZone
from pipeline.settings import Settings
from pipeline.sources.http import parse_retry_after, retry_after_wait
from pipeline.sources.net import unreachable_reason

log = logging.getLogger(__name__)

SOURCE = "pdf"


def raw_relpath(paper_id: str) -> str:
    """``2104.12255`` -> ``2104.12255.pdf``; old-style ``astro-ph/0601001`` -> ``astro-ph/0601001.pdf``;
    collection ids ``cisi:12`` -> ``cisi_12.pdf``."""
    return paper_id.replace(":", "_") + ".pdf"


def arxiv_pdf_url(settings: Settings, external_id: str) -> str:
    return f"{settings.arxiv_pdf_url.rstrip('/')}/{external_id}"


@dataclass
class FetchResult:
    paper_id: str
    url: str
    entry: RawEntry | None = None  # set when a 200 body landed in the raw zone
    status: int | None = None
    reason: str | None = None  # None = fetched; else http_<status> | download_failed | too_large
    detail: str = ""

    @property
    def permanent(self) -> bool:
        """A failure that will not go away by asking again (4xx, too large)."""
        return self.reason is not None and self.reason != "download_failed"


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class _Unreachable(Exception):
    """The host does not resolve or refuses: not worth another try."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class PdfFetcher:
    """Downloads PDFs into the raw zone, one at a time, ``arxiv_delay_s`` apart."""

    def __init__(self, settings: Settings, raw: RawZone | None = None, session: requests.Session | None = None):
        self.settings = settings
        self.raw = raw or RawZone(settings.raw_dir)
        self.session = session or requests.Session()
        self.session.headers.setdefault("User-Agent", settings.user_agent)
        self._last_request = 0.0
        self.requests = 0
        self.unreachable_in_a_row = 0  # open-access hosts that could not be reached, one after another

    def close(self) -> None:
        self.session.close()

    def _wait_politely(self) -> None:
        delay = self.settings.arxiv_delay_s
        if delay > 0 and self._last_request:
            remaining = self._last_request + delay - time.monotonic()
            if remaining > 0:
                time.sleep(remaining)
        self._last_request = time.monotonic()

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return retry_after_wait(exc.retry_after, self.settings.http_retry_after_max_s, "the PDF host")
        return wait_exponential(multiplier=1, min=0.5, max=self.settings.retry_max_backoff_s)(state)

    def _get(self, url: str) -> requests.Response:
        self._wait_politely()
        self.requests += 1
        try:
            resp = self.session.get(url, timeout=self.settings.http_timeout_s, allow_redirects=True)
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            reason = unreachable_reason(exc)
            if reason is not None:
                raise _Unreachable(reason) from exc
            raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
        self.unreachable_in_a_row = 0
        if resp.status_code == 429 or resp.status_code >= 500:
            raise _Retryable(f"HTTP {resp.status_code}", retry_after=parse_retry_after(resp.headers.get("Retry-After")))
        return resp

    def _is_arxiv(self, url: str) -> bool:
        return urlsplit(url).netloc.lower() == urlsplit(self.settings.arxiv_pdf_url).netloc.lower()

    def fetch(self, paper_id: str, url: str) -> FetchResult:
        """GET ``url``; store a 200 body in the raw zone. Never raises for HTTP or transient network
        errors; raises ``ServiceUnreachable`` when the arXiv PDF host (or, ``max_consecutive_failures``
        times in a row, other hosts) cannot be reached at all."""
        result = FetchResult(paper_id=paper_id, url=url)
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(max(1, self.settings.retry_max_attempts)),
                wait=self._wait,
                retry=retry_if_exception_type(_Retryable),
                reraise=True,
            ):
                with attempt:
                    resp = self._get(url)
        except _Retryable as exc:
            result.reason, result.detail = "download_failed", f"{url}: {exc} after {self.settings.retry_max_attempts} attempts"
            return result
        except _Unreachable as exc:
            if self._is_arxiv(url):
                raise ServiceUnreachable("the arXiv PDF server", url, "PAPERKB_ARXIV_PDF_URL", exc.reason) from exc
            self.unreachable_in_a_row += 1
            if self.unreachable_in_a_row >= max(1, self.settings.max_consecutive_failures):
                raise ServiceUnreachable("the open-access PDF hosts", url, None,
                                         f"{exc.reason}; {self.unreachable_in_a_row} hosts in a row") from exc
            result.reason, result.detail = "download_failed", f"{url}: {exc.reason} (not retried)"
            return result
        result.status = resp.status_code
        if resp.status_code != 200:
            result.reason, result.detail = f"http_{resp.status_code}", f"{url} answered {resp.status_code}"
            return result
        body = resp.content
        if len(body) > self.settings.pdf_max_bytes:
            result.reason, result.detail = "too_large", f"{url}: {len(body)} bytes > pdf_max_bytes"
            return result
        result.entry = self.raw.write(SOURCE, raw_relpath(paper_id), body, url=url, params={"paper_id": paper_id}, status=resp.status_code,
                                      content_type=resp.headers.get("Content-Type"))
        return result
