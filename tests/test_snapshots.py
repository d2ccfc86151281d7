"""pipeline.snapshots: resolving CURRENT or a pinned id, listing, manifests, checksums (no models needed),
plus the shared CISI snapshot that query and serve tests read."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipeline import snapshots
from pipeline.errors import UserError


def _fake_snapshot(root, sid, created="2026-01-01T00:00:00+00:00", payload=b"data"):
    """A minimal well-formed snapshot folder (the real layout is exercised in test_publish)."""
    d = root / sid
    (d / "lancedb").mkdir(parents=True)
    (d / "lancedb" / "f.bin").write_bytes(payload)
    (d / "catalog.duckdb").write_bytes(b"catalog")
    files = {rel: snapshots.sha256_file(d / rel) for rel in snapshots.snapshot_files(d)}
    (d / "manifest.json").write_text(json.dumps({"snapshot_id": sid, "created_at": created, "files": files,
                                                 "counts": {"papers": 1}, "model": {"name": "m", "dim": 3}}))
    return d


def test_resolve_current_and_pinned(settings):
    root = settings.snapshots_dir
    with pytest.raises(UserError, match="no published snapshot"):
        snapshots.resolve(settings)
    a = _fake_snapshot(root, "A", "2026-01-01T00:00:00+00:00")
    b = _fake_snapshot(root, "B", "2026-01-02T00:00:00+00:00")
    snapshots.write_current(settings, "B")
    assert snapshots.resolve(settings) == b
    assert snapshots.resolve(settings, "A") == a
    assert snapshots.resolve(settings.warehouse) == b  # a warehouse folder works too
    assert snapshots.resolve(root) == b
    for bad in ("nope", "../A", "A.tmp"):
        with pytest.raises(UserError):
            snapshots.resolve(settings, bad)
    with pytest.raises(UserError):
        snapshots.write_current(settings, "nope")
    assert snapshots.current_id(settings) == "B"


def test_list_ignores_tmp_and_incomplete_folders(settings):
    root = settings.snapshots_dir
    _fake_snapshot(root, "A", "2026-01-02T00:00:00+00:00")
    _fake_snapshot(root, "B.tmp")
    (root / "C").mkdir()  # no manifest: not a snapshot
    _fake_snapshot(root, "Z", "2026-01-01T00:00:00+00:00")
    snapshots.write_current(settings, "A")
    listed = snapshots.list_snapshots(settings)
    assert [s["snapshot_id"] for s in listed] == ["Z", "A"]  # by creation time
    assert [s["current"] for s in listed] == [False, True]


def test_verify_detects_changes(settings):
    d = _fake_snapshot(settings.snapshots_dir, "A")
    assert snapshots.verify(settings, "A") == []
    (d / "lancedb" / "f.bin").write_bytes(b"dat4")
    (d / "catalog.duckdb").unlink()
    assert snapshots.verify(settings, "A") == ["missing file catalog.duckdb", "checksum mismatch lancedb/f.bin"]


def test_bad_manifest_is_a_user_error(tmp_path):
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        snapshots.read_manifest(tmp_path)
    with pytest.raises(UserError, match="no manifest"):
        snapshots.read_manifest(tmp_path / "missing")


def test_snapshots_module_is_light():
    """Readers (query, serve, downstream apps) import it without pulling in torch or LanceDB."""
    code = ("import sys, pipeline.snapshots; "
            "print(sorted(m for m in ('torch', 'lancedb', 'duckdb', 'sentence_transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_cisi_snapshot_fixture(cisi_snapshot):
    """The shared fixture: all of CISI's 1,460 abstracts embedded and published, vectors from the model."""
    import lancedb
    import numpy as np

    from pipeline.encoders import get_encoder

    folder = snapshots.resolve(cisi_snapshot)
    m = snapshots.read_manifest(folder)
    assert m["counts"]["papers"] == 1460 and m["counts"]["lancedb.papers"] == 1460
    assert m["counts"]["lancedb.chunks"] == 1460  # one abstract passage each: CISI has no PDFs
    assert snapshots.verify(cisi_snapshot) == []
    papers = lancedb.connect(str(folder / "lancedb")).open_table("papers")
    row = papers.search().where("paper_id = 'cisi:1'").limit(1).to_list()[0]
    q = get_encoder(cisi_snapshot).encode_queries([f"{row['title']}. {row['abstract']}"])[0]
    assert float(np.dot(q, row["abs_vector"])) > 0.99
    hit = papers.search(q, vector_column_name="abs_vector").metric("cosine").limit(1).to_list()[0]
    assert hit["paper_id"] == "cisi:1"
