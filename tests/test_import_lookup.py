"""`paperkb import-pdfs` then asks the arXiv API for the imported arXiv papers (issue 27, item 4): arXiv's
record wins over what the PDF says; without the API the PDF's authors and title stay, with one line.

The PDF here is made by the test (a first page with a title and an author block, named by an arXiv id
whose real API answer is recorded in ../shared/data); the answer is served over HTTP from the recording."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
import pytest

from arxiv_replay import API_FILES, ArxivReplay

ATOM = "{http://www.w3.org/2005/Atom}"
REPO = Path(__file__).resolve().parent.parent


def _pdf(path: Path) -> None:
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 90), "A TITLE PRINTED IN CAPITALS FOR THIS TEST", fontsize=16)
    page.insert_text((72, 130), "Ada Lovelace, Charles Babbage", fontsize=11)
    page.insert_text((72, 150), "University of London", fontsize=11)
    page.insert_text((72, 190), "Abstract", fontsize=12)
    page.insert_text((72, 210), "We study nothing in particular, at length, for the purpose of this test.", fontsize=10)
    doc.save(str(path))
    doc.close()


def _cli(warehouse: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "--warehouse", str(warehouse), *args],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(HF_HUB_OFFLINE="1", PAPERKB_ARXIV_DELAY_S="0", PAPERKB_RETRY_MAX_ATTEMPTS="2", **extra)
    return env


def _authors(warehouse: Path) -> tuple[list[str], str, str]:
    con = duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM paper_authors WHERE paper_id = '1605.08386' ORDER BY position").fetchall()]
        title, source = con.execute("SELECT title, metadata_source FROM papers WHERE paper_id = '1605.08386'").fetchone()
    finally:
        con.close()
    return names, title, source


def test_arxiv_record_replaces_what_the_pdf_says(shared_data, httpserver, tmp_path):
    replay = ArxivReplay(shared_data / "arxiv").install(httpserver)
    folder = tmp_path / "pdfs"
    folder.mkdir()
    _pdf(folder / "1605.08386.pdf")
    entry, = ET.parse(shared_data / "arxiv" / "api" / API_FILES["1605.08386"][0]).getroot().findall(f"{ATOM}entry")
    want = [a.findtext(f"{ATOM}name") for a in entry.findall(f"{ATOM}author")]

    res = _cli(tmp_path / "wh", "import-pdfs", str(folder), env=_env(PAPERKB_ARXIV_API_URL=httpserver.url_for("/api/query")))
    assert res.returncode == 0, res.stderr
    assert "arXiv metadata for 1 of 1 arXiv papers" in res.stdout
    assert replay.api_log and replay.api_log[0].args["id_list"] == "1605.08386"
    names, title, source = _authors(tmp_path / "wh")
    assert names == want and source == "api"
    assert title == " ".join(entry.findtext(f"{ATOM}title").split())


def test_without_the_api_the_pdfs_own_metadata_stays(tmp_path):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    _pdf(folder / "1605.08386.pdf")
    res = _cli(tmp_path / "wh", "import-pdfs", str(folder), env=_env(PAPERKB_ARXIV_API_URL="http://127.0.0.1:9/api/query"))
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("\n") == 1 and "arXiv metadata not fetched for 1 papers" in res.stderr
    assert "PAPERKB_ARXIV_API_URL" in res.stderr and "Traceback" not in res.stderr
    names, title, source = _authors(tmp_path / "wh")
    assert names == ["Ada Lovelace", "Charles Babbage"] and source == "pdf"
    assert title == "A Title Printed in Capitals for This Test"


def test_no_lookup_asks_nothing(tmp_path, httpserver):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    _pdf(folder / "1605.08386.pdf")
    res = _cli(tmp_path / "wh", "import-pdfs", "--no-lookup", str(folder),
               env=_env(PAPERKB_ARXIV_API_URL=httpserver.url_for("/api/query")))
    assert res.returncode == 0 and res.stderr == "" and httpserver.log == []
    assert _authors(tmp_path / "wh")[2] == "pdf"


@pytest.fixture(autouse=True)
def _shared(shared_data):
    return shared_data
