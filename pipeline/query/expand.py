"""Query expansion: pluggable expanders that add sub-queries to the original query.

- :class:`PRFExpander` (offline, the default when no LLM is configured): RM3-style
  pseudo-relevance feedback. The top passages of the first-pass search (in this snapshot)
  form a relevance model P(w|R) = sum_d weight(d) * tf(w, d) / |d|; its best terms that are
  not already in the query are appended to the query as one sub-query.
- ``rm3`` (the default when no LLM is configured; handled by the searcher, see
  :func:`feedback_terms`): RM3 on the lexical side only. The top passages of the first-pass
  *hybrid* ranking give P(w|R); its best terms not in the query are scored with BM25 over the
  candidates (the ``rm3`` signal) and interpolated with the original query's BM25 through the
  weights, as RM3 interpolates the expanded query with the original. No sub-query, no
  re-encoding: the dense signals stay those of the original query.
- :class:`LLMExpander`: any OpenAI-compatible ``/chat/completions`` endpoint (base URL, model
  and key are settings) writes ``n`` sub-queries. A slow or failing endpoint falls back to the
  offline expander within the timeout, and the response notes say so: a query never fails
  because expansion failed.

Across the original and the sub-queries the searcher keeps each signal's maximum per passage.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pipeline.errors import ServiceUnreachable

if TYPE_CHECKING:
    from pipeline.settings import Settings

log = logging.getLogger(__name__)

# A compact English stop list (the usual function words). Written out rather than imported:
# scikit-learn's list costs seconds of import time on every CLI call for 170 words.
STOPWORDS = frozenset(
    """a about above after again against all almost along already also although always am among an and another any
    anyone anything are around as at be became because been before being below between both but by can cannot could
    did do does doing done down during each either else enough etc even ever every few for from further get give given
    had has have having he her here hers herself him himself his how however i if in into is it its itself just least
    less made make many may me might more most much must my myself neither never no nor not now of off often on once
    one only onto or other others otherwise our ours ourselves out over own per perhaps rather same see seem several
    shall she should show since so some such than that the their theirs them themselves then there therefore these
    they this those though through thus to together too toward towards under until up upon us use used using very via
    was we well were what whatever when where whether which while who whom whose why will with within without would
    yet you your yours yourself yourselves""".split()
)
_TOKEN = re.compile(r"[a-z][a-z0-9-]{2,}")


@dataclass
class Expansion:
    queries: list[str]            # sub-queries, the original NOT included
    notes: list[str] = field(default_factory=list)
    method: str = "off"


class FeedbackSource(Protocol):
    def __call__(self, query: str, n: int) -> Sequence[tuple[str, float]]:
        """Top ``n`` first-pass passages for ``query`` as (text, weight >= 0)."""


class Expander(Protocol):
    name: str

    def expand(self, query: str, feedback: FeedbackSource) -> Expansion: ...


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall((text or "").lower()) if t not in STOPWORDS]


def relevance_model(passages: Sequence[tuple[str, float]]) -> Counter:
    """RM1 term weights P(w|R) from weighted feedback passages."""
    model: Counter = Counter()  # float weights: Counter for most_common, not for counting
    total_w = sum(max(w, 0.0) for _, w in passages) or 1.0
    for text, w in passages:
        toks = tokens(text)
        if not toks:
            continue
        tf = Counter(toks)
        for t, c in tf.items():
            model[t] += (max(w, 0.0) / total_w) * c / len(toks)  # type: ignore[assignment]
    return model


_STEMMERS = threading.local()  # a PyStemmer stemmer is not to be shared between threads: one per thread


def _stem(words: list[str]) -> list[str]:
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        import Stemmer  # PyStemmer (Snowball): used only to recognise variants of the query's own words

        stemmer = _STEMMERS.english = Stemmer.Stemmer("english")
    return stemmer.stemWords(words)


def feedback_terms(query: str, passages: Sequence[tuple[str, float]], n_terms: int) -> list[tuple[str, float]]:
    """The ``n_terms`` best feedback terms with their P(w|R), one per stem, none whose stem is in the query."""
    model = relevance_model(passages)
    if not model:
        return []
    q_stems = set(_stem(tokens(query)))
    cands = model.most_common(n_terms * 4)
    out: list[tuple[str, float]] = []
    seen: set[str] = set()
    for (t, p), s in zip(cands, _stem([t for t, _ in cands])):
        if s in q_stems or s in seen:
            continue
        seen.add(s)
        out.append((t, p))
        if len(out) == n_terms:
            break
    return out


def prf_terms(query: str, passages: Sequence[tuple[str, float]], n_terms: int) -> list[str]:
    """The ``n_terms`` best feedback terms whose stems are not already in the query."""
    return [t for t, _ in feedback_terms(query, passages, n_terms)]


class RM3Feedback:
    """Lexical RM3 feedback: no sub-queries; the searcher scores :meth:`terms` as the ``rm3`` signal."""

    name = "rm3"

    def __init__(self, fb_docs: int = 3, fb_terms: int = 30):
        self.fb_docs, self.fb_terms = fb_docs, fb_terms

    def expand(self, query: str, feedback: FeedbackSource) -> Expansion:
        return Expansion([], [], "rm3")

    def terms(self, query: str, passages: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
        return feedback_terms(query, passages, self.fb_terms)


class NoExpander:
    name = "off"

    def expand(self, query: str, feedback: FeedbackSource) -> Expansion:
        return Expansion([], [], "off")


class PRFExpander:
    name = "prf"

    def __init__(self, fb_docs: int = 10, fb_terms: int = 10):
        self.fb_docs, self.fb_terms = fb_docs, fb_terms

    def expand(self, query: str, feedback: FeedbackSource) -> Expansion:
        terms = prf_terms(query, feedback(query, self.fb_docs), self.fb_terms)
        if not terms:
            return Expansion([], ["PRF expansion found no feedback terms"], "prf")
        return Expansion([f"{query} {' '.join(terms)}"], [], "prf")


_NUMBERING = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|q\d+[:.)])\s*", re.I)


def parse_subqueries(content: str, original: str, n: int) -> list[str]:
    """Lines of the model's answer -> up to ``n`` distinct sub-queries (numbering and quotes removed)."""
    out: list[str] = []
    seen = {original.strip().lower()}
    for line in (content or "").splitlines():
        q = _NUMBERING.sub("", line).strip().strip('"\'`').strip()
        if not q or len(q) > 300 or q.lower() in seen or q.endswith(":"):
            continue
        seen.add(q.lower())
        out.append(q)
        if len(out) == n:
            break
    return out


class LLMExpander:
    """Sub-queries from an OpenAI-compatible chat endpoint; offline PRF when it is slow or fails."""

    name = "llm"
    PROMPT = (
        "You help search a library of scientific papers. Write {n} different search queries that would find papers "
        "relevant to the user's query: rephrase it, use the technical terms and synonyms a paper would use. "
        "Answer with one query per line and nothing else."
    )

    def __init__(self, settings: Settings, fallback: Expander | None = None):
        if not (settings.llm_base_url and settings.llm_model):
            raise ValueError("LLMExpander needs llm_base_url and llm_model")
        self.base_url = settings.llm_base_url.rstrip("/")
        self.model, self.n, self.timeout_s = settings.llm_model, settings.llm_subqueries, settings.llm_timeout_s
        # the HTTP client (and requests) load only here: a search without an LLM never imports them
        from pipeline.sources.http import Endpoint, PoliteClient

        key = {"Authorization": f"Bearer {settings.llm_api_key}"} if settings.llm_api_key else {}
        # the shared client, one attempt: llm_timeout_s is what a query may wait, so no retries eat into it
        self.http = PoliteClient(settings, Endpoint("the LLM endpoint", self.base_url, "PAPERKB_LLM_BASE_URL"),
                                 max_attempts=1, timeout_s=self.timeout_s, headers=key)
        self.fallback = fallback or PRFExpander()

    def _ask(self, query: str) -> list[str]:
        body = {"model": self.model, "temperature": 0,
                "messages": [{"role": "system", "content": self.PROMPT.format(n=self.n)},
                             {"role": "user", "content": query}]}
        try:
            r = self.http.request("POST", f"{self.base_url}/chat/completions", json=body)
        finally:
            self.http.close()
        r.raise_for_status()
        content = r.json()["choices"][0]["message"]["content"]
        subs = parse_subqueries(content, query, self.n)
        if not subs:
            raise ValueError("the answer held no sub-queries")
        return subs

    def expand(self, query: str, feedback: FeedbackSource) -> Expansion:
        try:
            return Expansion(self._ask(query), [f"LLM expansion: {self.model}"], "llm")
        except Exception as exc:  # any failure (timeout, HTTP error, bad JSON): fall back, never fail the query
            reason = _failure(exc, self.timeout_s)
            log.warning("LLM expansion failed (%s); using offline %s expansion", reason, self.fallback.name)
            fb = self.fallback.expand(query, feedback)
            fb.notes.insert(0, f"LLM expansion failed ({reason}); used the offline {self.fallback.name.upper()} expansion instead")
            return fb


def _failure(exc: Exception, timeout_s: float) -> str:
    """Why the LLM did not help, in a few words."""
    import requests

    from pipeline.sources.http import RetryableHTTP

    if isinstance(exc, ServiceUnreachable):
        return f"cannot reach {exc.url}: {exc.reason}"
    if isinstance(exc, RetryableHTTP):
        if isinstance(exc.__cause__, requests.Timeout):
            return f"timed out after {timeout_s:g} s"
        if exc.status is not None:
            return f"HTTP {exc.status}"
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code}"
    return f"{type(exc).__name__}: {exc}"
