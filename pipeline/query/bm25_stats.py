"""The BM25 statistics of a snapshot's passages: counted once at publish, stored in the snapshot, loaded at open.

A searcher scores candidate passages from their own text (:mod:`pipeline.query.bm25`), which needs the
collection's statistics (passages, mean length, each term's document frequency) and, on tables small
enough to hold (up to :data:`SAMPLE_ROWS` passages), every passage's analysed terms. Counting them is the
slowest part of opening a snapshot: 0.5 s for CISI's 1,460 passages, ~4 s for a 20,000-passage sample of a
1M-chunk table. A snapshot never changes, so publish counts them once (:func:`count`) and stores them as
``bm25/chunks.npz`` (listed and checksummed in the manifest like every file); the searcher loads that
file (:func:`read`) and counts only for snapshots published before it, or when this paperkb analyses text
differently from the one that published (:func:`analyzer_id` differs).

What is counted: every passage when the table has at most ``SAMPLE_ROWS``, else a uniform sample of that many
(document frequencies scaled by N / sample when scoring): the passages whose content hash is smallest (a
bottom-k sample, the same in every process, so a stored file and a count at open give the same scores). A
sample chosen by content stays the same sample as the table grows: a night that adds 1% of the passages
brings about 1% new ones into it. Each counted passage's analysed terms are kept with its content hash, and a
publish given the statistics counted before (``previous``) analyses only the passages it has not seen: the same
content has the same terms. Finding the sample means every passage's key; the publisher's own copy also keeps
the pool (:class:`Pool`: every passage below a cut about twice the sample's, with its row id, and the table's
fragments), so a table that since only gained fragments, or lost rows the pool can spare, is counted from the pool and
the new fragments' keys alone, with the same result. Tables without ``content_hash`` (none this paperkb writes) fall
back to a fixed-seed sample of positions, counted whole.

The file: NumPy arrays (``np.savez``, read without pickle) -- ``terms`` (the vocabulary, UTF-8, one term a
line), ``df`` (by term), the scalars, and the counted passages as CSR arrays (``rowids``, ``indptr``,
``term_ids``, ``counts``, ``lengths``) with their ``keys`` (the first 64 bits of each content hash); ``full``
says whether they are every passage (a searcher scores them from these arrays) or the sample.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.query.bm25 import MAX_TOKEN_BYTES, STOP_WORDS, Analyzer, CandidateBM25, CollectionStats

log = logging.getLogger(__name__)

FILE = "bm25/chunks.npz"  # in a snapshot (manifest layout key "bm25")
FORMAT = 2  # 2: the sample is chosen by content hash and stored with its keys
# Every passage up to this many, else a fixed-seed uniform sample of this many (see the module doc).
SAMPLE_ROWS = 20_000
POOL_ROWS = 2 * SAMPLE_ROWS  # the sample and a reserve for passages deleted from it (see Pool)
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
class Pool:
    """Every passage whose content key is below ``cut`` (about :data:`POOL_ROWS` of them: the sample and its
    reserve), with its row id, and the table's fragments when they were counted: what the next count of a table that
    only grew (and lost none of these rows) needs instead of every passage's key (:func:`count`)."""

    keys: np.ndarray  # uint64, sorted by row id
    rowids: np.ndarray  # uint64 row addresses
    cut: int
    fragments: np.ndarray  # int64 (id, physical rows, deleted rows) per fragment


@dataclass
class Counted:
    """What :func:`count` finds and :func:`read` loads."""

    stats: CollectionStats
    vocab: list[str]
    passages: Passages | None  # every passage's terms (None when sampled)
    sample: Passages | None = None  # the sample's terms, when sampled (kept for the next count, not for scoring)
    keys: np.ndarray | None = None  # uint64 content keys of the rows of ``passages`` or ``sample``
    pool: Pool | None = None  # the publisher's own copy only (:func:`write` ``with_sample``): see :class:`Pool`

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

    def terms(self) -> Passages | None:
        """The CSR arrays of every counted passage (all of them, or the sample), None when they were not kept."""
        p = self.passages if self.passages is not None else self.sample
        return p if p is not None and self.keys is not None and len(self.keys) == len(p.lengths) else None


def content_keys(hashes) -> np.ndarray:
    """The first 64 bits of each hex content hash (a list or an Arrow string array), as uint64 (a missing hash:
    2**64 - 1, never sampled first)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = hashes.combine_chunks() if isinstance(hashes, pa.ChunkedArray) else pa.array(hashes, pa.string())
    if len(arr) == 0:
        return np.zeros(0, np.uint64)
    arr = arr.cast(pa.string())
    chars = _first_chars(arr, 16)
    if chars is None:  # hashes of other lengths, or missing ones: cut and padded by Arrow (3x slower)
        arr = pc.utf8_rpad(pc.utf8_slice_codeunits(pc.fill_null(arr, "f" * 16), 0, 16), 16, "f")
        offsets = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset: arr.offset + len(arr) + 1]
        chars = np.frombuffer(arr.buffers()[2], np.uint8)[offsets[0]: offsets[-1]]
        if len(chars) != 16 * len(arr):  # non-ASCII characters take more than 16 bytes
            raise ValueError("a content hash is not hexadecimal")
        chars = chars.reshape(-1, 16)
    # hex digits to bytes in NumPy, by a lookup table (a Python int() per hash costs 10x more at 1M passages)
    nibbles = _HEX[chars]
    if (nibbles > 15).any():
        raise ValueError("a content hash is not hexadecimal")
    packed = np.ascontiguousarray((nibbles[:, 0::2] << 4) | nibbles[:, 1::2])
    return packed.view(">u8").ravel().astype(np.uint64)


def _first_chars(arr, k: int) -> np.ndarray | None:
    """The first ``k`` bytes of each string of the Arrow string array ``arr`` as an (n, k) view of its buffer, when
    every string is present and of one length of at least ``k`` bytes (a sha256 in hex: 64); else None."""
    if arr.null_count:
        return None
    offsets = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset: arr.offset + len(arr) + 1]
    width = int(offsets[1] - offsets[0])
    if width < k or int(offsets[-1] - offsets[0]) != width * len(arr) or (np.diff(offsets) != width).any():
        return None
    data = np.frombuffer(arr.buffers()[2], np.uint8)[offsets[0]: offsets[-1]]
    return data.reshape(-1, width)[:, :k]


_HEX = np.full(256, 255, np.uint8)  # ASCII code -> its hex digit's value (255: not a hex digit)
_HEX[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
_HEX[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
_HEX[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)


def count(table, analyzer: Analyzer | None = None, texts: tuple[np.ndarray, list[str]] | None = None,
          previous: Counted | None = None) -> Counted:
    """Count the statistics of a chunks table (a :class:`pipeline.query.tables.ReadTable`): every passage up to
    :data:`SAMPLE_ROWS`, else the sample of smallest content hashes. ``texts``: (row ids, texts) of every
    passage when the caller already holds them. ``previous``: statistics counted before (the last publish's),
    whose passages are not analysed again."""
    analyzer = analyzer or Analyzer()
    n = table.count_rows()
    if "content_hash" not in table.schema.names:
        return _count_positions(table, analyzer, texts, n)
    fragments = table.fragments() if n > SAMPLE_ROWS else None
    grown = _grown(table, previous.pool if previous is not None else None, fragments)
    if grown is not None:  # only the passages below the pool's cut, in row id order (= storage order)
        keys_all, rowids_all = grown
    else:
        t = table.scan(["content_hash"])
        rowids_all = t["_rowid"].to_numpy().astype(np.int64)
        keys_all = content_keys(t["content_hash"])
    if n <= SAMPLE_ROWS:
        chosen = np.arange(len(keys_all))
    else:  # the SAMPLE_ROWS smallest keys; ties (the same content twice) by position
        cut = np.partition(keys_all, SAMPLE_ROWS - 1)[SAMPLE_ROWS - 1]
        near = np.flatnonzero(keys_all <= cut)  # a full sort of every key costs 3x more at 1M passages
        chosen = np.sort(near[np.lexsort((near, keys_all[near]))[:SAMPLE_ROWS]])
    keys = keys_all[chosen]
    old = previous.terms() if previous is not None else None
    vocab: list[str] = []
    src = np.full(len(keys), -1, dtype=np.int64)  # each passage's row in ``old`` (-1: analysed now), found by its
    if old is not None and previous is not None and previous.keys is not None and len(previous.keys):  # content key:
        vocab = list(previous.vocab)  # the same content has the same terms
        order = np.argsort(previous.keys, kind="stable")
        sorted_keys = previous.keys[order]
        at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
        src = np.where(sorted_keys[at] == keys, order[at], -1)
    todo = np.flatnonzero(src < 0)
    new: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
    if len(todo):
        if texts is not None and len(texts[0]) == n:
            by_rowid = dict(zip(np.asarray(texts[0]).tolist(), texts[1]))
            raw = [by_rowid.get(int(r)) for r in rowids_all[chosen[todo]].tolist()]
        elif grown is not None:  # positions are not known: by row id
            got = table.take_row_ids(rowids_all[chosen[todo]].tolist(), ["text", "_rowid"])
            by_rowid = dict(zip(got["_rowid"].to_pylist(), got["text"].to_pylist()))
            raw = [by_rowid.get(int(r)) for r in rowids_all[chosen[todo]].tolist()]
        else:
            raw = table.take_offsets(chosen[todo].tolist(), ["text"])["text"].to_pylist()
        ids_of = {w: i for i, w in enumerate(vocab)}
        for i, text in zip(todo.tolist(), raw):
            terms = analyzer.terms(text or "")
            ids = np.fromiter((ids_of.setdefault(w, len(ids_of)) for w in terms), dtype=np.int64, count=len(terms))
            uniq, c = np.unique(ids, return_counts=True)
            new[i] = (uniq, c, len(terms))
        vocab = list(ids_of)
    log.debug("BM25 statistics: %d passage(s) analysed, %d known from before", len(todo), len(keys) - len(todo))
    # the CSR arrays: a known passage's slice gathered from ``old`` (in NumPy: a Python loop over 20,000 passages cost
    # a third of a night's count), a new one's from ``new``
    lengths = np.zeros(len(keys), dtype=np.int64)
    sizes = np.zeros(len(keys), dtype=np.int64)
    known = np.flatnonzero(src >= 0)
    if len(known):
        rows = src[known]
        lengths[known] = old.lengths[rows]  # type: ignore[union-attr]
        sizes[known] = old.indptr[rows + 1] - old.indptr[rows]  # type: ignore[union-attr]
    for i, (uniq, _c, length) in new.items():
        sizes[i], lengths[i] = len(uniq), length
    indptr = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    term_ids = np.zeros(int(indptr[-1]), dtype=np.int64)
    counts = np.zeros(int(indptr[-1]), dtype=np.int32)
    if len(known):
        spans = sizes[known]
        within = np.arange(int(spans.sum()), dtype=np.int64) - np.repeat(np.cumsum(spans) - spans, spans)
        at_out = np.repeat(indptr[known], spans) + within
        at_old = np.repeat(old.indptr[rows], spans) + within  # type: ignore[union-attr]
        term_ids[at_out] = old.term_ids[at_old]  # type: ignore[union-attr]
        counts[at_out] = old.counts[at_old]  # type: ignore[union-attr]
    for i, (uniq, c, _length) in new.items():
        term_ids[indptr[i]:indptr[i + 1]] = uniq
        counts[indptr[i]:indptr[i + 1]] = c
    counted = _assemble_csr(indptr, term_ids, counts, lengths, vocab, rowids_all[chosen], n, n <= SAMPLE_ROWS, keys)
    if fragments is not None:
        counted.pool = _pool(keys_all, rowids_all, previous.pool.cut if grown is not None else None,  # type: ignore[union-attr]
                             fragments)
    return counted


def _pool(keys: np.ndarray, rowids: np.ndarray, cut: int | None, fragments: list[tuple[int, int, int]]) -> Pool:
    """The :class:`Pool` of the passages ``keys`` / ``rowids``: every one below ``cut``, or below the
    :data:`POOL_ROWS`-th smallest key when there is no cut yet or the pool has grown to twice that (a lower cut keeps
    it exact: every passage below it is in the pool)."""
    if cut is None or int((keys < np.uint64(cut)).sum()) > 2 * POOL_ROWS:
        cut = int(np.partition(keys, POOL_ROWS - 1)[POOL_ROWS - 1]) if len(keys) > POOL_ROWS else 2 ** 64 - 1
    inside = np.flatnonzero(keys < np.uint64(cut))
    return Pool(keys=keys[inside], rowids=rowids[inside].astype(np.uint64), cut=cut,
                fragments=np.asarray(fragments, dtype=np.int64).reshape(-1, 3))


def _grown(table, pool: Pool | None, fragments: list[tuple[int, int, int]] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(content keys, row ids) of every passage below ``pool.cut`` now, in row id order, read from the pool and the
    fragments added since it was counted; None (count every key) when that cannot be known: no pool, a fragment of
    then rewritten or gone (compaction), fewer than :data:`SAMPLE_ROWS` left, or rows that do not hold the keys the
    pool says (another table)."""
    if pool is None or fragments is None or not len(pool.keys):
        return None
    then = {int(f): (int(r), int(d)) for f, r, d in pool.fragments.tolist()}
    now = {f: (r, d) for f, r, d in fragments}
    if any(f not in now or now[f][0] != r for f, (r, _) in then.items()):
        return None
    keys, rowids = pool.keys, pool.rowids
    deleted_from = [f for f, (_, d) in then.items() if now[f][1] != d]
    if deleted_from:  # rows deleted since: keep the pool's rows those fragments still hold
        live = table.scan_fragments(deleted_from, [])["_rowid"].to_numpy().astype(np.uint64)
        keep = ~np.isin(rowids >> np.uint64(32), np.asarray(deleted_from, np.uint64)) | np.isin(rowids, live)
        keys, rowids = keys[keep], rowids[keep]
    added = [f for f in now if f not in then]
    if added:
        t = table.scan_fragments(added, ["content_hash"])
        new_keys = content_keys(t["content_hash"])
        below = np.flatnonzero(new_keys < np.uint64(pool.cut))
        keys = np.concatenate([keys, new_keys[below]])
        rowids = np.concatenate([rowids, t["_rowid"].to_numpy().astype(np.uint64)[below]])
    if len(keys) < SAMPLE_ROWS:
        return None
    order = np.argsort(rowids, kind="stable")
    keys, rowids = keys[order], rowids[order]
    probe = np.unique(np.linspace(0, len(rowids) - 1, 64).astype(np.int64))  # the pool's rows hold its keys
    got = table.take_row_ids(rowids[probe].tolist(), ["content_hash", "_rowid"])
    held = dict(zip(got["_rowid"].to_pylist(), content_keys(got["content_hash"]).tolist()))
    if any(held.get(int(r)) != int(k) for r, k in zip(rowids[probe].tolist(), keys[probe].tolist())):
        return None
    return keys, rowids.astype(np.int64)


def _assemble(ids_parts: list[np.ndarray], count_parts: list[np.ndarray], lengths: np.ndarray, vocab: list[str],
              rowids: np.ndarray, n: int, full: bool, keys: np.ndarray | None) -> Counted:
    """:func:`_assemble_csr` of each counted passage's sorted distinct term ids and their counts."""
    sizes = np.array([len(x) for x in ids_parts], dtype=np.int64)
    indptr = np.zeros(len(ids_parts) + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    term_ids = np.concatenate(ids_parts).astype(np.int64) if ids_parts else np.zeros(0, np.int64)
    counts = np.concatenate(count_parts).astype(np.int32) if count_parts else np.zeros(0, np.int32)
    return _assemble_csr(indptr, term_ids, counts, lengths, vocab, rowids, n, full, keys)


def _assemble_csr(indptr: np.ndarray, term_ids: np.ndarray, counts: np.ndarray, lengths: np.ndarray, vocab: list[str],
                  rowids: np.ndarray, n: int, full: bool, keys: np.ndarray | None) -> Counted:
    """The statistics and CSR arrays of the counted passages (``indptr`` into ``term_ids`` / ``counts``: each one's
    sorted distinct term ids and their counts) of a table of ``n``; terms no passage uses any more are dropped from the
    vocabulary."""
    df = np.bincount(term_ids, minlength=len(vocab))
    used = np.flatnonzero(df)
    if len(used) < len(vocab):  # renumber: ids keep their order, so each passage's ids stay sorted
        remap = np.full(len(vocab), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        term_ids = remap[term_ids]
        vocab = [vocab[i] for i in used.tolist()]
        df = df[used]
    m = len(indptr) - 1
    stats = CollectionStats(n_docs=n, avgdl=float(lengths.sum()) / m if m else 1.0,
                            df=dict(zip(vocab, df.tolist())), sampled=m)
    csr = Passages(rowids=rowids, indptr=indptr, term_ids=term_ids.astype(np.int32), counts=counts, lengths=lengths)
    return Counted(stats=stats, vocab=vocab, passages=csr if full else None, sample=None if full else csr, keys=keys)


def _count_positions(table, analyzer: Analyzer, texts: tuple[np.ndarray, list[str]] | None, n: int) -> Counted:
    """A table without content hashes: every passage, or a fixed-seed sample of positions, analysed now."""
    if texts is not None and len(texts[0]) <= SAMPLE_ROWS:
        rowids, raw = np.asarray(texts[0], dtype=np.int64), list(texts[1])
    elif n <= SAMPLE_ROWS:
        t = table.scan(["text"])
        rowids, raw = t["_rowid"].to_numpy().astype(np.int64), t["text"].to_pylist()
    else:  # a uniform sample, the same in every process (fixed seed): the same scores everywhere
        offsets = np.sort(np.random.default_rng(0).choice(n, SAMPLE_ROWS, replace=False))
        raw = table.take_offsets(offsets.tolist(), ["text"])["text"].to_pylist()
        rowids = np.full(len(raw), -1, dtype=np.int64)
    ids_of: dict[str, int] = {}
    ids_parts, count_parts, lengths = [], [], []
    for text in raw:
        terms = analyzer.terms(text or "")
        uniq, c = np.unique(np.fromiter((ids_of.setdefault(w, len(ids_of)) for w in terms), dtype=np.int64,
                                        count=len(terms)), return_counts=True)
        ids_parts.append(uniq)
        count_parts.append(c)
        lengths.append(len(terms))
    return _assemble(ids_parts, count_parts, np.array(lengths, dtype=np.int64), list(ids_of), rowids, n,
                     len(raw) == n, None)


def write(path: Path, counted: Counted, with_sample: bool = False) -> None:
    """Store ``counted`` at ``path`` (its folder is made): the statistics, and every passage's terms when fully
    counted. ``with_sample``: a sample's terms too (the publisher's own copy, :func:`terms_cache`, not a snapshot's
    file: at 20,000 passages they are ~10 MB a snapshot would rewrite every night)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    s = counted.stats
    p = counted.passages if counted.passages is not None else (counted.sample if with_sample else None)
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
        "keys": counted.keys if counted.keys is not None and p is not None else np.zeros(0, dtype=np.uint64),
        "full": np.array([counted.passages is not None], dtype=np.bool_),
    }
    if with_sample and counted.pool is not None:
        arrays.update(pool_keys=counted.pool.keys, pool_rowids=counted.pool.rowids,
                      pool_cut=np.array([counted.pool.cut], dtype=np.uint64), pool_fragments=counted.pool.fragments)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


def terms_cache(warehouse: Path) -> Path:
    """Where a publisher keeps the terms of the passages it counted, sample included (:func:`write` with
    ``with_sample``), for the next publish to reuse: beside the warehouse, never in a snapshot."""
    return Path(warehouse) / "bm25_cache" / "chunks.npz"


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
    if int(a["format"][0]) not in (1, FORMAT):  # 1: the same statistics, without content keys (nothing to reuse)
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
    csr = None
    if len(a["indptr"]):
        csr = Passages(rowids=a["rowids"].astype(np.int64), indptr=a["indptr"].astype(np.int64),
                       term_ids=a["term_ids"], counts=a["counts"], lengths=a["lengths"].astype(np.int64))
    full = bool(a["full"][0])
    keys = a["keys"].astype(np.uint64) if "keys" in a and len(a["keys"]) else None
    pool = None
    if "pool_cut" in a:
        pool = Pool(keys=a["pool_keys"].astype(np.uint64), rowids=a["pool_rowids"].astype(np.uint64),
                    cut=int(a["pool_cut"][0]), fragments=a["pool_fragments"].astype(np.int64).reshape(-1, 3))
    return Counted(stats=stats, vocab=vocab, passages=csr if full else None, sample=None if full else csr, keys=keys,
                   pool=pool)
