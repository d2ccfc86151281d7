"""The BM25 statistics of a snapshot's passages: counted once at publish, stored in the snapshot, loaded at open.

A searcher scores candidate passages from their own text (:mod:`pipeline.query.bm25`), which needs the
collection's statistics (passages, mean length, each term's document frequency) and, on tables small
enough to hold (up to :data:`SAMPLE_ROWS` passages), every passage's analysed terms. Counting them is the
slowest part of opening a snapshot: 0.5 s for CISI's 1,460 passages, ~4 s for a 20,000-passage sample of a
1M-chunk table. A snapshot never changes, so publish counts them once (:func:`count`) and stores them as
``bm25/chunks.npz`` (listed and checksummed in the manifest like every file); the searcher loads that
file (:func:`read`) and counts only for snapshots published before it, or when this paperkb analyses text
differently from the one that published (:func:`analyzer_id` differs).

What is counted is what the searcher counted at open before: every passage when the table has at most
``SAMPLE_ROWS``, else a fixed-seed uniform sample of that many (document frequencies scaled by N / sample
when scoring), so a stored file and a count at open give the same scores.

The file: NumPy arrays (``np.savez``, read without pickle) -- ``terms`` (the vocabulary, UTF-8, one term a
line), ``df`` (by term), the scalars, and for a fully counted table the passages as CSR arrays (``rowids``,
``indptr``, ``term_ids``, ``counts``, ``lengths``).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.query.bm25 import MAX_TOKEN_BYTES, STOP_WORDS, Analyzer, CandidateBM25, CollectionStats

log = logging.getLogger(__name__)

FILE = "bm25/chunks.npz"  # in a snapshot (manifest layout key "bm25")
FORMAT = 1
# Every passage up to this many, else a fixed-seed uniform sample of this many (see the module doc).
SAMPLE_ROWS = 20_000
# Bump when Analyzer changes in a way the inputs below do not show (tokenising, folding).
ANALYZER_VERSION = 1


def analyzer_id() -> str:
    """Identity of how :class:`Analyzer` turns text into terms: statistics counted by another analysis are
    not used."""
    import Stemmer

    ident = f"{ANALYZER_VERSION}|{MAX_TOKEN_BYTES}|{Stemmer.version()}|" + " ".join(sorted(STOP_WORDS))
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


@dataclass
class Passages:
    """Every passage's analysed terms as CSR arrays over a vocabulary (term ids sorted within a passage)."""

    rowids: np.ndarray    # int64, LanceDB/Lance _rowid of each passage
    indptr: np.ndarray    # int64, len(rowids) + 1
    term_ids: np.ndarray  # int32
    counts: np.ndarray    # int32
    lengths: np.ndarray   # int64, terms per passage (stop words excluded)


@dataclass
class Counted:
    """What :func:`count` finds and :func:`read` loads."""

    stats: CollectionStats
    vocab: list[str]
    passages: Passages | None  # None when sampled

    def scorer(self, analyzer: Analyzer | None = None) -> CandidateBM25:
        """A :class:`CandidateBM25` holding these statistics and (fully counted tables) every passage."""
        scorer = CandidateBM25(analyzer or Analyzer(), self.stats,
                               capacity=max(100_000, len(self.passages.rowids) if self.passages else 0))
        scorer.load_vocab(self.vocab)
        p = self.passages
        if p is not None:
            counts = p.counts.astype(np.float64)
            ids = p.term_ids.astype(np.int64)
            scorer.remember_arrays(p.rowids, [(ids[s:e], counts[s:e], int(n)) for s, e, n in
                                              zip(p.indptr[:-1].tolist(), p.indptr[1:].tolist(), p.lengths.tolist())])
        return scorer


def count(table, analyzer: Analyzer | None = None, texts: tuple[np.ndarray, list[str]] | None = None) -> Counted:
    """Count the statistics of a chunks table (a :class:`pipeline.query.tables.ReadTable`): every passage up to
    :data:`SAMPLE_ROWS`, else the fixed-seed sample. ``texts``: (row ids, texts) of every passage when the
    caller already holds them."""
    analyzer = analyzer or Analyzer()
    n = table.count_rows()
    if texts is not None and len(texts[0]) <= SAMPLE_ROWS:
        rowids, raw = np.asarray(texts[0], dtype=np.int64), list(texts[1])
    elif n <= SAMPLE_ROWS:
        t = table.scan(["text"])
        rowids, raw = t["_rowid"].to_numpy().astype(np.int64), t["text"].to_pylist()
    else:  # a uniform sample, the same in every process (fixed seed): the same scores everywhere
        offsets = np.sort(np.random.default_rng(0).choice(n, SAMPLE_ROWS, replace=False))
        rowids, raw = None, table.take_offsets(offsets.tolist(), ["text"])["text"].to_pylist()
    docs = [analyzer.terms(x or "") for x in raw]
    stats = CollectionStats.of_terms(docs, n_docs=n)
    vocab: dict[str, int] = {}
    for terms in docs:
        for t in terms:
            vocab.setdefault(t, len(vocab))
    passages = None
    if rowids is not None:
        indptr = np.zeros(len(docs) + 1, dtype=np.int64)
        ids_parts, count_parts = [], []
        for i, terms in enumerate(docs):
            ids = np.fromiter((vocab[t] for t in terms), dtype=np.int64, count=len(terms))
            uniq, c = np.unique(ids, return_counts=True)
            ids_parts.append(uniq)
            count_parts.append(c)
            indptr[i + 1] = indptr[i] + len(uniq)
        passages = Passages(rowids=rowids, indptr=indptr,
                            term_ids=np.concatenate(ids_parts).astype(np.int32) if ids_parts else np.zeros(0, np.int32),
                            counts=np.concatenate(count_parts).astype(np.int32) if count_parts else np.zeros(0, np.int32),
                            lengths=np.array([len(d) for d in docs], dtype=np.int64))
    return Counted(stats=stats, vocab=list(vocab), passages=passages)


def write(path: Path, counted: Counted) -> None:
    """Store ``counted`` at ``path`` (its folder is made)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    s, p = counted.stats, counted.passages
    empty = np.zeros(0, dtype=np.int64)
    arrays: dict[str, Any] = {  # Any: savez types its keyword arrays like its allow_pickle flag
        "format": np.array([FORMAT], dtype=np.int64),
        "analyzer": np.frombuffer(analyzer_id().encode(), dtype=np.uint8),
        "sample_rows": np.array([SAMPLE_ROWS], dtype=np.int64),
        "n_docs": np.array([s.n_docs], dtype=np.int64),
        "sampled": np.array([s.sampled], dtype=np.int64),
        "avgdl": np.array([s.avgdl], dtype=np.float64),
        "terms": np.frombuffer("\n".join(counted.vocab).encode(), dtype=np.uint8),
        "df": np.array([s.df.get(t, 0) for t in counted.vocab], dtype=np.int64),
        "rowids": p.rowids if p else empty, "indptr": p.indptr if p else empty,
        "term_ids": p.term_ids if p else empty, "counts": p.counts if p else empty, "lengths": p.lengths if p else empty,
        "full": np.array([p is not None], dtype=np.bool_),
    }
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def read(path: Path) -> Counted | None:
    """The statistics stored at ``path``; None (the caller counts) when there is no file or it was counted
    by another format, analysis or sample size."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            a = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        log.warning("BM25 statistics in %s are unreadable (%s): counting them", path, exc)
        return None
    why = None
    if int(a["format"][0]) != FORMAT:
        why = f"format {int(a['format'][0])}"
    elif a["analyzer"].tobytes().decode() != analyzer_id():
        why = "counted with another text analysis"
    elif int(a["sample_rows"][0]) != SAMPLE_ROWS:
        why = f"sampled {int(a['sample_rows'][0])} passages, this paperkb samples {SAMPLE_ROWS}"
    if why:
        log.info("BM25 statistics in %s not used (%s): counting them", path, why)
        return None
    text = a["terms"].tobytes().decode()
    vocab = text.split("\n") if text else []
    stats = CollectionStats(n_docs=int(a["n_docs"][0]), avgdl=float(a["avgdl"][0]),
                            df=dict(zip(vocab, a["df"].tolist())), sampled=int(a["sampled"][0]))
    passages = None
    if bool(a["full"][0]):
        passages = Passages(rowids=a["rowids"].astype(np.int64), indptr=a["indptr"].astype(np.int64),
                            term_ids=a["term_ids"], counts=a["counts"], lengths=a["lengths"].astype(np.int64))
    return Counted(stats=stats, vocab=vocab, passages=passages)
