"""Embedding into LanceDB: real PDF chunks + CISI abstracts, incremental by content hash, model changes."""

from __future__ import annotations

import numpy as np
import pytest

from embed_helpers import add_pdf_paper, clone_settings, import_cisi_subset, make_settings

PDF = "1409.0473"  # Bahdanau et al., 15 pages, 3 figures
N_CISI = 25


def _lance(settings):
    import lancedb

    return lancedb.connect(str(settings.lancedb_dir))


def _table(settings, name):
    return _lance(settings).open_table(name).to_arrow()


def _vectors(t, col="vector"):
    v = t.column(col).combine_chunks()
    return v.values.to_numpy(zero_copy_only=False).reshape(len(v), v.type.list_size)


def _warehouse_count(settings, sql):
    import duckdb

    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


@pytest.fixture(scope="module")
def embedded(shared_data, tmp_path_factory):
    """One real PDF (chunks + figure legends via the full-text extractor) + 25 CISI abstracts, embedded once."""
    from pipeline.steps.embed import run_embed

    s = make_settings(tmp_path_factory.mktemp("embed"))
    import_cisi_subset(s, shared_data, N_CISI)
    pdf = add_pdf_paper(s, shared_data, PDF)
    first = run_embed(s)
    return s, pdf, first


def test_first_embed_builds_all_tables(embedded):
    from pipeline.steps.embed import table_model

    s, pdf, first = embedded
    n_passages = _warehouse_count(s, "SELECT count(*) FROM passages")
    n_papers = _warehouse_count(s, "SELECT count(DISTINCT paper_id) FROM passages")
    # every PDF chunk + one abstract passage per paper with text
    # every chunk but the front matter's and the bibliography's is a passage, plus one abstract passage a paper
    searchable = _warehouse_count(s, "SELECT count(*) FROM chunks WHERE role IN ('body', 'acknowledgements', 'appendix')")
    assert 0 < searchable < pdf["chunks"]
    assert n_passages == searchable + _warehouse_count(s, "SELECT count(*) FROM passages WHERE kind = 'abstract'")
    assert first["passages"] == n_passages and first["papers"] == n_papers and first["figures"] == pdf["figures"]
    assert first["encoded"] > 0 and first["encoded"] <= n_passages + pdf["figures"]

    chunks = _table(s, "chunks")
    assert chunks.num_rows == n_passages
    v = _vectors(chunks)
    assert v.dtype == np.float32 and v.shape[1] == 384
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert set(chunks.column("kind").to_pylist()) == {"body", "abstract"}
    ids = chunks.column("chunk_id").to_pylist()
    assert f"{PDF}#0" not in ids and f"{PDF}#1" in ids and "cisi:1#abs" in ids  # chunk 0 is the front matter

    figures = _table(s, "figures")
    assert figures.num_rows == pdf["figures"]
    assert all(t.lower().startswith(("figure", "fig")) for t in figures.column("text").to_pylist())

    # papers: doc vector = normalised mean of the paper's passage vectors; abs vector = its #abs passage
    papers = _table(s, "papers")
    assert papers.num_rows == n_papers
    row = papers.column("paper_id").to_pylist().index(PDF)
    mine = np.array([pid == PDF for pid in chunks.column("paper_id").to_pylist()])
    mean = v[mine].mean(axis=0)
    np.testing.assert_allclose(_vectors(papers, "doc_vector")[row], mean / np.linalg.norm(mean), atol=1e-5)
    abs_row = chunks.column("chunk_id").to_pylist().index(f"{PDF}#abs")
    np.testing.assert_allclose(_vectors(papers, "abs_vector")[row], v[abs_row], atol=1e-6)
    cisi = papers.column("paper_id").to_pylist().index("cisi:1")
    assert papers.column("authors")[cisi].as_py(), "CISI authors list carried into LanceDB"
    assert table_model(_lance(s).open_table("chunks"))["dim"] == 384


def test_vectors_match_the_bare_model(embedded):
    """A chunk's stored vector is exactly what the model gives for its text."""
    from pipeline.embedding.encoders import get_encoder

    s, _, _ = embedded
    chunks = _table(s, "chunks")
    ids = chunks.column("chunk_id").to_pylist()
    i, j = ids.index(f"{PDF}#3"), ids.index("cisi:2#abs")
    enc = get_encoder(s)
    fresh = enc.encode_docs([chunks.column("text")[i].as_py(), chunks.column("text")[j].as_py()])
    stored = _vectors(chunks)[[i, j]]
    np.testing.assert_allclose((fresh * stored).sum(axis=1), 1.0, atol=1e-4)


def test_indexes_and_bm25(embedded):
    s, _, _ = embedded
    t = _lance(s).open_table("chunks")
    kinds = {(ix.index_type, tuple(ix.columns)) for ix in t.list_indices()}
    assert ("FTS", ("text",)) in kinds and ("BTree", ("paper_id",)) in kinds
    hits = t.search("alignment model translation", query_type="fts").limit(5).to_list()
    assert hits and any(h["paper_id"] == PDF for h in hits)
    papers = _lance(s).open_table("papers")
    assert ("BTree", ("year",)) in {(ix.index_type, tuple(ix.columns)) for ix in papers.list_indices()}


def test_rerun_encodes_nothing_and_one_changed_chunk_only_itself(embedded, tmp_path):
    import duckdb

    from pipeline.steps.embed import run_embed

    s = clone_settings(embedded[0], tmp_path)
    again = run_embed(s)
    assert again["encoded"] == 0
    assert all(c["inserted"] == c["updated"] == c["deleted"] == 0 for c in again["changes"].values())

    from pipeline import catalog_changes

    before = _table(s, "chunks")
    con = duckdb.connect(str(s.db_path))
    con.execute("UPDATE chunks SET text = text || ' (revised)', content_hash = 'x' WHERE chunk_id = ?", [f"{PDF}#5"])
    catalog_changes.record(con, "chunks", [f"{PDF}#5"])  # as every writer of the table does
    con.close()
    changed = run_embed(s)
    assert changed["encoded"] == 1
    assert changed["changes"]["chunks"] == {"inserted": 0, "updated": 1, "deleted": 0, "rebuilt": False}
    assert changed["changes"]["papers"]["updated"] == 1  # its doc vector moved
    after = _table(s, "chunks")
    b = dict(zip(before.column("chunk_id").to_pylist(), _vectors(before)))
    a = dict(zip(after.column("chunk_id").to_pylist(), _vectors(after)))
    moved = [k for k in a if not np.array_equal(a[k], b[k])]
    assert moved == [f"{PDF}#5"]

    # a write outside paperkb's steps, which the change log does not name: `paperkb embed --full` compares every row
    con = duckdb.connect(str(s.db_path))
    con.execute("UPDATE chunks SET text = text || ' (by hand)' WHERE chunk_id = ?", [f"{PDF}#6"])
    con.close()
    full = run_embed(s, full=True)
    assert full["encoded"] == 1 and full["compared"] > embedded[2]["passages"]
    assert full["changes"]["chunks"] == {"inserted": 0, "updated": 1, "deleted": 0, "rebuilt": False}


def test_a_night_reads_and_writes_only_its_changed_rows_and_ends_as_a_whole_build(embedded, tmp_path, shared_data):
    """New CISI papers and a retitled one: the merge reads only their passages (compared by source hash), writes
    only their rows, and the tables equal those a build from scratch makes (same vectors, same hashes)."""
    import shutil

    import duckdb

    from pipeline.steps.embed import run_embed

    s = clone_settings(embedded[0], tmp_path)
    import_cisi_subset(s, shared_data, N_CISI + 5)  # 5 more CISI records
    from pipeline import catalog_changes

    con = duckdb.connect(str(s.db_path))
    retitled = con.execute("SELECT min(paper_id) FROM papers WHERE paper_id <> ?", [PDF]).fetchall()[0][0]
    con.execute("UPDATE papers SET title = title || ' (revised)' WHERE paper_id = ?", [retitled])
    catalog_changes.record(con, "papers", [retitled])  # as every writer of the table does
    con.close()
    night = run_embed(s)
    assert night["read"] == 6  # 5 new abstract passages and the retitled paper's: no other row read
    assert night["encoded"] == 6
    assert night["changes"]["chunks"] == {"inserted": 5, "updated": 1, "deleted": 0, "rebuilt": False}
    assert night["changes"]["papers"] == {"inserted": 5, "updated": 1, "deleted": 0, "rebuilt": False}
    assert night["changes"]["figures"] == {"inserted": 0, "updated": 0, "deleted": 0, "rebuilt": False}
    assert night["passages"] == embedded[2]["passages"] + 5

    fresh = clone_settings(s, tmp_path / "fresh")
    shutil.rmtree(fresh.lancedb_dir)
    whole = run_embed(fresh)
    assert whole["encoded"] == 0 and whole["read"] == night["passages"] + night["figures"]  # from the cache
    # the change log named the papers written since the last embed: only their rows were hashed and compared (the
    # PDF's chunks, legends and paper row were not)
    assert 0 < night["compared"] < whole["compared"] - embedded[1]["chunks"]
    _assert_same_tables(s, fresh)


def _assert_same_tables(s, other, tables=("chunks", "papers", "figures")):
    """The LanceDB tables of ``s`` and ``other`` hold the same rows: values, hashes and vectors."""
    for name in tables:
        key = {"chunks": "chunk_id", "papers": "paper_id", "figures": "figure_id"}[name]
        a, b = _table(s, name).sort_by(key), _table(other, name).sort_by(key)
        assert a.num_rows == b.num_rows, name
        assert a.drop_columns([c for c in a.column_names if "vector" in c]).equals(
            b.drop_columns([c for c in b.column_names if "vector" in c])), name
        for col in (c for c in a.column_names if "vector" in c):
            assert np.array_equal(_vectors(a, col), _vectors(b, col)), (name, col)


def test_whole_builds_and_merges_go_a_batch_at_a_time(embedded, tmp_path, monkeypatch):
    """Rows are read, built and written a batch at a time (here 7 passages or legends, 3 papers), so a whole build
    holds one batch, not the table: the batches give every mart row once, with its source hash; a build from scratch
    gives the tables of one batch; the encoding reads its texts in batches too (spilled, then encoded once each); a
    merge of most of a table (a withdrawn PDF's passages, retitled papers) rewrites and deletes exactly what changed
    and ends as a build from scratch does."""
    import shutil

    import duckdb
    import pyarrow as pa

    from pipeline import catalog_changes
    from pipeline.steps import embed_changes
    from pipeline.steps.embed import run_embed

    monkeypatch.setattr(embed_changes, "BATCH_ROWS", 7)
    monkeypatch.setattr(embed_changes, "PAPERS_PER_BATCH", 3)
    s = clone_settings(embedded[0], tmp_path)
    con = duckdb.connect(str(s.db_path), read_only=True)
    try:
        want = embed_changes.source_hashes(con)
        for name, most in (("chunks", 7), ("papers", 3), ("figures", 7)):
            batches = list(embed_changes.read_batches(con, name, want[name]))
            assert all(b.num_rows <= most for b in batches) and (name == "figures" or len(batches) > 3), name
            got, key = pa.concat_tables(batches), embed_changes.KEYS[name]
            # every row once, with the source hash the compare computed for it
            assert got.num_rows == want[name].num_rows == len(set(got.column(key).to_pylist())), name
            assert dict(zip(got.column(key).to_pylist(), got.column(embed_changes.ROW_HASH).to_pylist())) == dict(
                zip(want[name].column(key).to_pylist(), want[name].column("row_hash").to_pylist())), name
            none = list(embed_changes.read_batches(con, name, want[name], pa.array([], pa.string())))
            assert [b.num_rows for b in none] == [0] and none[0].schema == got.schema, name  # no rows: the columns
    finally:
        con.close()

    scratch = clone_settings(s, tmp_path / "scratch")
    shutil.rmtree(scratch.lancedb_dir)
    built = run_embed(scratch)
    assert all(c["rebuilt"] for c in built["changes"].values()) and built["encoded"] == 0
    _assert_same_tables(scratch, embedded[0])  # built in one batch

    # the encoding reads a batch at a time too: with no vector cache, every text is encoded once, from its spill file
    cold = clone_settings(s, tmp_path / "cold", embed_cache_dir=tmp_path / "cold-cache")
    shutil.rmtree(cold.lancedb_dir)
    texts = built["passages"] + built["figures"]
    encoded = run_embed(cold)
    assert encoded["encoded"] == texts and encoded["read"] == texts
    for name in ("chunks", "papers", "figures"):
        a, b = _table(cold, name), _table(embedded[0], name)
        key = a.column_names[0]
        a, b = a.sort_by(key), b.sort_by(key)
        assert a.drop_columns([c for c in a.column_names if "vector" in c]).equals(
            b.drop_columns([c for c in b.column_names if "vector" in c])), name
        for col in (c for c in a.column_names if "vector" in c):  # (other batches: the last digits may move)
            assert np.allclose(_vectors(a, col), _vectors(b, col), atol=1e-4), (name, col)

    con = duckdb.connect(str(s.db_path))
    n_chunks = con.execute("SELECT count(*) FROM passages WHERE paper_id = ?", [PDF]).fetchone()[0]
    for table in ("chunks", "figures", "paper_authors", "papers"):
        con.execute(f"DELETE FROM {table} WHERE paper_id = ?", [PDF])
    retitled = [r[0] for r in con.execute("SELECT paper_id FROM papers ORDER BY paper_id LIMIT 2").fetchall()]
    con.execute("UPDATE papers SET title = title || ' (revised)' WHERE paper_id = ANY(?)", [retitled])
    for table in ("chunks", "figures", "paper_authors", "papers"):
        catalog_changes.record(con, table, None)  # as a writer of many rows logs them
    con.close()
    assert n_chunks > embedded[2]["passages"] / 2  # most passages go: `chunks` is merged whole
    merged = run_embed(s)
    assert merged["encoded"] == 2  # the retitled abstracts
    assert merged["changes"]["chunks"] == {"inserted": 0, "updated": 2, "deleted": n_chunks, "rebuilt": False}
    assert merged["changes"]["papers"] == {"inserted": 0, "updated": 2, "deleted": 1, "rebuilt": False}
    assert merged["changes"]["figures"]["deleted"] == embedded[1]["figures"] and not merged["changes"]["figures"]["rebuilt"]
    fresh = clone_settings(s, tmp_path / "fresh")
    shutil.rmtree(fresh.lancedb_dir)
    run_embed(fresh)
    _assert_same_tables(s, fresh)


def test_a_lancedb_change_the_embed_did_not_make_means_every_row_is_compared_again(embedded, tmp_path):
    """The record of what the tables reflect names their versions: a row deleted behind the embed's back moves one,
    so the next embed compares every row (not only the papers the change log names) and puts the row back."""
    from pipeline.steps.embed import run_embed

    s = clone_settings(embedded[0], tmp_path)
    quiet = run_embed(s)
    assert quiet["compared"] == 0 and quiet["read"] == 0  # nothing written since: nothing hashed
    _lance(s).open_table("chunks").delete(f"chunk_id = '{PDF}#3'")
    healed = run_embed(s)
    assert healed["compared"] > embedded[2]["passages"]
    assert healed["changes"]["chunks"] == {"inserted": 1, "updated": 0, "deleted": 0, "rebuilt": False}
    assert healed["encoded"] == 0  # its vector was in the cache
    assert f"{PDF}#3" in set(_table(s, "chunks").column("chunk_id").to_pylist())


def test_marts_defined_otherwise_mean_every_row_is_compared_again(embedded, tmp_path):
    """The record names the marts' definitions too: after an upgrade that changes what a passage holds, the rows of
    papers the change log does not name are compared (and rewritten) as well."""
    import duckdb

    from pipeline.steps.embed import run_embed

    s = clone_settings(embedded[0], tmp_path)
    assert run_embed(s)["compared"] == 0
    con = duckdb.connect(str(s.db_path))
    sql = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'figure_legends'").fetchall()[0][0]
    changed = sql.replace("CREATE VIEW", "CREATE OR REPLACE VIEW", 1).replace('f."text",', "f.\"text\" || ' [legend]' AS text,", 1)
    assert changed != sql.replace("CREATE VIEW", "CREATE OR REPLACE VIEW", 1)
    con.execute(changed)
    con.close()
    again = run_embed(s)
    assert again["compared"] > embedded[2]["passages"]
    assert again["changes"]["figures"]["updated"] == embedded[1]["figures"] > 0


def test_withdrawn_paper_rows_are_removed(embedded, tmp_path):
    import duckdb

    from pipeline.steps.embed import run_embed

    s = clone_settings(embedded[0], tmp_path)
    con = duckdb.connect(str(s.db_path))
    n_chunks = con.execute("SELECT count(*) FROM passages WHERE paper_id = ? AND kind = 'body'", [PDF]).fetchone()[0]
    for table in ("chunks", "figures", "paper_authors", "papers"):
        con.execute(f"DELETE FROM {table} WHERE paper_id = ?", [PDF])
    con.close()
    r = run_embed(s)
    assert r["encoded"] == 0
    assert r["changes"]["chunks"]["deleted"] == n_chunks + 1  # body chunks + its abstract passage
    assert r["changes"]["papers"]["deleted"] == 1 and r["changes"]["figures"]["deleted"] == embedded[1]["figures"]
    assert PDF not in set(_table(s, "chunks").column("paper_id").to_pylist())


def _cls_pooled_model(path):
    """A genuinely different encoder built from the bundled weights: CLS pooling instead of mean pooling."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling, Transformer

    from pipeline.embedding.encoders import default_model_path

    word = Transformer(default_model_path())
    model = SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension(), pooling_mode="cls"), Normalize()],
                                device="cpu")
    model.save(str(path))
    return str(path)


def test_model_change_reembeds_everything(shared_data, tmp_path):
    """Another model (same dimension) and a truncated one (other dimension) each re-embed all texts."""
    from pipeline.steps.embed import run_embed, table_model

    s = make_settings(tmp_path / "a")
    import_cisi_subset(s, shared_data, 12)
    base = run_embed(s)
    n = base["passages"]
    assert base["encoded"] == n

    other = _cls_pooled_model(tmp_path / "minilm-cls")
    s2 = s.model_copy(update={"embed_model": other})
    r2 = run_embed(s2)
    assert r2["encoded"] == n and r2["dim"] == 384
    assert all(c["rebuilt"] for c in r2["changes"].values())
    t = _lance(s2).open_table("chunks")
    assert table_model(t)["name"] == other
    from pipeline.embedding.encoders import get_encoder

    first = t.to_arrow()
    cos = float(_vectors(first)[0] @ get_encoder(s).encode_docs([first.column("text")[0].as_py()])[0])
    assert cos < 0.999, "vectors come from the new model, not the old space"

    s3 = s.model_copy(update={"embed_truncate_dim": 128})
    r3 = run_embed(s3)
    assert r3["encoded"] == n and r3["dim"] == 128
    v = _vectors(_table(s3, "papers"), "doc_vector")
    assert v.shape[1] == 128
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)

    # back to the default model: its vectors are still cached, nothing is encoded, tables rebuilt
    r4 = run_embed(s)
    assert r4["encoded"] == 0 and r4["dim"] == 384 and all(c["rebuilt"] for c in r4["changes"].values())


def test_title_text_pair_format(shared_data, tmp_path):
    from pipeline.embedding.backends import vector_tolerance
    from pipeline.embedding.encoders import get_encoder
    from pipeline.steps.embed import run_embed

    s = make_settings(tmp_path, embed_doc_format="title_text_pair")
    import_cisi_subset(s, shared_data, 3)
    r = run_embed(s)
    assert r["encoded"] == r["passages"] == 3
    chunks = _table(s, "chunks")
    papers = _table(s, "papers")
    enc = get_encoder(s)
    i = papers.column("paper_id").to_pylist().index("cisi:1")
    pair = [papers.column("title")[i].as_py(), papers.column("abstract")[i].as_py()]
    # alone vs in the embed run's batch: equal at the backend's tolerance (OpenVINO's kernels vary with batch and threads)
    np.testing.assert_allclose(enc.encode_docs([pair])[0], _vectors(papers, "abs_vector")[i],
                               atol=vector_tolerance(enc.spec.runtime.precision))
    assert chunks.num_rows == 3


def test_bad_settings_are_user_errors(tmp_path):
    from pipeline.steps.embed import run_embed
    from pipeline.errors import UserError

    with pytest.raises(UserError, match="embed_doc_format"):
        run_embed(make_settings(tmp_path, embed_doc_format="xml"))
    with pytest.raises(UserError, match="no warehouse"):
        run_embed(make_settings(tmp_path))
