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
``PAPERKB_S2_API_URL`` (see ``pipeline.sources.net``).

Raw layout::

    raw/s2/batch/<YYYY-MM-DD>/<sha1(ids)[:16]>.json                       POST /paper/batch answer
    raw/s2/<references|citations>/<YYYY-MM-DD>/<paperId>/offset-<n>.json  one page of edges
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

import requests
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from pipeline.errors import StepFailed, UserError
from pipeline.raw import RawEntry, RawZone
from pipeline.settings import Settings
from pipeline.sources.http import RateLimiter, parse_retry_after, retry_after_wait
from pipeline.sources.net import raise_if_unreachable

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


class _Retryable(Exception):
    """A 429, a 5xx or a connection problem: worth another try after a pause."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class S2Stats:
    """What the client did: HTTP calls by kind, retries, and time spent waiting."""

    calls: dict[str, int] = field(default_factory=dict)  # HTTP requests sent, per kind (incl. retries)
    retries: int = 0
    rate_wait_s: float = 0.0  # sleeping imposed by the rate limiter (s2_delay_s between requests)
    backoff_wait_s: float = 0.0  # sleeping imposed by 429 Retry-After / jittered backoff
    http_s: float = 0.0  # time inside requests (network + server)

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    def as_dict(self) -> dict[str, Any]:
        return {"http_calls": self.total_calls, "calls": dict(self.calls), "retries": self.retries,
                "rate_wait_s": round(self.rate_wait_s, 3), "backoff_wait_s": round(self.backoff_wait_s, 3),
                "http_s": round(self.http_s, 3)}


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

    def __init__(self, settings: Settings, raw: RawZone, *, session: requests.Session | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.settings = settings
        self.raw = raw
        self.base = settings.s2_api_url.rstrip("/")
        self.session = session or requests.Session()
        self.session.headers["User-Agent"] = settings.user_agent
        if settings.s2_api_key:
            self.session.headers["x-api-key"] = settings.s2_api_key  # S2 reads this header, case-sensitive
        self._sleep = sleep
        self.limiter = RateLimiter(settings.s2_delay_s, sleep)
        self.stats = S2Stats()
        self.consecutive_failures = 0
        self._last_failure = ""

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
    def _request(self, kind: str, method: str, path: str, *, params: dict[str, Any], data: bytes | None = None,
                 allow_404: bool = False) -> requests.Response:
        s = self.settings
        retrying = Retrying(
            retry=retry_if_exception_type(_Retryable),
            stop=stop_after_attempt(max(1, s.retry_max_attempts)) | self._stop_on_consecutive,
            wait=self._wait,
            sleep=self._backoff_sleep,
            before_sleep=self._before_sleep,
            reraise=True,
        )
        try:
            return retrying(self._attempt, kind, method, path, params, data, allow_404)
        except _Retryable as exc:
            raise StepFailed(
                f"Semantic Scholar gave up after {self.consecutive_failures} consecutive failed requests "
                f"(last: {exc}); everything fetched so far is kept in the raw zone") from exc

    def _attempt(self, kind: str, method: str, path: str, params: dict[str, Any], data: bytes | None,
                 allow_404: bool) -> requests.Response:
        self.limiter.wait()
        self.stats.calls[kind] = self.stats.calls.get(kind, 0) + 1
        url = self.base + path
        headers = {"Content-Type": "application/json"} if data is not None else None
        t0 = time.perf_counter()
        try:
            resp = self.session.request(method, url, params=params, data=data, headers=headers,
                                        timeout=self.settings.http_timeout_s)
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise_if_unreachable(exc, service="Semantic Scholar", url=self.base, setting="PAPERKB_S2_API_URL")
            self._failed(f"{type(exc).__name__}: {exc}")
            raise _Retryable(f"{method} {path}: {type(exc).__name__}") from exc
        finally:
            self.stats.http_s += time.perf_counter() - t0
        code = resp.status_code
        if code == 429 or code >= 500:
            msg = f"HTTP {code} {resp.reason or ''} on {method} {path}".strip()
            self._failed(msg)
            raise _Retryable(msg, parse_retry_after(resp.headers.get("Retry-After")))
        self.consecutive_failures = 0
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

    def _failed(self, message: str) -> None:
        self.consecutive_failures += 1
        self._last_failure = message

    def _stop_on_consecutive(self, retry_state: RetryCallState) -> bool:
        return self.consecutive_failures >= max(1, self.settings.max_consecutive_failures)

    def _wait(self, retry_state: RetryCallState) -> float:
        """Retry-After when S2 sends one (up to ``http_retry_after_max_s``), else full-jitter exponential backoff
        capped at ``retry_max_backoff_s``."""
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        cap = max(0.0, self.settings.retry_max_backoff_s)
        jitter = random.uniform(0, min(cap, 2.0 ** retry_state.attempt_number))
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            wait = retry_after_wait(retry_after, self.settings.http_retry_after_max_s, "Semantic Scholar")
            return wait + random.uniform(0, min(cap, 1.0)) * 0.1
        return jitter

    def _backoff_sleep(self, seconds: float) -> None:
        self.stats.backoff_wait_s += seconds
        self._sleep(seconds)

    def _before_sleep(self, retry_state: RetryCallState) -> None:
        self.stats.retries += 1
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        log.warning("Semantic Scholar: %s; retrying in %.1fs (consecutive failures: %d)",
                    exc, retry_state.upcoming_sleep, self.consecutive_failures)

    @property
    def rate_wait_s(self) -> float:
        return self.limiter.waited_s

    def stats_dict(self) -> dict[str, Any]:
        self.stats.rate_wait_s = self.limiter.waited_s
        return self.stats.as_dict()


def _today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")
