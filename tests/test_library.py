"""`paperkb import-pdfs DIR` (bring your own library) on the 10 real arXiv PDFs, then the fulltext step
on what it imported, with no network."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
from fulltext_sources import read_pdf_table

from pipeline.cli import main
from pipeline.library.pdf_folder import arxiv_id_from_name, arxiv_stamp, import_pdfs

NO_NETWORK = "http://127.0.0.1:9/no-network"  # the discard port: any download attempt fails


def _facts(shared_data: Path):
    return {f.paper_id: f for f in read_pdf_table(shared_data / "arxiv" / "SOURCES.md")}


def _library(shared_data: Path, folder: Path) -> Path:
    """A user's folder: links to the real PDFs, a file that only claims to be a PDF, an empty one,
    and a non-PDF file that is ignored."""
    folder.mkdir(parents=True, exist_ok=True)
    for pdf in sorted((shared_data / "arxiv" / "pdf").glob("*.pdf")):
        (folder / pdf.name).symlink_to(pdf)
    (folder / "notes.pdf").write_bytes(b"<html><body>my reading notes</body></html>")
    (folder / "sub").mkdir()
    (folder / "sub" / "empty.pdf").write_bytes(b"")
    (folder / "README.txt").write_text("not a PDF, not looked at")
    return folder


def _con(settings):
    return duckdb.connect(str(settings.db_path), read_only=True)


def _title_words(title: str) -> list[str]:
    """Words of 4+ letters of a SOURCES.md title, leaving out its parenthesised note ('(ViT)')."""
    title = re.sub(r"\([^)]*\)", "", title).replace("…", "")
    return [w.lower() for w in re.findall(r"[A-Za-z]{4,}", title)]


# -- pure ------------------------------------------------------------------------------------------
def test_stamp_and_file_name_ids():
    assert arxiv_stamp("text\narXiv:1706.03762v5  [cs.CL]  6 Dec 2017\nmore")[:3] == ("1706.03762", 5, "cs.CL")
    assert arxiv_stamp("arXiv:1706.03762v5  [cs.CL]  6 Dec 2017")[3].isoformat() == "2017-12-06"
    assert arxiv_stamp("arXiv:astro-ph/0601001v1  2 Jan 2006")[:3] == ("astro-ph/0601001", 1, None)
    assert arxiv_stamp("as shown in arXiv:1409.0473, attention helps") is None  # a citation, not the stamp
    assert arxiv_id_from_name("1706.03762.pdf") == ("1706.03762", None)
    assert arxiv_id_from_name("arXiv-1810.04805v2.PDF") == ("1810.04805", 2)
    assert arxiv_id_from_name("astro-ph_0601001.pdf") == ("astro-ph/0601001", None)
    assert arxiv_id_from_name("attention is all you need.pdf") is None


# -- the real PDFs -----------------------------------------------------------------------------------
def test_import_real_pdfs_then_fulltext_without_network(settings, shared_data, tmp_path):
    facts = _facts(shared_data)
    assert len(facts) == 10
    folder = _library(shared_data, tmp_path / "library")
    settings = settings.model_copy(update={"arxiv_pdf_url": NO_NETWORK})

    s = import_pdfs(settings, folder, follow_links=True)  # (links to the real PDFs, outside the folder)
    assert (s["files"], s["papers"], s["arxiv"], s["local"], s["rejected"], s["ignored"]) == (12, 10, 10, 0, 2, 1)
    assert s["upserts"]["papers"]["inserted"] == 10 and s["pdfs_stored"] == 10
    with _con(settings) as con:
        rows = {r[0]: r[1:] for r in con.execute(
            "SELECT paper_id, source, external_id, title, abstract, year, primary_category, categories, latest_version, "
            "metadata_source FROM papers").fetchall()}
        rejects = con.execute("SELECT step, record_key, reason FROM rejects ORDER BY record_key").fetchall()
        runs = con.execute("SELECT step, status, counts FROM run_log").fetchall()
    assert sorted(rows) == sorted(facts)
    for pid, (source, ext, title, abstract, year, cat, cats, version, meta) in rows.items():
        f = facts[pid]
        stamp_id, stamp_cat = f.stamp.split()
        assert (source, ext, meta) == ("arxiv", pid, "pdf")
        assert title and all(w in title.lower() for w in _title_words(f.title)), (pid, title, f.title)
        assert (cat, cats, version) == (stamp_cat, [stamp_cat], int(stamp_id.split("v")[1]))
        assert year == 2000 + int(pid[:2])  # the month the first version was submitted
        assert abstract and 300 < len(abstract) < 2000, (pid, abstract)
    assert rows["1512.03385"][3].startswith("Deeper neural networks are more difficult to train")
    assert [(r[1].split("/")[-1], r[2]) for r in rejects] == [("notes.pdf", "not_pdf"), ("empty.pdf", "empty")]
    assert {r[0] for r in rejects} == {"import-pdfs"}
    assert runs[0][:2] == ("import-pdfs", "ok") and json.loads(runs[0][2]) == \
        {"in": 12, "out": 10, "rejected": 2, "pdfs_stored": 10}

    # the bytes are in the raw zone as a download would be, with their file:// origin
    from pipeline.raw import RawZone

    entries = {e.params["paper_id"]: e for e in RawZone(settings.raw_dir).entries("pdf")}
    assert sorted(entries) == sorted(facts)
    e = entries["1706.03762"]
    assert e.path == "pdf/1706.03762.pdf" and e.url == (shared_data / "arxiv/pdf/1706.03762.pdf").resolve().as_uri()
    assert e.bytes == (shared_data / "arxiv/pdf/1706.03762.pdf").stat().st_size

    # a rerun writes nothing: no rows, no raw-zone copies, no second reject rows
    again = import_pdfs(settings, folder, follow_links=True)
    assert again["upserts"]["papers"] == {"inserted": 0, "updated": 0, "unchanged": 10}
    assert again["pdfs_stored"] == 0 and again["rejected"] == 2 and again.get("rejects_recorded", 0) == 0
    with _con(settings) as con:
        assert con.execute("SELECT count(*) FROM rejects").fetchone()[0] == 2
    assert len(list((settings.raw_dir / "pdf").glob("*.pdf"))) == 10

    # the fulltext step finds them pending and extracts them from the raw zone (a download would fail)
    from pipeline.steps.fulltext import run_fulltext

    ft = run_fulltext(settings)
    assert (ft["papers"], ft["extracted"], ft["from_raw"], ft.get("downloaded", 0), ft["rejected"]) == (10, 10, 10, 0, 0)
    with _con(settings) as con:
        chunks = dict(con.execute("SELECT paper_id, count(*) FROM chunks GROUP BY ALL").fetchall())
        figures = dict(con.execute("SELECT paper_id, count(*) FROM figures GROUP BY ALL").fetchall())
        pages = con.execute("SELECT count(*) FROM chunks WHERE page_start IS NULL").fetchone()[0]
        passages = con.execute("SELECT count(*) FROM passages WHERE kind = 'abstract'").fetchone()[0]
    assert set(chunks) == set(facts) and all(n > 0 for n in chunks.values()), chunks
    assert figures == {pid: f.figures for pid, f in facts.items()}
    assert pages == 0 and passages == 10


def test_local_ids_stamp_over_file_name_duplicates_and_kept_metadata(settings, shared_data, tmp_path):
    import pymupdf

    folder = tmp_path / "library"
    folder.mkdir()
    pdf = shared_data / "arxiv" / "pdf"
    (folder / "attention.pdf").symlink_to(pdf / "1706.03762.pdf")  # id from the stamp, not the name
    (folder / "1706.03762v5.pdf").symlink_to(pdf / "1706.03762.pdf")  # the same paper again
    (folder / "resnet.pdf").symlink_to(pdf / "1512.03385.pdf")
    doc = pymupdf.open()  # a PDF of my own: no arXiv id anywhere
    page = doc.new_page()
    page.insert_text((72, 90), "Notes on Reading Groups", fontsize=20)
    page.insert_text((72, 130), "We met every week and read one paper about attention.", fontsize=10)
    mine = doc.tobytes()
    (folder / "my-notes.pdf").write_bytes(mine)

    # a paper the harvest already loaded keeps its arXiv metadata; its PDF is still stored
    from pipeline.warehouse import Warehouse
    import pyarrow as pa

    with Warehouse(settings) as wh:
        wh.init()
        wh.upsert("papers", pa.table({"paper_id": ["1512.03385"], "source": ["arxiv"], "external_id": ["1512.03385"],
                                      "title": ["Deep Residual Learning for Image Recognition"],
                                      "metadata_source": ["oai:arXivRaw"]}), keys=["paper_id"])

    s = import_pdfs(settings, folder, follow_links=True)  # (links to the real PDFs, outside the folder)
    import hashlib

    local_id = "local:" + hashlib.sha256(mine).hexdigest()[:16]
    assert sorted(s["paper_ids"]) == sorted(["1706.03762", "1512.03385", local_id])
    assert (s["arxiv"], s["local"], s["rejected"], s["kept_metadata"], s["pdfs_stored"]) == (2, 1, 1, 1, 3)
    with _con(settings) as con:
        rows = {r[0]: r[1:] for r in con.execute("SELECT paper_id, source, external_id, title, metadata_source FROM papers").fetchall()}
        reject = con.execute("SELECT record_key, reason, detail FROM rejects").fetchall()
    assert rows[local_id] == ("local", local_id.split(":")[1], "Notes on Reading Groups", "pdf")
    assert rows["1512.03385"][3] == "oai:arXivRaw"
    assert rows["1706.03762"][2] == "Attention Is All You Need"
    assert len(reject) == 1 and reject[0][1] == "duplicate_paper" and "1706.03762" in reject[0][2]

    from pipeline.steps.fulltext import plan_batches

    assert sorted(p for b in plan_batches(settings) for p in b) == sorted(rows)  # local papers are extracted too


def test_new_bytes_for_an_extracted_paper_are_extracted_again(settings, shared_data, tmp_path):
    """BERT as uploaded (38 highlights, an incremental update) and then the pristine arXiv prefix."""
    from pipeline.steps.fulltext import run_fulltext

    settings = settings.model_copy(update={"arxiv_pdf_url": NO_NETWORK})
    data = (shared_data / "arxiv/pdf/1810.04805.pdf").read_bytes()
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    (first / "bert.pdf").write_bytes(data)
    (second / "bert.pdf").write_bytes(data[:775166])  # SOURCES.md: the original file ends at the first %%EOF
    assert import_pdfs(settings, first)["pdfs_stored"] == 1
    assert run_fulltext(settings)["extracted"] == 1
    assert run_fulltext(settings)["papers"] == 0  # nothing pending
    s = import_pdfs(settings, second)
    assert (s["pdfs_stored"], s["refetch"], s["upserts"]["papers"]["inserted"]) == (1, 1, 0)
    ft = run_fulltext(settings)
    assert (ft["papers"], ft["extracted"], ft["from_raw"]) == (1, 1, 1)


# -- the command -------------------------------------------------------------------------------------
def test_cli_import_pdfs_and_user_errors(shared_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # the summary whole on one line (80 columns wraps it)
    wh = str(tmp_path / "wh")
    assert main(["--warehouse", wh, "import-pdfs", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "no such folder" in err and err.count("\n") == 1
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.txt").write_text("x")
    assert main(["--warehouse", wh, "import-pdfs", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "no .pdf files" in err and err.count("\n") == 1

    assert main(["--warehouse", wh, "import-pdfs", str(shared_data / "arxiv/pdf/1409.0473.pdf")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("import-pdfs: 1 PDF files in, 1 papers (1 arXiv, 0 local; 1 new")
    assert "0 rejected" in out[0]

    assert main(["import-pdfs", "--help"]) == 0
    assert "Bring your own library" in capsys.readouterr().out
