"""Semantic Scholar Graph API: the only module that talks HTTP to S2.

Why plain ``requests`` + ``tenacity`` and not the ``semanticscholar`` client: the raw zone must hold
the response bytes exactly as S2 sent them, before anything parses them, and the client hands back
parsed objects only. The client also retries 429s on its own schedule, so we could neither honour
``Retry-After`` precisely, count consecutive failures across calls, nor stop the step cleanly. The
calls we need are three (``POST /paper/batch``, ``GET /paper/{id}/references`` and ``/citations``),
so a small client is less code than working around a large one.

Every successful (2xx) or ``404`` answer is written to the raw zone under ``raw/s2/`` with its request
in the manifest params (``kind``, ``ids`` or ``paper_id``/``offset``/``limit``, ``fields``), so the
parser (``pipeline.steps.enrich``) can rebuild everything from the raw zone alone. 429/5xx answers are
retried and not stored, and so are timeouts and cut connections; 400/401/403 stop with a clear
:class:`~pipeline.errors.UserError`. A host that does not resolve or refuses the connection stops at
once, without retries: :class:`~pipeline.errors.ServiceUnreachable` names the URL and
``PAPERKB_S2_API_URL``. Politeness, retries and ``Retry-After`` are the shared
:class:`~pipeline.sources.http.PoliteClient`'s; S2's own rule on top: the step stops after
``max_consecutive_failures`` failed requests in a row, across calls.

Raw layout::

    raw/s2/batch/<YYYY-MM-DD>/<sha1(ids)[:16]>.json                       POST /paper/batch answer
    raw/s2/<references|citations>/<YYYY-MM-DD>/<paperId>/offset-<n>.json  one page of edges
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

import requests
from tenacity import RetryCallState

from pipeline.errors import StepFailed, UserError
from pipeline.raw import RawEntry, RawZone
from pipeline.settings import Settings
from pipeline.sources.http import Endpoint, HttpStats, PoliteClient, RetryableHTTP

log = logging.getLogger(__name__)

SOURCE = "s2"
EDGE_KINDS = ("references", "citations")
# S2 serves at most the first 10,000 references/citations of a paper through offset paging.
MAX_EDGE_OFFSET = 10_000


class S2NotFound(Exception):
    """S2 answered 404 for a paper (it does not know the id). The answer is in the raw zone."""

    def __init__(self, message: str, entry: RawEntry | None = None):
        super().__init__(message)
        self.entry = entry


@dataclass
class S2Stats:
    """What the client did: HTTP calls by kind, retries, and time spent waiting (the last three from
    the shared client's :class:`~pipeline.sources.http.HttpStats`)."""

    http: HttpStats
    calls: dict[str, int] = field(default_factory=dict)  # HTTP requests sent, per kind (incl. retries)

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def retries(self) -> int:
        return self.http.retries

    @property
    def backoff_wait_s(self) -> float:
        return self.http.backoff_wait_s  # sleeping imposed by 429 Retry-After / jittered backoff

    def as_dict(self) -> dict[str, Any]:
        h = self.http
        return {"http_calls": self.total_calls, "calls": dict(self.calls), "retries": h.retries,
                "rate_wait_s": round(h.rate_wait_s, 3), "backoff_wait_s": round(h.backoff_wait_s, 3),
                "http_s": round(h.http_s, 3)}


# what only an edge carries (the /references and /citations pages), not the paper on its other end
EDGE_ONLY_FIELDS = {"isInfluential", "intents", "contexts", "contextsWithIntent"}
# the count a paper record gives for each list
COUNT_FIELD = {"references": "referenceCount", "citations": "citationCount"}


def batch_fields(paper_fields: str, edge_fields: str, kinds: list[str] | tuple[str, ...]) -> str:
    """``fields`` for ``/paper/batch`` in batch mode: the paper's own fields plus, for each kind, the
    nested list with the other paper's fields (``citations.paperId,citations.title,...``)."""
    partner = [f for f in (x.strip() for x in edge_fields.split(",")) if f and f not in EDGE_ONLY_FIELDS]
    return ",".join([paper_fields, *(f"{kind}.{f}" for kind in kinds for f in partner)])


def list_needs_paging(rec: dict[str, Any], kind: str, cap: int) -> bool:
    """Whether a batch record's ``kind`` list is not the whole list: absent (not asked, or S2 left it
    out), as long as the cap S2 cuts these lists at (1,000) while the paper's count says there are more,
    or empty while the count is not 0 (S2 has answered batch calls with empty lists:
    https://github.com/allenai/s2-folks/issues/199)."""
    items = rec.get(kind)
    if not isinstance(items, list):
        return True
    count = rec.get(COUNT_FIELD[kind])
    if not isinstance(count, int):
        return len(items) >= cap
    return count > len(items) and (len(items) >= cap or not items)


def batch_relpath(ids: list[str], day: str) -> str:
    digest = hashlib.sha1("\n".join(ids).encode("utf-8")).hexdigest()[:16]
    return f"batch/{day}/{digest}.json"


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", part)


def edges_relpath(kind: str, paper_id: str, offset: int, day: str) -> str:
    return f"{kind}/{day}/{_safe(paper_id)}/offset-{offset:07d}.json"


def _error_text(resp: requests.Response) -> str:
    try:
        body = resp.json()
        if isinstance(body, dict):
            return str(body.get("error") or body.get("message") or body)
    except ValueError:
        pass
    return resp.text[:200].strip() or resp.reason or ""


class S2Client:
    """Fetches from the S2 Graph API into the raw zone, politely."""

    def __init__(self, settings: Settings, raw: RawZone, *, sleep: Callable[[float], None] = time.sleep):
        self.settings = settings
        self.raw = raw
        self.base = settings.s2_api_url.rstrip("/")
        # S2 reads the x-api-key header, case-sensitive
        key = {"x-api-key": settings.s2_api_key} if settings.s2_api_key else {}
        self.http = PoliteClient(settings, Endpoint("Semantic Scholar", self.base, "PAPERKB_S2_API_URL"),
                                 delay_s=settings.s2_delay_s, headers=key, sleep=sleep)
        self.stats = S2Stats(self.http.stats)

    # -- public calls ----------------------------------------------------------------------------
    def fetch_batch(self, ids: list[str], *, day: str | None = None, fields: str | None = None) -> RawEntry:
        """``POST /paper/batch`` for up to ``s2_batch_size`` ids; the answer (a list aligned with ``ids``,
        ``null`` where S2 does not know an id) goes to the raw zone byte-exact. ``fields`` defaults to
        ``s2_paper_fields`` (batch mode adds the citations/references lists: :func:`batch_fields`)."""
        if not ids:
            raise ValueError("fetch_batch needs at least one id")
        if len(ids) > self.settings.s2_batch_size:
            raise ValueError(f"S2 batch takes at most {self.settings.s2_batch_size} ids, got {len(ids)}")
        fields = fields or self.settings.s2_paper_fields
        body = json.dumps({"ids": list(ids)}, separators=(",", ":")).encode("utf-8")
        resp = self._request("batch", "POST", "/paper/batch", params={"fields": fields}, data=body)
        return self.raw.write(
            SOURCE, batch_relpath(list(ids), day or _today()), resp.content, url=resp.url,
            params={"kind": "batch", "ids": list(ids), "fields": fields},
            status=resp.status_code, content_type=resp.headers.get("Content-Type"))

    def fetch_edges(self, kind: str, paper_id: str, offset: int = 0, *, day: str | None = None) -> RawEntry:
        """One page of ``/paper/{paper_id}/references`` or ``/citations``; raises :class:`S2NotFound`
        on 404 (the 404 answer is stored too, as evidence)."""
        if kind not in EDGE_KINDS:
            raise ValueError(f"unknown edge kind {kind!r}")
        limit = min(self.settings.s2_page_size, MAX_EDGE_OFFSET - offset)
        fields = self.settings.s2_edge_fields
        params = {"fields": fields, "offset": offset, "limit": limit}
        resp = self._request(kind, "GET", f"/paper/{paper_id}/{kind}", params=params, allow_404=True)
        entry = self.raw.write(
            SOURCE, edges_relpath(kind, paper_id, offset, day or _today()), resp.content, url=resp.url,
            params={"kind": kind, "paper_id": paper_id, "offset": offset, "limit": limit, "fields": fields},
            status=resp.status_code, content_type=resp.headers.get("Content-Type"))
        if resp.status_code == 404:
            raise S2NotFound(f"S2 does not know paper {paper_id}: {_error_text(resp)}", entry)
        return entry

    def get_paper(self, paper_id: str, fields: str | None = None) -> dict[str, Any]:
        """``GET /paper/{paper_id}`` (single lookups, e.g. checking an id by hand); stored in the raw zone."""
        fields = fields or self.settings.s2_paper_fields
        resp = self._request("paper", "GET", f"/paper/{paper_id}", params={"fields": fields}, allow_404=True)
        entry = self.raw.write(
            SOURCE, f"paper/{_today()}/{_safe(paper_id)}.json", resp.content, url=resp.url,
            params={"kind": "paper", "paper_id": paper_id, "fields": fields},
            status=resp.status_code, content_type=resp.headers.get("Content-Type"))
        if resp.status_code == 404:
            raise S2NotFound(f"S2 does not know paper {paper_id}: {_error_text(resp)}", entry)
        return json.loads(self.raw.read(entry))

    # -- HTTP with politeness --------------------------------------------------------------------
    @property
    def consecutive_failures(self) -> int:
        return self.http.stats.failures_in_a_row

    def _request(self, kind: str, method: str, path: str, *, params: dict[str, Any], data: bytes | None = None,
                 allow_404: bool = False) -> requests.Response:
        retrying = self.http.retrying(stop=self._stop_on_consecutive)
        try:
            resp = retrying(self._attempt, kind, method, path, params, data)
        except RetryableHTTP as exc:
            raise StepFailed(
                f"Semantic Scholar gave up after {self.consecutive_failures} consecutive failed requests "
                f"(last: {exc}); everything fetched so far is kept in the raw zone") from exc
        code = resp.status_code
        if 200 <= code < 300 or (code == 404 and allow_404):
            return resp
        detail = _error_text(resp)
        if code in (401, 403):
            if self.settings.s2_api_key:
                hint = "the S2_API_KEY in the environment was refused: check it is valid and active"
            else:
                hint = "no S2_API_KEY is set; set one (https://www.semanticscholar.org/product/api) or retry later"
            raise UserError(f"Semantic Scholar refused access (HTTP {code} {detail}) on {method} {path}: {hint}")
        if code == 400:
            raise UserError(f"Semantic Scholar rejected {method} {path} (HTTP 400): {detail}; "
                            "check PAPERKB_S2_PAPER_FIELDS / PAPERKB_S2_EDGE_FIELDS")
        if code == 404:
            raise UserError(f"Semantic Scholar has no {method} {path} (HTTP 404: {detail}); check PAPERKB_S2_API_URL")
        raise UserError(f"Semantic Scholar answered HTTP {code} on {method} {path}: {detail}")

    def _attempt(self, kind: str, method: str, path: str, params: dict[str, Any], data: bytes | None) -> requests.Response:
        self.stats.calls[kind] = self.stats.calls.get(kind, 0) + 1
        headers = {"Content-Type": "application/json"} if data is not None else None
        return self.http.send(method, self.base + path, params=params, data=data, headers=headers)

    def _stop_on_consecutive(self, retry_state: RetryCallState) -> bool:
        return self.consecutive_failures >= max(1, self.settings.max_consecutive_failures)

    def stats_dict(self) -> dict[str, Any]:
        return self.stats.as_dict()


def _today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")
