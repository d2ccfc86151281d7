"""BM25 over the candidates' own text: lexical scores without another full-index query.

The RM3 feedback signal is BM25 of ~30 feedback terms for the ~100-150 candidate passages of one
search. Asking LanceDB's full-text index for it walks the posting list of every feedback term
across the whole table: ~300 ms at 1M chunks (BENCHMARKS.md, "Query speed"), for scores of a few
hundred passages whose text the searcher already holds. Here the same BM25 is computed from that
text with numpy:

- :class:`Analyzer` turns text into index terms the way LanceDB's default full-text index does
  (``create_fts_index`` defaults: the "simple" tokenizer, which splits on every character that is
  not a letter or digit, tokens of 40 bytes or more dropped, lower case, Snowball English stemming,
  then the English stop words (matched against the stem), ASCII folding);
- :class:`CollectionStats` holds what BM25 needs from the collection: the number of passages, their
  mean length in terms and each term's document frequency, counted once when the searcher loads.
  Up to ``sample_rows`` passages every passage is counted, so the statistics, and with them the
  scores, are those of the index itself (``tests/test_query_feedback.py`` compares them on CISI);
  above it a fixed-seed uniform sample of that many passages estimates them (document frequency
  scaled by N / sample), as distributed search engines estimate the statistics of collections
  they cannot read in full;
- :class:`CandidateBM25` keeps each passage it has seen as arrays of term ids and counts (an LRU of
  ``capacity`` passages) and scores a weighted bag of terms over any set of passages as one
  (passages x terms) matrix: ``sum_t w_t * idf_t * tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))``
  with LanceDB's k1 = 1.2, b = 0.75 and idf = ln(1 + (N - df + 0.5) / (df + 0.5)).

The index is built with :func:`index_config`: LanceDB's defaults, but the stop words pinned to
:data:`STOP_WORDS`. Builds of LanceDB's engine differ in their built-in English list (the pylance 14.0.3 wheel
installed on some machines keeps "not", "no", "nor", "s", "t", "don" and 25 other contraction pieces), which
changes passage lengths, the mean length and so every BM25 score (CISI, "substantial": 4.741 against 4.756);
pinned, the index and this module analyse alike whatever build is installed (issue 68, item 0).

A weighted term is scored as LanceDB scores ``MatchQuery(term, boost=w)`` inside a ``BooleanQuery``
of SHOULD clauses: the term's own analysed terms (a hyphenated word gives two), each weighted w.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

K1, B = 1.2, 0.75
MAX_TOKEN_BYTES = 40  # tantivy's RemoveLongFilter::limit(40): tokens of 40 bytes or more are dropped

# The English stop words of tantivy's StopWordFilter (LanceDB's default ``remove_stop_words``): NLTK's
# English list. LanceDB applies it to the *stemmed* token, so "others" (stem "other") is dropped while
# "because" (stem "becaus") is kept; measured on CISI against the index (tests/test_query_feedback.py).
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him
    his himself she she's her hers herself it it's its itself they them their theirs themselves what which who
    whom this that that'll these those am is are was were be been being have has had having do does did doing a
    an the and but if or because as until while of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then once here there when
    where why how all any both each few more most other some such no nor not only own same so than too very s t
    can will just don don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't
    doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn
    needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't""".split()
)
_TOKEN = re.compile(r"[^\W_]+")  # runs of letters and digits (tantivy's SimpleTokenizer: char::is_alphanumeric)
_MEMO_MAX = 500_000  # analysed words remembered (cleared when full)


def _fold(word: str) -> str:
    """ASCII folding of accented Latin letters (é -> e); other characters stay."""
    if word.isascii():
        return word
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


class Analyzer:
    """Text -> index terms, as LanceDB's default full-text index analyses ``chunks.text``."""

    def __init__(self, stop_words: Iterable[str] = STOP_WORDS):
        self._stemmers = threading.local()  # PyStemmer objects are not to be shared between threads
        self._stop = frozenset(stop_words)
        self._memo: dict[str, str] = {}

    def _stem(self, word: str) -> str:
        stemmer = getattr(self._stemmers, "english", None)
        if stemmer is None:
            import Stemmer  # PyStemmer: the Snowball stemmers, as tantivy's (rust-stemmers) Stemmer

            stemmer = self._stemmers.english = Stemmer.Stemmer("english")
        return stemmer.stemWord(word)

    def _term(self, word: str) -> str:
        if len(word.encode()) >= MAX_TOKEN_BYTES:
            return ""
        stem = self._stem(word)
        return "" if stem in self._stop else _fold(stem)

    def terms(self, text: str) -> list[str]:
        """The index terms of ``text`` in order (stop words and over-long tokens dropped)."""
        memo = self._memo
        out = []
        for w in _TOKEN.findall((text or "").lower()):
            t = memo.get(w)
            if t is None:
                if len(memo) >= _MEMO_MAX:
                    memo.clear()
                t = memo[w] = self._term(w)
            if t:
                out.append(t)
        return out


@dataclass
class CollectionStats:
    """N, mean passage length and document frequencies (estimated from ``sampled`` passages)."""

    n_docs: int
    avgdl: float
    df: dict[str, int]
    sampled: int

    @classmethod
    def count(cls, analyzer: Analyzer, texts: Sequence[str], n_docs: int | None = None) -> CollectionStats:
        """Statistics of ``texts``: the whole collection, or a uniform sample of a collection of ``n_docs``."""
        return cls.of_terms([analyzer.terms(text) for text in texts], n_docs)

    @classmethod
    def of_terms(cls, docs: Sequence[Sequence[str]], n_docs: int | None = None) -> CollectionStats:
        """Statistics of passages given as their analysed terms (see :meth:`count`)."""
        df: dict[str, int] = {}
        total = 0
        for terms in docs:
            total += len(terms)
            for t in set(terms):
                df[t] = df.get(t, 0) + 1
        n = len(docs)
        return cls(n_docs=n if n_docs is None else n_docs, avgdl=total / n if n else 1.0, df=df, sampled=n)

    def idf(self, terms: Sequence[str]) -> np.ndarray:
        scale = self.n_docs / self.sampled if self.sampled else 1.0
        df = np.array([self.df.get(t, 0) for t in terms], dtype=np.float64) * scale
        return np.log1p((self.n_docs - df + 0.5) / (df + 0.5))


class CandidateBM25:
    """Scores weighted terms over passages identified by row id, from their text (see the module doc)."""

    def __init__(self, analyzer: Analyzer, stats: CollectionStats, capacity: int = 100_000):
        self.analyzer, self.stats, self.capacity = analyzer, stats, capacity
        self._vocab: dict[str, int] = {}
        self._docs: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}  # row id -> (term ids, counts, length)
        self._lock = threading.Lock()

    def _encode(self, text: str) -> tuple[np.ndarray, np.ndarray, int]:
        terms = self.analyzer.terms(text)
        vocab = self._vocab
        ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in terms), dtype=np.int64, count=len(terms))
        uniq, counts = np.unique(ids, return_counts=True)
        return uniq, counts.astype(np.float64), len(terms)

    def remember(self, rowids: Sequence[int], texts: Sequence[str]) -> None:
        """Analyse passages now (e.g. all of a small table at load) so that scoring them is a look-up."""
        with self._lock:
            for r, t in zip(rowids, texts):
                self._docs[int(r)] = self._encode(t)

    def load_vocab(self, vocab: Sequence[str]) -> None:
        """Start from a stored vocabulary (term id = position), before :meth:`remember_arrays`."""
        with self._lock:
            for t in vocab:
                self._vocab.setdefault(t, len(self._vocab))

    def remember_arrays(self, rowids: Sequence[int] | np.ndarray,
                        docs: Sequence[tuple[np.ndarray, np.ndarray, int]]) -> None:
        """Passages already analysed (stored in a snapshot): (term ids sorted, counts, length) by row id, the
        ids those of :meth:`load_vocab`'s vocabulary."""
        with self._lock:
            for r, d in zip(np.asarray(rowids).tolist(), docs):
                self._docs[r] = d

    def _docs_of(self, rowids: Sequence[int] | np.ndarray, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray, int]]:
        docs = self._docs
        out: list[Any] = [docs.get(int(r)) for r in rowids]
        missing = [i for i, d in enumerate(out) if d is None]
        if missing:
            with self._lock:
                for i in missing:
                    d = out[i] = self._encode(texts[i])
                    docs[int(rowids[i])] = d
                while len(docs) > self.capacity:  # oldest first (dicts keep insertion order)
                    docs.pop(next(iter(docs)))
        return out

    def query_terms(self, weighted: Mapping[str, float] | Sequence[tuple[str, float]]) -> dict[str, float]:
        """Index term -> weight of a weighted bag of words (each word's analysed terms get its weight, summed)."""
        out: dict[str, float] = {}
        for word, w in (weighted.items() if isinstance(weighted, Mapping) else weighted):
            for t in self.analyzer.terms(word):
                out[t] = out.get(t, 0.0) + float(w)
        return out

    def score(self, weighted: Mapping[str, float] | Sequence[tuple[str, float]], rowids: Sequence[int] | np.ndarray,
              texts: Sequence[str]) -> np.ndarray:
        """BM25 of the weighted words for each passage (row id + its text, used when not yet analysed)."""
        n = len(rowids)
        q = self.query_terms(weighted)
        if not n or not q:
            return np.zeros(n, dtype=np.float64)
        docs = self._docs_of(rowids, texts)
        qterms = list(q)
        qids = np.array([self._vocab.get(t, -1) for t in qterms], dtype=np.int64)
        weights = np.array([q[t] for t in qterms], dtype=np.float64) * self.stats.idf(qterms)
        lengths = np.array([d[2] for d in docs], dtype=np.float64)
        # (passages x query terms) term frequencies from the concatenated per-passage arrays
        ids = np.concatenate([d[0] for d in docs])
        counts = np.concatenate([d[1] for d in docs])
        owner = np.repeat(np.arange(n), [len(d[0]) for d in docs])
        order = np.argsort(qids, kind="stable")
        pos = np.searchsorted(qids[order], ids)
        pos = np.minimum(pos, len(qids) - 1)
        hit = qids[order][pos] == ids
        tf = np.zeros((n, len(qids)), dtype=np.float64)
        tf[owner[hit], order[pos[hit]]] = counts[hit]
        norm = K1 * (1.0 - B + B * lengths / (self.stats.avgdl or 1.0))
        sat = tf * (K1 + 1.0) / (tf + norm[:, None])
        return sat @ weights


def index_config():
    """LanceDB's full-text index as :class:`Analyzer` reads text: the "simple" tokenizer, tokens of 40 bytes or more
    dropped, lower case, English stemming, :data:`STOP_WORDS` (matched against the stem), ASCII folding."""
    from lancedb.index import FTS

    return FTS(base_tokenizer="simple", language="English", max_token_length=MAX_TOKEN_BYTES, lower_case=True,
               stem=True, remove_stop_words=True, custom_stop_words=sorted(STOP_WORDS), ascii_folding=True)


def index_score(raw: np.ndarray) -> np.ndarray:
    """BM25 computed in float64, rounded to float32 as LanceDB's index returns it, carried as float64."""
    return np.asarray(raw, dtype=np.float64).astype(np.float32).astype(np.float64)


class ResidentIndex:
    """An inverted index of a table held in memory: BM25 of a text query over every passage.

    For tables small enough to hold (``Searcher`` keeps it within ``_SCORE_ALL_MAX_ROWS``), the query's
    posting lists are a few numpy slices: the scores LanceDB's index gives (same analysis, statistics
    and formula; float32 as LanceDB returns them) without a call into it.
    """

    def __init__(self, scorer: CandidateBM25, rowids: np.ndarray):
        self.scorer = scorer
        self.rowids = np.asarray(rowids, dtype=np.int64)
        docs = scorer._docs_of(self.rowids, [""] * len(self.rowids))  # already remembered: a look-up
        ids = np.concatenate([d[0] for d in docs]) if docs else np.zeros(0, dtype=np.int64)
        tf = np.concatenate([d[1] for d in docs]) if docs else np.zeros(0)
        owner = np.repeat(np.arange(len(docs)), [len(d[0]) for d in docs])
        order = np.argsort(ids, kind="stable")
        self._rows, self._tf = owner[order], tf[order]
        self._indptr = np.searchsorted(ids[order], np.arange(len(scorer._vocab) + 1))
        lengths = np.array([d[2] for d in docs], dtype=np.float64)
        self._norm = K1 * (1.0 - B + B * lengths / (scorer.stats.avgdl or 1.0))

    def search(self, text: str, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(row ids, BM25) of every passage matching ``text`` (``allowed``: a mask over the rows), in row order."""
        q = self.scorer.query_terms([(text, 1.0)])
        vocab = self.scorer._vocab
        terms = [t for t in q if t in vocab and vocab[t] < len(self._indptr) - 1]
        acc = np.zeros(len(self.rowids), dtype=np.float64)
        hit = np.zeros(len(self.rowids), dtype=bool)
        if terms:
            idf = self.scorer.stats.idf(terms)
            for t, w in zip(terms, idf * np.array([q[t] for t in terms])):
                tid = vocab[t]
                s, e = self._indptr[tid], self._indptr[tid + 1]
                rows, tf = self._rows[s:e], self._tf[s:e]
                acc[rows] += w * tf * (K1 + 1.0) / (tf + self._norm[rows])
                hit[rows] = True
        if allowed is not None:
            hit &= allowed
        idx = np.flatnonzero(hit)
        return self.rowids[idx], index_score(acc[idx])
