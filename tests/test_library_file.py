"""`paperkb import-pdfs library.bib|library.json`: a reference-manager library whose entries point at the
real arXiv PDFs in ../shared/data (linked from tmp_path, never copied into the repo); the entry's
metadata wins over the PDF's, entries without a usable PDF are listed, a rerun changes nothing, and the
fulltext step extracts what was imported, with no network."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
from fulltext_sources import read_pdf_table

from pipeline.cli import main
from pipeline.library.pdf_folder import PdfPaper, import_pdfs
from pipeline.library.manager_pdfs import apply_entry, display_name
from pipeline.library.match import LibraryEntry, file_field_paths, read_library

NO_NETWORK = "http://127.0.0.1:9/no-network"  # the discard port: any download attempt fails
TABLES = ("papers", "authors", "paper_authors", "rejects", "fulltext_docs")


def _link(target: Path, link: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def _bibtex_library(shared_data: Path, root: Path) -> Path:
    """A Zotero/JabRef/Better BibTeX style export: relative and absolute `file` fields, an HTML snapshot
    beside a PDF, one entry whose PDF is gone and one without any file."""
    pdf = shared_data / "arxiv" / "pdf"
    export = root / "export"
    _link(pdf / "1409.0473.pdf", export / "files" / "1" / "Bahdanau et al. - 2015 - Neural machine translation.pdf")
    (export / "files" / "1" / "snapshot.html").write_text("<html></html>")
    adam = _link(pdf / "1412.6980.pdf", root / "elsewhere" / "kingma_adam~v9.pdf")
    _link(pdf / "1508.04025.pdf", export / "files" / "3" / "luong.pdf")
    bib = export / "library.bib"
    bib.write_text(f"""
@inproceedings{{bahdanau2015,
  title = {{Neural Machine Translation by Jointly Learning to Align and Translate}},
  author = {{Bahdanau, Dzmitry and Cho, Kyunghyun and Bengio, Yoshua}},
  year = {{2015}},
  eprint = {{1409.0473}}, archivePrefix = {{arXiv}},
  file = {{Full Text PDF:files/1/Bahdanau et al. - 2015 - Neural machine translation.pdf:application/pdf;Snapshot:files/1/snapshot.html:text/html}}
}}
@inproceedings{{kingma2015adam,
  title = {{{{Adam}}: A Method for Stochastic Optimization}},
  author = {{Kingma, Diederik P. and Ba, Jimmy}},
  year = {{2015}},
  file = {{:{adam}:PDF}}
}}
@inproceedings{{luong2015,
  title = {{Effective Approaches to Attention-based Neural Machine Translation}},
  author = {{Luong, Minh-Thang and Pham, Hieu and Manning, Christopher D.}},
  year = {{2015}}, doi = {{10.18653/v1/D15-1166}},
  file = {{files/3/luong.pdf}}
}}
@inproceedings{{vaswani2017,
  title = {{Attention Is All You Need}},
  author = {{Vaswani, Ashish}}, year = {{2017}},
  file = {{Full Text PDF:files/9/vaswani.pdf:application/pdf}}
}}
@book{{knuth1997,
  title = {{The Art of Computer Programming, Volume 1}},
  author = {{Knuth, Donald E.}}, year = {{1997}}
}}
""")
    return bib


def _csl_library(shared_data: Path, root: Path) -> Path:
    """CSL-JSON items: a `file` path relative to the file, a `file://` URL (percent-encoded) that is gone,
    and an item with only a web URL."""
    folder = root / "csl"
    _link(shared_data / "arxiv" / "pdf" / "1505.04597.pdf", folder / "My Papers" / "unet.pdf")
    items = [
        {"id": "ronneberger2015", "type": "paper-conference",
         "title": "U-Net: Convolutional Networks for Biomedical Image Segmentation",
         "author": [{"family": "Ronneberger", "given": "Olaf"}, {"family": "Fischer", "given": "Philipp"},
                    {"family": "Brox", "given": "Thomas"}],
         "issued": {"date-parts": [[2015, 10]]}, "DOI": "10.1007/978-3-319-24574-4_28",
         "URL": "https://arxiv.org/abs/1505.04597", "file": "My Papers/unet.pdf"},
        {"id": "he2016", "type": "paper-conference", "title": "Deep Residual Learning for Image Recognition",
         "issued": {"date-parts": [[2016]]}, "URL": (folder / "My Papers" / "he 2016.pdf").as_uri()},
        {"id": "web-only", "type": "webpage", "title": "A Blog Post About Attention",
         "URL": "https://example.org/attention"},
    ]
    path = folder / "library.json"
    path.write_text(json.dumps(items, indent=1))
    return path


def _dump(settings) -> dict:
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        out = {}
        for t in TABLES:
            cols = [c for c, in con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ?",
                                            [t]).fetchall() if c not in ("run_id", "created_at", "updated_at", "loaded_at")]
            out[t] = sorted(map(repr, con.execute(f"SELECT {', '.join(cols)} FROM {t}").fetchall()))
    return out


# -- pure ------------------------------------------------------------------------------------------
def test_file_fields_as_reference_managers_write_them(tmp_path):
    assert file_field_paths("Full Text PDF:/home/me/Zotero/storage/AB12/x.pdf:application/pdf") == \
        ["/home/me/Zotero/storage/AB12/x.pdf"]
    assert file_field_paths("Full Text:files/12/x y.pdf:application/pdf;Snapshot:files/12/s.html:text/html;"
                            ":files/13/z.PDF:PDF") == ["files/12/x y.pdf", "files/13/z.PDF"]
    assert file_field_paths(r":C\:\\Users\\me\\a\;b.pdf:PDF") == [r"C:\Users\me\a;b.pdf"]  # JabRef escapes
    assert file_field_paths("/abs/x.pdf") == ["/abs/x.pdf"]
    assert file_field_paths("file:///abs/x.pdf") == ["file:///abs/x.pdf"]
    assert file_field_paths("Snapshot:files/3/page.html:text/html") == []
    assert file_field_paths(None) == []

    ris = tmp_path / "lib" / "export.ris"
    ris.parent.mkdir()
    ris.write_text("TY  - JOUR\nTI  - Deep Residual Learning for Image Recognition\nL1  - files/4/he.pdf\n"
                   "L1  - file:///abs/with%20space.pdf\nUR  - https://arxiv.org/abs/1512.03385\nER  - \n")
    fmt, entries, _ = read_library(ris)
    assert fmt == "ris" and entries[0].files == [str(tmp_path / "lib/files/4/he.pdf"), "/abs/with space.pdf"]
    assert entries[0].arxiv_id == "1512.03385"


def test_the_entry_wins_over_the_pdf():
    pdf = PdfPaper(paper_id="local:0123456789abcdef", source="local", external_id="0123456789abcdef",
                   title="DRAFT - do not distribute", authors=["Someone"], year=2019, abstract="We study x.")
    e = LibraryEntry(index=1, key="k", title="Adam: A Method for Stochastic Optimization", arxiv_id="1412.6980",
                     authors=["Kingma, Diederik P.", "Jimmy Ba"], doi="10.48550/arxiv.1412.6980")
    got = apply_entry(pdf, e)
    assert (got.paper_id, got.source, got.external_id, got.id_from) == ("1412.6980", "arxiv", "1412.6980", "library")
    assert (got.title, got.authors, got.year, got.doi) == (e.title, ["Diederik P. Kingma", "Jimmy Ba"], 2014, e.doi)
    assert got.abstract == "We study x." and got.metadata_source == "library"
    assert apply_entry(pdf, LibraryEntry(index=2, key=None)) is pdf  # nothing in the entry: the PDF's own
    assert display_name("Knuth, Jr., Donald E.") == "Donald E. Knuth Jr." and display_name("Yoshua  Bengio") == "Yoshua Bengio"


# -- the real PDFs -----------------------------------------------------------------------------------
def test_import_a_bibtex_and_a_csl_json_library_then_fulltext(settings, shared_data, tmp_path):
    settings = settings.model_copy(update={"arxiv_pdf_url": NO_NETWORK})
    facts = {f.paper_id: f for f in read_pdf_table(shared_data / "arxiv" / "SOURCES.md")}
    bib = _bibtex_library(shared_data, tmp_path)

    s = import_pdfs(settings, bib)
    assert (s["format"], s["entries"], s["files"], s["papers"], s["rejected"]) == ("bibtex", 5, 3, 3, 2)
    assert s["upserts"]["papers"]["inserted"] == 3 and s["pdfs_stored"] == 3
    assert [(i["key"], i["paper_id"]) for i in s["imported"]] == \
        [("bahdanau2015", "1409.0473"), ("kingma2015adam", "1412.6980"), ("luong2015", "1508.04025")]
    left = {n["key"]: (n["reason"], n["detail"]) for n in s["not_imported"]}
    assert sorted(left) == ["knuth1997", "vaswani2017"]
    assert left["vaswani2017"] == ("missing_file", f"no such file: {bib.parent / 'files/9/vaswani.pdf'}")
    assert left["knuth1997"][0] == "no_pdf"

    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        rows = {r[0]: r[1:] for r in con.execute(
            "SELECT paper_id, title, year, doi, latest_version, primary_category, metadata_source, abstract FROM papers").fetchall()}
        authors = {}
        for pid, name in con.execute("SELECT paper_id, name FROM paper_authors ORDER BY paper_id, position").fetchall():
            authors.setdefault(pid, []).append(name)
        rejects = sorted(con.execute("SELECT step, record_key, reason FROM rejects").fetchall())
    # the library's title (not the PDF's capitals), year (the conference, not the arXiv id's) and authors
    assert rows["1409.0473"][:6] == ("Neural Machine Translation by Jointly Learning to Align and Translate", 2015,
                                     None, 7, "cs.CL", "library")
    assert authors["1409.0473"] == ["Dzmitry Bahdanau", "Kyunghyun Cho", "Yoshua Bengio"]
    assert authors["1412.6980"] == ["Diederik P. Kingma", "Jimmy Ba"]  # the PDF's metadata says 'Jimmy Lei Ba'
    assert rows["1412.6980"][:2] == ("Adam: A Method for Stochastic Optimization", 2015)
    assert rows["1508.04025"][2] == "10.18653/v1/d15-1166"
    assert all(r[6] and 300 < len(r[6]) < 2000 for r in rows.values())  # the abstract is still the PDF's
    assert rejects == [("import-pdfs", f"{bib}#4", "missing_file"), ("import-pdfs", f"{bib}#5", "no_pdf")]

    # a rerun changes no row; a folder import of the same PDFs keeps the library's metadata
    before = _dump(settings)
    again = import_pdfs(settings, bib)
    assert again["upserts"]["papers"] == {"inserted": 0, "updated": 0, "unchanged": 3}
    assert again["upserts"]["paper_authors"]["inserted"] == again["upserts"]["paper_authors"]["updated"] == 0
    assert again["pdfs_stored"] == 0 and again.get("rejects_recorded", 0) == 0 and again["rejected"] == 2
    assert _dump(settings) == before
    folder = import_pdfs(settings, bib.parent / "files", follow_links=True)  # (links to the real PDFs)
    assert (folder["papers"], folder["kept_metadata"], folder["pdfs_stored"]) == (2, 2, 0)
    assert _dump(settings) == before

    csl = _csl_library(shared_data, tmp_path)
    c = import_pdfs(settings, csl)
    assert (c["format"], c["entries"], c["papers"], c["rejected"]) == ("csl-json", 3, 1, 2)
    assert {n["key"]: n["reason"] for n in c["not_imported"]} == {"he2016": "missing_file", "web-only": "no_pdf"}
    assert "he 2016.pdf" in c["not_imported"][0]["detail"]  # the file:// URL decoded
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        unet = con.execute("SELECT title, year, doi, metadata_source FROM papers WHERE paper_id = '1505.04597'").fetchone()
    assert unet == ("U-Net: Convolutional Networks for Biomedical Image Segmentation", 2015,
                    "10.1007/978-3-319-24574-4_28", "library")

    # the fulltext step extracts the imported PDFs from the raw zone, as after a folder import
    from pipeline.steps.fulltext import run_fulltext

    ft = run_fulltext(settings)
    assert (ft["papers"], ft["extracted"], ft["from_raw"], ft.get("downloaded", 0), ft["rejected"]) == (4, 4, 4, 0, 0)
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        chunks = dict(con.execute("SELECT paper_id, count(*) FROM chunks GROUP BY ALL").fetchall())
        figures = dict(con.execute("SELECT paper_id, count(*) FROM figures GROUP BY ALL").fetchall())
    assert sorted(chunks) == ["1409.0473", "1412.6980", "1505.04597", "1508.04025"] and all(chunks.values())
    assert figures == {pid: facts[pid].figures for pid in chunks}


def test_cli_lists_the_entries_not_imported(shared_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # each line whole (80 columns wraps them)
    wh = str(tmp_path / "wh")
    bib = _bibtex_library(shared_data, tmp_path)
    assert main(["--warehouse", wh, "import-pdfs", str(bib)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("import-pdfs library.bib (bibtex, 5 entries, 1 without a PDF, 1 with a missing file): "
                             "3 PDF files in, 3 papers (3 arXiv, 0 local; 3 new")
    assert "2 rejected [" in out[0]
    assert len(out) == 3 and "#4" in out[1] and "vaswani2017: missing_file: no such file:" in out[1]
    assert "#5" in out[2] and "knuth1997: no_pdf" in out[2] and "[The Art of Computer Programming, Volume 1]" in out[2]

    (tmp_path / "empty.bib").write_text("% nothing here\n")
    assert main(["--warehouse", wh, "import-pdfs", str(tmp_path / "empty.bib")]) == 2
    err = capsys.readouterr().err
    assert "no entries" in err and err.count("\n") == 1
    (tmp_path / "notes.txt").write_text("x")
    assert main(["--warehouse", wh, "import-pdfs", str(tmp_path / "notes.txt")]) == 2
    assert "not a folder, a .pdf file or a library" in capsys.readouterr().err
