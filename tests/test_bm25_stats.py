"""The BM25 statistics a publish stores (pipeline.query.bm25_stats): a night analyses only the passages it has not
seen, and what it stores equals a count from scratch. On CISI's real abstracts, in real Lance tables."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from pipeline.query import bm25_stats
from pipeline.query.bm25 import Analyzer
from pipeline.query.tables import ReadTable


@pytest.fixture(scope="module")
def abstracts(shared_data) -> list[str]:
    raw = (shared_data / "collections" / "cisi" / "CISI.ALL").read_text(encoding="utf-8", errors="replace")
    out = []
    for rec in raw.split("\n.I ")[1:]:
        body = rec.split("\n.W\n", 1)[1].split("\n.X\n", 1)[0] if "\n.W\n" in rec else rec
        out.append(" ".join(body.split()))
    return out


def _table(folder, texts: list[str]) -> ReadTable:
    """A chunks table of ``texts`` as the embed step writes it (text, content hash), opened as readers open it."""
    import lance
    import pyarrow as pa

    hashes = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    lance.write_dataset(pa.table({"chunk_id": [f"c{i}" for i in range(len(texts))], "text": texts,
                                  "content_hash": hashes}), str(folder / "chunks.lance"), mode="overwrite")
    return ReadTable(folder, "chunks", lambda: pytest.fail("LanceDB is not needed to read a Lance table"))


class CountingAnalyzer(Analyzer):
    """The product's analyzer, counting the passages it analyses."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def terms(self, text):
        self.calls += 1
        return super().terms(text)


def _per_passage(c: bm25_stats.Counted) -> dict[int, dict[str, int]]:
    p = c.passages if c.passages is not None else c.sample
    assert p is not None and c.keys is not None
    return {int(k): {c.vocab[t]: int(n) for t, n in zip(p.term_ids[s:e].tolist(), p.counts[s:e].tolist())}
            for k, s, e in zip(c.keys.tolist(), p.indptr[:-1].tolist(), p.indptr[1:].tolist())}


def _same(a: bm25_stats.Counted, b: bm25_stats.Counted) -> None:
    assert (a.stats.n_docs, a.stats.sampled, a.stats.df) == (b.stats.n_docs, b.stats.sampled, b.stats.df)
    assert a.stats.avgdl == pytest.approx(b.stats.avgdl, rel=1e-12)
    assert _per_passage(a) == _per_passage(b)


def test_a_night_analyses_only_its_new_passages(abstracts, tmp_path):
    first, night = abstracts[:1400], abstracts  # + 60 abstracts: a night that grows the table by 4%
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    before = bm25_stats.count(_table(tmp_path / "a", first))
    bm25_stats.write(tmp_path / "a.npz", before)
    stored = bm25_stats.read(tmp_path / "a.npz")
    assert stored is not None and stored.keys is not None and len(stored.keys) == 1400
    table = _table(tmp_path / "b", night)
    analyzer = CountingAnalyzer()
    again = bm25_stats.count(table, analyzer, previous=stored)
    assert analyzer.calls == len(set(night) - set(first))  # the known contents are not analysed again
    fresh = bm25_stats.count(table)
    _same(again, fresh)
    assert again.passages is not None and again.passages.rowids.tolist() == fresh.passages.rowids.tolist()
    # and a searcher scores with them exactly as with a fresh count
    words = [("retrieval", 1.0), ("indexing", 0.5), ("libraries", 0.2)]
    rowids = again.passages.rowids[::9]
    texts = [night[i] for i in range(0, len(night), 9)]
    assert np.allclose(again.scorer().score(words, rowids, texts), fresh.scorer().score(words, rowids, texts))


def test_the_sample_is_chosen_by_content_and_stays_as_the_table_grows(abstracts, tmp_path, monkeypatch):
    monkeypatch.setattr(bm25_stats, "SAMPLE_ROWS", 400)  # CISI's 1,460 abstracts: sampled, like a 1M-chunk table
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    before = bm25_stats.count(_table(tmp_path / "a", abstracts[:1300]))
    assert before.passages is None and before.sample is not None and before.stats.sampled == 400
    assert before.stats.n_docs == 1300
    keys = bm25_stats.content_keys([hashlib.sha256(t.encode()).hexdigest() for t in abstracts[:1300]])
    assert sorted(before.keys.tolist()) == sorted(np.sort(keys)[:400].tolist())  # the 400 smallest content keys
    bm25_stats.write(tmp_path / "snapshot.npz", before)  # a snapshot's file: the statistics, not the sample's terms
    in_snapshot = bm25_stats.read(tmp_path / "snapshot.npz")
    assert in_snapshot is not None and in_snapshot.sample is None and in_snapshot.terms() is None
    assert in_snapshot.stats.df == before.stats.df
    bm25_stats.write(bm25_stats.terms_cache(tmp_path), before, with_sample=True)  # the publisher's own copy
    stored = bm25_stats.read(bm25_stats.terms_cache(tmp_path))
    assert stored is not None and stored.passages is None and stored.sample is not None
    table = _table(tmp_path / "b", abstracts)
    analyzer = CountingAnalyzer()
    again = bm25_stats.count(table, analyzer, previous=stored)
    fresh = bm25_stats.count(table)
    _same(again, fresh)
    entered = set(again.keys.tolist()) - set(before.keys.tolist())
    assert analyzer.calls == len(entered) < 60  # 160 new abstracts, of which about 400 * 160 / 1460 enter the sample
    assert len(set(again.keys.tolist()) & set(before.keys.tolist())) == 400 - len(entered)


class ScanCounting(ReadTable):
    """A reader's table that counts full scans of a column (what a count of a table that only grew should skip)."""

    scans = 0

    def scan(self, columns):
        type(self).scans += 1
        return super().scan(columns)


def test_a_table_that_grew_is_counted_from_the_pool_and_its_new_fragments_as_a_full_count_would(abstracts, tmp_path,
                                                                                                   monkeypatch):
    """One Lance table as the embed step keeps it: appended to (a new fragment a night), rows deleted (a paper
    re-embedded), compacted. Each publish counts with the statistics the last one kept: the same sample, rows and
    statistics as a count of every key, without reading every key while the table only grew or lost rows outside
    the pool."""
    import lance
    import pyarrow as pa

    monkeypatch.setattr(bm25_stats, "SAMPLE_ROWS", 300)
    monkeypatch.setattr(bm25_stats, "POOL_ROWS", 450)
    uri = tmp_path / "chunks.lance"

    def rows(texts, start):
        return pa.table({"chunk_id": [f"c{start + i}" for i in range(len(texts))], "text": texts,
                         "content_hash": [hashlib.sha256(t.encode()).hexdigest() for t in texts]})

    lance.write_dataset(rows(abstracts[:1000], 0), str(uri))
    table = lambda: ScanCounting(tmp_path, "chunks", lambda: pytest.fail("no LanceDB"))  # noqa: E731

    def publish(kept):
        """(the count a publish makes from the kept statistics, how many full scans it made, what it keeps)"""
        ScanCounting.scans = 0
        counted = bm25_stats.count(table(), previous=kept)
        scans = ScanCounting.scans
        bm25_stats.write(bm25_stats.terms_cache(tmp_path), counted, with_sample=True)
        fresh = bm25_stats.count(table())
        _same(counted, fresh)
        assert counted.sample.rowids.tolist() == fresh.sample.rowids.tolist()
        return counted, scans, bm25_stats.read(bm25_stats.terms_cache(tmp_path))

    first, scans, kept = publish(None)
    assert scans == 1 and kept.pool is not None and 300 < len(kept.pool.keys) < 450
    lance.write_dataset(rows(abstracts[1000:1200], 1000), str(uri), mode="append")  # a night's new passages
    night, scans, kept = publish(kept)
    assert scans == 0 and night.stats.n_docs == 1200
    # a paper re-embedded: rows deleted, among them some of the sample, and its new rows appended
    ds = lance.dataset(str(uri))
    t = ds.to_table(columns=["chunk_id", "content_hash"])
    keys = bm25_stats.content_keys(t["content_hash"])
    in_sample = set(night.keys.tolist())
    sampled = [c for c, k in zip(t["chunk_id"].to_pylist(), keys.tolist()) if k in in_sample]
    gone = sampled[:40] + ["c5", "c6", "c7"]
    ds.delete("chunk_id IN (" + ", ".join(f"'{c}'" for c in gone) + ")")
    lance.write_dataset(rows(abstracts[1200:1300], 1200), str(uri), mode="append")
    after_delete, scans, kept = publish(kept)
    assert scans == 0 and after_delete.stats.n_docs == 1300 - len(set(gone))
    # compaction rewrites the fragments: the row ids change, so every key is read again
    lance.dataset(str(uri)).optimize.compact_files(target_rows_per_fragment=100_000)
    _, scans, kept = publish(kept)
    assert scans == 1
    # a pool that lost most of its rows cannot say which ones come next: every key is read again
    ds = lance.dataset(str(uri))
    pool = ds._take_rows(kept.pool.rowids.tolist(), columns=["chunk_id"])["chunk_id"].to_pylist()
    ds.delete("chunk_id IN (" + ", ".join(f"'{c}'" for c in pool[:-200]) + ")")
    _, scans, _ = publish(kept)
    assert scans == 1


def test_statistics_of_the_first_format_are_still_read(abstracts, tmp_path, monkeypatch):
    """Snapshots published before the content keys keep their stored statistics (readers do not count them)."""
    (tmp_path / "a").mkdir()
    counted = bm25_stats.count(_table(tmp_path / "a", abstracts[:200]))
    with monkeypatch.context() as m:
        m.setattr(bm25_stats, "FORMAT", 1)
        bm25_stats.write(tmp_path / "old.npz", bm25_stats.Counted(counted.stats, counted.vocab, counted.passages))
    old = bm25_stats.read(tmp_path / "old.npz")
    assert old is not None and old.keys is None and old.terms() is None
    assert (old.stats.df, old.stats.n_docs) == (counted.stats.df, counted.stats.n_docs)
    assert old.passages is not None and old.passages.rowids.tolist() == counted.passages.rowids.tolist()


def test_content_keys_are_the_first_64_bits_of_each_hash_whatever_their_lengths():
    import pyarrow as pa

    full = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(50)]
    want = [int(h[:16], 16) for h in full]
    assert bm25_stats.content_keys(full).tolist() == want  # one length: read from Arrow's buffer
    assert bm25_stats.content_keys(pa.chunked_array([full[:20], full[20:]])).tolist() == want
    assert bm25_stats.content_keys(pa.array(full)[7:]).tolist() == want[7:]  # a slice: its own offsets
    # short or missing hashes: cut and padded with 'f' (a missing one sorts last)
    assert bm25_stats.content_keys(["abc", None, full[0]]).tolist() == [int("abc".ljust(16, "f"), 16), 2**64 - 1, want[0]]
