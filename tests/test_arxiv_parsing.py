"""Id normalisation and the OAI-PMH / Atom parsers, checked against the recorded files."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pipeline.sources.arxiv.ids import is_arxiv_id, normalize_arxiv_id, parse_arxiv_id
from pipeline.sources.arxiv.records import (
    ApiErrorFeed,
    MalformedResponse,
    author_key,
    category_matcher,
    read_atom_feed,
    read_oai_page,
    split_author_string,
)

ATOM = "{http://www.w3.org/2005/Atom}"
OAI = "{http://www.openarchives.org/OAI/2.0/}"


@pytest.mark.parametrize("text, pid, version", [
    ("2104.12255", "2104.12255", None),
    ("2104.12255v1", "2104.12255", 1),
    ("arXiv:1412.6980v9", "1412.6980", 9),
    ("http://arxiv.org/abs/1707.08567v1", "1707.08567", 1),
    ("https://arxiv.org/pdf/2010.11929v2.pdf", "2010.11929", 2),
    ("oai:arXiv.org:0704.0471", "0704.0471", None),
    ("astro-ph/0601001", "astro-ph/0601001", None),
    ("http://arxiv.org/abs/cond-mat/0603029v1", "cond-mat/0603029", 1),
    ("math.GT/0309136v2", "math/0309136", 2),
    ("  hep-th/9901001 ", "hep-th/9901001", None),
])
def test_ids_normalise_new_and_old_style_with_version_apart(text, pid, version):
    assert parse_arxiv_id(text) == (pid, version)
    assert normalize_arxiv_id(text) == pid


@pytest.mark.parametrize("text", ["abc", "", "12345.678", "astro-ph/06010", "2104.12255vX", "ASTRO-PH/0601001"])
def test_non_ids_are_refused(text):
    assert not is_arxiv_id(text)
    with pytest.raises(ValueError):
        parse_arxiv_id(text)


def test_every_recorded_entry_id_normalises(shared_data):
    for f in sorted((shared_data / "arxiv" / "api").glob("*.xml")):
        for e in ET.parse(f).getroot().findall(f"{ATOM}entry"):
            raw = e.findtext(f"{ATOM}id")
            if "/api/errors" in raw:
                continue
            pid, version = parse_arxiv_id(raw)
            assert raw.endswith(f"{pid}v{version}")


def test_oai_list_page_matches_the_recorded_xml(shared_data):
    path = shared_data / "arxiv" / "oai" / "saelim2015_ListRecordsResponse.xml"
    root = ET.parse(path).getroot()
    page = read_oai_page(path)
    token = root.find(f".//{OAI}resumptionToken")
    assert page.resumption_token == token.text and page.complete_list_size == int(token.get("completeListSize"))
    assert page.response_date == root.findtext(f"{OAI}responseDate")
    assert [r["paper_id"] for r in page.records] == [
        h.findtext(f"{OAI}identifier").removeprefix("oai:arXiv.org:") for h in root.iter(f"{OAI}header")]
    first = page.records[0]
    assert first["authors"][0]["name"] == "D.V. Shetty" and len(first["authors"]) == 3  # "..., and G.A. Souliotis"
    assert first["dois"] == ["10.1103/PhysRevC.76.024606", "10.1103/PhysRevC.76.039902"]
    assert first["primary_category"] == "nucl-ex" and first["categories"] == ["nucl-ex", "nucl-th"]
    assert first["abstract"].startswith("The density dependence") and "\n" not in first["abstract"]


def test_oai_error_pages_give_their_code(shared_data):
    for name, code in [("BadArgument", "badArgument"), ("BadResumptionToken", "badResumptionToken"),
                       ("IdDoesNotExist", "idDoesNotExist"), ("NoRecordsMatch", "noRecordsMatch")]:
        page = read_oai_page(shared_data / "arxiv" / "oai" / f"saelim2015_ErrorResponse{name}.xml")
        assert page.error_code == code and page.records == [] and page.error_message


def test_oai_getrecord_both_formats(shared_data):
    raw = read_oai_page(shared_data / "arxiv" / "oai" / "saelim2015_GetRecordResponse.xml")
    rec, = raw.records
    assert rec["paper_id"] == "1302.2146" and [v["version"] for v in rec["versions"]] == [1, 2]
    assert rec["versions"][1]["source_type"] == "D" and rec["latest_version"] == 2
    arx = read_oai_page(shared_data / "arxiv" / "oai" / "hepcrawl2018_GetRecord_arXiv_1401.2122.xml")
    rec, = arx.records
    assert (rec["paper_id"], str(rec["published"]), str(rec["updated"])) == ("1401.2122", "2014-01-09", "2017-10-23")
    assert rec["authors"] == [{"name": "A. Sergyeyev", "keyname": "Sergyeyev", "forenames": "A.", "affiliation": None}]


def test_truncated_and_non_oai_bodies_are_malformed(shared_data):
    body = (shared_data / "arxiv" / "oai" / "saelim2015_ListRecordsResponse.xml").read_bytes()
    for bad in (body[:5000], b"", b"<html><body>Service unavailable</body></html>"):
        with pytest.raises(MalformedResponse):
            read_oai_page(bad)


@pytest.mark.parametrize("name", [
    "arxivpy2016_id_list_1111.2011v2.xml", "arxivpy2016_search_au_del_maestro.xml",
    "arxivpy2016_search_au_del_maestro_AND_ti_checkerboard.xml", "arxivpy2026_id_list_1605.08386.xml",
    "arxivpy2026_search_all_testing_start0_max10.xml", "arxivpy2026_search_all_testing_start10_max10.xml",
])
def test_atom_feeds_old_and_new_layout_match_the_recorded_xml(shared_data, name):
    body = (shared_data / "arxiv" / "api" / name).read_bytes()
    entries = ET.fromstring(body).findall(f"{ATOM}entry")
    feed = read_atom_feed(body)
    assert len(feed.records) == len(entries) and feed.rejects == []
    for rec, e in zip(feed.records, entries):
        assert rec["title"] == " ".join(e.findtext(f"{ATOM}title").split())
        assert [a["name"] for a in rec["authors"]] == [a.findtext(f"{ATOM}name") for a in e.findall(f"{ATOM}author")]
        assert rec["published"].isoformat() == e.findtext(f"{ATOM}published")[:10]
        assert set(rec["categories"]) == {c.get("term") for c in e.findall(f"{ATOM}category")}


def test_atom_non_ascii_names_decode_once(shared_data):
    body = (shared_data / "arxiv" / "api" / "arxivpy2026_search_all_testing_start0_max10.xml").read_bytes()
    names = [a["name"] for r in read_atom_feed(body).records for a in r["authors"]]
    assert "Aurora Ramírez" in names and "José Raúl Romero" in names
    assert author_key("José Raúl Romero") == "jose-raul-romero"


def test_atom_error_feed_raises_with_message(shared_data):
    body = (shared_data / "arxiv" / "api" / "arxivpy2026_id_list_abc_error400.xml").read_bytes()
    with pytest.raises(ApiErrorFeed, match="incorrect id format for abc"):
        read_atom_feed(body)


def test_author_string_splitting():
    assert split_author_string("D.V. Shetty, S.J. Yennello, and G.A. Souliotis") == [
        ("D.V. Shetty", None), ("S.J. Yennello", None), ("G.A. Souliotis", None)]
    assert split_author_string("A. One (MIT), B. Two and C. Three (CMU)") == [
        ("A. One", "MIT"), ("B. Two", None), ("C. Three", "CMU")]
    assert split_author_string(r"J\"urgen Schmidhuber, F. Gomez et al") == [
        ("Jürgen Schmidhuber", None), ("F. Gomez", None)]
    assert [n for n, _ in split_author_string("A. One, B. Two ((1) MIT, (2) CMU)")] == ["A. One", "B. Two"]


def test_category_matcher():
    assert category_matcher(["*"])(["math.AG"])
    keep = category_matcher(["cs.AI", "stat"])
    assert keep(["cs.LG", "cs.AI"]) and keep(["stat.ML"]) and not keep(["cs.LG"]) and not keep(["statistics"])
    assert category_matcher(["cs.*"])(["cs.CL"]) and not category_matcher(["cs.*"])(["physics.comp-ph"])
