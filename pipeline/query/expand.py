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


# What a chat model writes around its queries (measured on SmolLM2-135M-Instruct, tests/fixtures/llm_answers.json,
# and the usual habits of larger models): reasoning blocks, list markers, Markdown, labels, quotes and chatter.
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S | re.I)  # reasoning models' thoughts (Ollama's qwen3, deepseek-r1)
_MARKER = re.compile(r"^\s*(?:(?:[-*+>\u2022\u2013\u2014]|#+)\s+|\(?\d+(?:\.\d+)*[.):]\s*|\(?[a-z]\)\s*)")
_LABEL = re.compile(r"^(?:(?:sub-?|search |alternative |rewritten )?query\s*\d*|q\d+|search)(?:\s*[:.)]|\s+[-\u2013\u2014]\s)\s*", re.I)
_QUOTED = re.compile(r'^["\u201c\u201e\'`]+(.+?)["\u201d\'`]+(?=\W|$)')
_EMPHASIS = re.compile(r"\*\*|__|`")
_BOLD_TERM = re.compile(r"^(?:\*\*|__)(.+?)(?:\*\*|__)\s*[:\-\u2013\u2014]\s+\S")  # "**term**: what it means"
_CHATTER = re.compile(  # the lines around the queries, not queries ("Great circle routes" is one: "Great!" is not)
    r"^(?:(?:sure|certainly|of course|okay|ok|great|absolutely)\s*[!,.:]|here (?:are|is)|below (?:are|is)|"
    r"these (?:queries|are)|this (?:query|search)|the (?:above|following)|(?:above|following) (?:are|is)|"
    r"i hope|i've|i have|i can|note\b|please|let me know|feel free|hope this)", re.I)
#: the longest line taken as a sub-query: longer lines are prose, not queries (an answer to the question, say)
SUBQUERY_MAX_WORDS = 32


def _words(text: str) -> str:
    """The key two lines are duplicates by: their words, lower case, without punctuation."""
    return " ".join(re.findall(r"\w+", text.lower()))


def subquery_of(line: str) -> str | None:
    """One line of a model's answer as a search query, or None when the line is no query."""
    q = line.strip()
    for _ in range(3):  # "1. - **Query 2:** ..." peels in turns
        peeled = _MARKER.sub("", q).strip()
        term = _BOLD_TERM.match(peeled)
        if term and not _LABEL.match(term.group(1) + ":"):  # a bold term explained after it: the term
            peeled = term.group(1)
        peeled = _LABEL.sub("", _EMPHASIS.sub("", peeled).strip())
        if peeled == q:
            break
        q = peeled
    quoted = _QUOTED.match(q)  # '"deep learning for images" - this query looks for ...': the quoted part
    if quoted:
        q = quoted.group(1)
    q = q.strip().strip("\"'`\u201c\u201d\u2018\u2019").strip()
    if (not q or q.endswith(":") or not re.search(r"[^\W\d_]", q) or _CHATTER.match(q)
            or len(q.split()) > SUBQUERY_MAX_WORDS):
        return None
    return q


def parse_subqueries(content: str, original: str, n: int, truncated: bool = False) -> list[str]:
    """The lines of a model's answer -> up to ``n`` distinct sub-queries, none the original.

    Reasoning (``<think>``) is dropped, then list markers (``1.``, ``-``, ``1.2)``), Markdown emphasis,
    labels (``Query 2:``) and quotes around a query; a quoted query or a bold term followed by an
    explanation gives the quoted or bold part. Lines that are no query are skipped: chatter ("Sure! Here
    are..."), headings ending with ``:``, lines with no letters, prose longer than
    :data:`SUBQUERY_MAX_WORDS` words. Duplicates (and the original) are recognised by their words alone. ``truncated``: the answer was cut at the token
    limit, so its last line is incomplete and is dropped."""
    lines = _THINK.sub("", content or "").splitlines()
    if truncated and lines:
        lines = lines[:-1]
    out: list[str] = []
    seen = {_words(original)}
    for line in lines:
        q = subquery_of(line)
        if q is None or _words(q) in seen:
            continue
        seen.add(_words(q))
        out.append(q)
        if len(out) == n:
            break
    return out


class LLMExpander:
    """Sub-queries from an OpenAI-compatible chat endpoint; offline PRF when it is slow or fails."""

    name = "llm"
    #: one user message (no system message: some chat templates have no system role, and small models follow the
    #: user's turn better). With the query first and the task after it, SmolLM2-135M answered with a list of queries
    #: far more often than with the task as a system message, where it answered the question in prose instead
    #: (tests/fixtures/llm_answers.json holds both).
    PROMPT = (
        "Query: {query}\n\n"
        "Write {n} different search queries for this query, one per line and nothing else. "
        "Use the technical terms and synonyms a scientific paper would use."
    )
    #: the answer's token budget per sub-query asked for (``max_tokens`` = this x n): room for a query and its
    #: list marker, so a model that writes prose or repeats itself stops early
    TOKENS_PER_SUBQUERY = 40

    def __init__(self, settings: Settings, fallback: Expander | None = None):
        from pipeline.query.chat import ChatEndpoint

        self.chat = ChatEndpoint(settings, settings.llm_timeout_s)  # ValueError without llm_base_url and llm_model
        self.model, self.n, self.timeout_s = settings.llm_model, settings.llm_subqueries, settings.llm_timeout_s
        self.fallback = fallback or PRFExpander()

    def request_body(self, query: str) -> dict:
        """The chat-completions request for ``query``: greedy (temperature 0), a small token budget."""
        return self.chat.request_body(self.PROMPT.format(query=query, n=self.n), self.TOKENS_PER_SUBQUERY * self.n)

    def _ask(self, query: str) -> list[str]:
        from pipeline.query.chat import AnswerError

        content, truncated = self.chat.complete(self.PROMPT.format(query=query, n=self.n), self.TOKENS_PER_SUBQUERY * self.n)
        subs = parse_subqueries(content, query, self.n, truncated)
        if not subs:
            raise AnswerError("the answer held no sub-queries")
        return subs

    def expand(self, query: str, feedback: FeedbackSource) -> Expansion:
        try:
            return Expansion(self._ask(query), [f"LLM expansion: {self.model}"], "llm")
        except Exception as exc:  # any failure (timeout, HTTP error, bad JSON): fall back, never fail the query
            from pipeline.query.chat import failure

            reason = failure(exc, self.timeout_s)
            log.warning("LLM expansion failed (%s); using offline %s expansion", reason, self.fallback.name)
            fb = self.fallback.expand(query, feedback)
            fb.notes.insert(0, f"LLM expansion failed ({reason}); used the offline {self.fallback.name.upper()} expansion instead")
            return fb
