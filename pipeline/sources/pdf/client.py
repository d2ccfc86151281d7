"""PDF downloads: arXiv (``{arxiv_pdf_url}/{id}``) or S2's openAccessPdf, politely and with retries.

One place talks HTTP for PDFs. A 200 body is written byte-exact to the raw zone
(``raw/pdf/<paper_id>v<N>.pdf`` for arXiv's version N when the harvest knows it, else ``raw/pdf/<paper_id>.pdf``:
:func:`raw_relpath`; manifest line with url/status/content type) *before* anyone looks at it;
whether it is really a PDF is decided later by the parser, from the raw zone, so ``--replay`` makes
the same decision. Errors are answers, not exceptions:

- 404/403/410 (and other 4xx except 429): permanent, ``FetchResult.reason = 'http_<status>'``;
- 429, 5xx, timeouts and cut connections are retried by the shared
  :class:`~pipeline.sources.http.PoliteClient` (backoff capped at ``retry_max_backoff_s``; a
  ``Retry-After``, seconds or HTTP date, honoured up to ``http_retry_after_max_s``); when the attempts
  run out the reason is ``download_failed`` and the paper is tried again on the next run.

Except when the host cannot be reached at all (it does not resolve, or refuses): no retries. The arXiv PDF host (``PAPERKB_ARXIV_PDF_URL``) unreachable
stops the step at once with :class:`~pipeline.errors.ServiceUnreachable`, instead of rejecting every
paper. Another host (an S2 open-access link) unreachable is that paper's ``download_failed``, at once;
``max_consecutive_failures`` of those in a row means no network, and stops the step the same way.

Politeness (the shared client's): one request at a time to each host, at least ``arxiv_delay_s``
seconds apart (arXiv asks for 3 s), and a ``User-Agent`` that names the project.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

from pipeline.errors import ServiceUnreachable
from pipeline.raw import RawEntry, RawZone
from pipeline.settings import Settings
from pipeline.sources.http import Endpoint, PoliteClient, RetryableHTTP

log = logging.getLogger(__name__)

SOURCE = "pdf"


def raw_relpath(paper_id: str, version: int | None = None) -> str:
    """``2104.12255`` -> ``2104.12255.pdf``; old-style ``astro-ph/0601001`` -> ``astro-ph/0601001.pdf``;
    collection ids ``cisi:12`` -> ``cisi_12.pdf``; arXiv's version 3 of a paper -> ``2104.12255v3.pdf``."""
    return paper_id.replace(":", "_") + (f"v{version}" if version else "") + ".pdf"


def stored_pdf(raw: RawZone, paper_id: str, newest: int | None = None) -> tuple[str, int | None] | None:
    """The newest PDF of ``paper_id`` in the raw zone, as (path under ``raw/pdf``, its arXiv version): the highest
    ``<id>v<N>.pdf`` up to ``newest`` (the paper's latest version, as the warehouse knows it), else ``<id>.pdf`` (a
    fetch without a known version, or an import); None when there is none. Each candidate is one look-up: a listing
    of ``raw/pdf`` would read every paper's file, millions at arXiv's size."""
    for version in range(newest or 0, 0, -1):
        if raw.has(SOURCE, raw_relpath(paper_id, version)):
            return raw_relpath(paper_id, version), version
    plain = raw_relpath(paper_id)
    return (plain, None) if raw.has(SOURCE, plain) else None


def arxiv_pdf_url(settings: Settings, external_id: str, version: int | None = None) -> str:
    """arXiv's PDF of ``external_id``: the latest version, or ``version`` exactly."""
    return f"{settings.arxiv_pdf_url.rstrip('/')}/{external_id}" + (f"v{version}" if version else "")


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


class PdfFetcher:
    """Downloads PDFs into the raw zone, one at a time, ``arxiv_delay_s`` apart."""

    def __init__(self, settings: Settings, raw: RawZone | None = None):
        self.settings = settings
        self.raw = raw or RawZone(settings.raw_dir)
        self.arxiv = Endpoint("the arXiv PDF server", settings.arxiv_pdf_url, "PAPERKB_ARXIV_PDF_URL")
        self.http = PoliteClient(settings, self.arxiv, delay_s=settings.arxiv_delay_s)
        self.unreachable_in_a_row = 0  # open-access hosts that could not be reached, one after another

    @property
    def requests(self) -> int:
        """HTTP requests sent (retries included)."""
        return self.http.stats.requests

    def close(self) -> None:
        self.http.close()

    def _is_arxiv(self, url: str) -> bool:
        return urlsplit(url).netloc.lower() == urlsplit(self.settings.arxiv_pdf_url).netloc.lower()

    def fetch(self, paper_id: str, url: str, version: int | None = None) -> FetchResult:
        """GET ``url``; store a 200 body in the raw zone (as arXiv's ``version`` of the paper when given). Never raises
        for HTTP or transient network errors; raises ``ServiceUnreachable`` when the arXiv PDF host (or,
        ``max_consecutive_failures`` times in a row, other hosts) cannot be reached at all."""
        result = FetchResult(paper_id=paper_id, url=url)
        arxiv = self._is_arxiv(url)
        where = Endpoint(self.arxiv.service, url, self.arxiv.setting) if arxiv else Endpoint("a PDF host", url)
        try:
            resp = self.http.request("GET", url, endpoint=where, allow_redirects=True)
        except RetryableHTTP as exc:
            self.unreachable_in_a_row = 0  # the host answered (429/5xx) or timed out: it is there
            result.reason, result.detail = "download_failed", f"{url}: {exc} after {self.http.max_attempts} attempts"
            return result
        except ServiceUnreachable as exc:
            if arxiv:
                raise
            self.unreachable_in_a_row += 1
            if self.unreachable_in_a_row >= max(1, self.settings.max_consecutive_failures):
                raise ServiceUnreachable("the open-access PDF hosts", url, None,
                                         f"{exc.reason}; {self.unreachable_in_a_row} hosts in a row") from exc
            result.reason, result.detail = "download_failed", f"{url}: {exc.reason} (not retried)"
            return result
        self.unreachable_in_a_row = 0
        result.status = resp.status_code
        if resp.status_code != 200:
            result.reason, result.detail = f"http_{resp.status_code}", f"{url} answered {resp.status_code}"
            return result
        body = resp.content
        if len(body) > self.settings.pdf_max_bytes:
            result.reason, result.detail = "too_large", f"{url}: {len(body)} bytes > pdf_max_bytes"
            return result
        params: dict = {"paper_id": paper_id} | ({"version": version} if version else {})
        result.entry = self.raw.write(SOURCE, raw_relpath(paper_id, version), body, url=url, params=params,
                                      status=resp.status_code, content_type=resp.headers.get("Content-Type"))
        return result
