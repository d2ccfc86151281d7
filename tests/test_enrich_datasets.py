"""paperkb enrich in datasets mode (issue 14): S2 Datasets API -> raw zone -> DuckDB -> works, citations.

The request flow is replayed from the recordings in ../shared/data/s2 (test_get_available_releases,
test_get_release, test_get_dataset_download_links, test_get_dataset_diffs), with the S3 host of the
download links rewritten to the local server. SYNTHETIC: the dataset *files* (S2 serves 1.5 GB each);
here they are small gzipped JSON-lines files in the documented "papers"/"citations" formats, built
from the real S2 records of Paper.json (its ids, titles, counts, references and citing papers), plus
lines that touch no corpus paper. Also synthetic, because only the "papers" dataset was recorded: the
"citations" answers of download links and diffs, made from the recorded "papers" answers with the
dataset name replaced; and, for the diff test, the answers for release 2024-10-08 (the recorded
2025-08-19 answers served under that release id).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from werkzeug import Response

from pipeline.steps.enrich import run_enrich
from pipeline.errors import StepFailed, UserError
from pipeline.warehouse import Warehouse
from s2_replay import S2Replay, fail_first, load_cassette

S3 = "https://ai2-s2ag.s3.amazonaws.com"
API = "https://api.semanticscholar.org"


def gz_lines(rows: list[dict]) -> bytes:
    return gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode("utf-8"))


def paper_line(rec: dict) -> dict:
    """A Graph API record in the "papers" dataset format (lower-case keys, corpusid, url)."""
    ext = dict(rec.get("externalIds") or {})
    return {"corpusid": rec["corpusId"], "externalids": ext,
            "url": f"https://www.semanticscholar.org/paper/{rec['paperId']}", "title": rec.get("title"),
            "authors": rec.get("authors") or [], "venue": rec.get("venue"), "year": rec.get("year"),
            "referencecount": rec.get("referenceCount"), "citationcount": rec.get("citationCount"),
            "influentialcitationcount": rec.get("influentialCitationCount"),
            "publicationtypes": rec.get("publicationTypes"), "publicationdate": rec.get("publicationDate"),
            "isopenaccess": rec.get("isOpenAccess"), "s2fieldsofstudy": rec.get("s2FieldsOfStudy")}


class Datasets:
    """The replayed Datasets API plus the files behind its links."""

    def __init__(self, replay: S2Replay, data_dir: Path):
        self.replay = replay
        self.host = replay.server.url_for("/").rstrip("/")
        self.files: dict[str, bytes] = {}
        self.data = data_dir

        def serve_file(request):
            body = self.files.get(request.path)
            if body is not None:
                return Response(body, status=200, content_type="binary/octet-stream")
            if request.path.startswith(("/staging/", "/updates/", "/deletes/")):
                return Response(gzip.compress(b""), status=200, content_type="binary/octet-stream")
            return None

        replay.fallback = serve_file

    def register(self, name: str, *, rename: tuple[str, str] | None = None, path_alias: tuple[str, str] | None = None) -> dict:
        """Serve a recorded Datasets API answer with the S3 host rewritten; ``rename`` swaps a dataset name
        (synthetic citations answers), ``path_alias`` serves it under another release id."""
        [it] = load_cassette(self.data / name)
        text = it["content"].decode("utf-8").replace(S3, self.host)
        path = urlsplit(it["uri"]).path
        if rename:
            text = text.replace(f"/{rename[0]}/", f"/{rename[1]}/").replace(f'"{rename[0]}"', f'"{rename[1]}"')
            path = path.replace(f"/{rename[0]}", f"/{rename[1]}")
        if path_alias:
            path = path.replace(*path_alias)
        self.replay.add(it["method"], path, it["status"], text.encode("utf-8"))
        return json.loads(text)


@pytest.fixture
def ds(httpserver, shared_data):
    return Datasets(S2Replay(httpserver, shared_data / "s2"), shared_data / "s2")


@pytest.fixture
def paper(shared_data):
    return json.loads((shared_data / "s2/Paper.json").read_bytes())


def _settings(settings, ds, **over):
    return settings.model_copy(update={"s2_api_url": ds.replay.api_url, "s2_mode": "datasets",
                                       "s2_api_key": "test-key", **over})


def seed_corpus(s, paper):
    """One corpus paper, as the harvest leaves it: known by its DOI only."""
    with Warehouse(s) as wh:
        wh.init()
        wh.con.execute("INSERT INTO papers (paper_id, source, external_id, doi) VALUES ('turing1950', 'test', 't1', ?)",
                       [paper["externalIds"]["DOI"]])


def q(s, sql, params=None):
    with Warehouse(s) as wh:
        return wh.con.execute(sql, params or []).fetchall()


def release_files(ds, links: dict, paper: dict, *, noise: int = 5):
    """Fill the first file of each dataset: the corpus paper, its references and citing papers, and
    ``noise`` pairs of papers that cite each other and touch no corpus paper."""
    refs = [r for r in paper["references"] if r.get("corpusId")]
    citing = [c for c in paper["citations"][:50] if c.get("corpusId")]
    others = [{"corpusid": 9_000_000 + i, "externalids": {"DOI": f"10.9/{i}"}, "title": f"other {i}",
               "url": f"https://www.semanticscholar.org/paper/{i:040x}"} for i in range(2 * noise)]
    papers = [paper_line(paper), *(paper_line(r) for r in refs), *(paper_line(c) for c in citing), *others]
    edges = ([{"citationid": 1000 + i, "citingcorpusid": paper["corpusId"], "citedcorpusid": r["corpusId"],
               "isinfluential": i % 2 == 0, "contexts": ["..."], "intents": [["methodology"], ["background", "methodology"]]}
              for i, r in enumerate(refs)]
             + [{"citationid": 2000 + i, "citingcorpusid": c["corpusId"], "citedcorpusid": paper["corpusId"],
                 "isinfluential": False, "contexts": [], "intents": []} for i, c in enumerate(citing)]
             + [{"citationid": 3000 + i, "citingcorpusid": 9_000_000 + 2 * i, "citedcorpusid": 9_000_001 + 2 * i,
                 "isinfluential": False, "intents": None} for i in range(noise)])
    ds.files[urlsplit(links["papers"]["files"][0]).path] = gz_lines(papers)
    ds.files[urlsplit(links["citations"]["files"][0]).path] = gz_lines(edges)
    return refs, citing


def test_first_run_loads_the_release_keeps_only_what_touches_the_corpus_then_reruns_free(settings, ds, paper, monkeypatch):
    s = _settings(settings, ds, s2_datasets_release="2025-08-19")
    releases = ds.register("test_get_available_releases.yaml")
    release = ds.register("test_get_release.yaml")
    links = {"papers": ds.register("test_get_dataset_download_links.yaml")}
    links["citations"] = ds.register("test_get_dataset_download_links.yaml", rename=("papers", "citations"))
    assert "2025-08-19" in releases and {"papers", "citations"} <= {d["name"] for d in release["datasets"]}
    refs, citing = release_files(ds, links, paper)
    seed_corpus(s, paper)

    out = run_enrich(s)
    d = out["datasets"]
    n_files = len(links["papers"]["files"]) + len(links["citations"]["files"])
    assert d["mode"] == "full" and d["release"] == "2025-08-19"
    assert d["calls"] == {"releases": 1, "release": 1, "links": 2, "file": n_files}
    assert out["http_calls"] == 0  # nothing left for the Graph API
    # the API key goes to the Datasets API only, never to the file host
    api_calls = ds.replay.calls(lambda r: r.path.startswith("/datasets/v1"))
    file_calls = ds.replay.calls(lambda r: not r.path.startswith("/datasets/v1"))
    assert len(file_calls) == n_files and all(c.headers.get("X-Api-Key") == "test-key" for c in api_calls)
    assert not any("X-Api-Key" in c.headers for c in file_calls)

    pid = paper["paperId"]
    assert q(s, "SELECT work_id, paper_id, detail, corpus_id, citation_count, reference_count FROM works WHERE paper_id IS NOT NULL") == [
        (pid, "turing1950", "paper", paper["corpusId"], paper["citationCount"], paper["referenceCount"])]
    assert q(s, "SELECT s2_paper_id, citation_count, reference_count FROM papers") == [
        (pid, paper["citationCount"], paper["referenceCount"])]
    expected = {(pid, r["paperId"]) for r in refs} | {(c["paperId"], pid) for c in citing}
    assert set(q(s, "SELECT citing_work_id, cited_work_id FROM citations")) == expected
    assert {r[0] for r in q(s, "SELECT work_id FROM works WHERE detail = 'edge'")} == {r["paperId"] for r in refs} | {
        c["paperId"] for c in citing}
    assert q(s, "SELECT count(*) FROM works WHERE title LIKE 'other %'") == [(0,)]  # lines touching no corpus paper
    first_ref = refs[0]
    assert q(s, "SELECT is_influential, intents FROM citations WHERE cited_work_id = ?", [first_ref["paperId"]]) == [
        (True, ["background", "methodology"])]
    assert q(s, "SELECT name FROM work_authors WHERE work_id = ? ORDER BY position", [pid]) == [
        (a["name"],) for a in paper["authors"]]
    assert q(s, "SELECT value FROM watermarks WHERE source = 's2_datasets'") == [("2025-08-19",)]
    # every file is in the raw zone, byte-exact, before DuckDB read it
    first = urlsplit(links["papers"]["files"][0]).path
    stored = s.raw_dir / "s2/datasets/release/2025-08-19/papers" / first.rsplit("/", 1)[-1]
    assert stored.read_bytes() == ds.files[first]
    meta = sorted(p.name for p in (s.raw_dir / "s2/datasets/meta").rglob("*.json"))
    assert meta == ["release-2025-08-19-citations.json", "release-2025-08-19-papers.json", "release-2025-08-19.json",
                    "release.json"]
    assert json.loads(next((s.raw_dir / "s2/datasets/meta").rglob("release.json")).read_bytes()) == releases

    # rerun on the same release: the release list only, nothing loaded, nothing changed
    before = q(s, "SELECT * FROM citations ORDER BY ALL")
    again = run_enrich(s)
    assert again["datasets"]["mode"] == "none" and again["datasets"]["calls"] == {"releases": 1}
    assert q(s, "SELECT * FROM citations ORDER BY ALL") == before

    # the database lost: the next run loads the release again from the raw zone, no file downloaded
    edges = "SELECT citing_work_id, cited_work_id, is_influential, intents FROM citations ORDER BY ALL"
    kept = q(s, edges)
    s.db_path.unlink()
    seed_corpus(s, paper)
    rebuilt = run_enrich(s)["datasets"]
    assert rebuilt["mode"] == "full" and "file" not in rebuilt["calls"] and rebuilt["files_from_raw"] == n_files
    assert q(s, edges) == kept


def _release(ds, paper):
    ds.register("test_get_available_releases.yaml")
    ds.register("test_get_release.yaml")
    links = {"papers": ds.register("test_get_dataset_download_links.yaml")}
    links["citations"] = ds.register("test_get_dataset_download_links.yaml", rename=("papers", "citations"))
    release_files(ds, links, paper)
    return links


def test_a_busy_file_host_is_asked_again_and_one_that_stays_busy_stops_the_step(settings, ds, paper):
    s = _settings(settings, ds, s2_datasets_release="2025-08-19", retry_max_attempts=3)
    links = _release(ds, paper)
    seed_corpus(s, paper)
    first = urlsplit(links["papers"]["files"][0]).path
    # 503 twice (the shared client's retries, Retry-After honoured), then the file
    ds.replay.interceptors.append(fail_first(2, status=503, retry_after="0", when=lambda r: r.path == first))
    out = run_enrich(s)
    assert out["datasets"]["mode"] == "full"
    assert [c.status for c in ds.replay.calls(lambda r: r.path == first)] == [503, 503, 200]
    assert q(s, "SELECT count(*) FROM works WHERE paper_id = 'turing1950'") == [(1,)]

    # a host that stays busy: the step stops with one line after the attempts, no partial file left behind
    s2 = _settings(settings.model_copy(update={"warehouse": settings.warehouse.parent / "again"}), ds,
                   s2_datasets_release="2025-08-19", retry_max_attempts=3)
    seed_corpus(s2, paper)
    ds.replay.interceptors.append(fail_first(10**6, status=503, retry_after=None, when=lambda r: r.path == first))
    with pytest.raises(StepFailed, match=r"could not be downloaded in 3 attempts .*HTTP 503") as info:
        run_enrich(s2)
    assert "\n" not in str(info.value)
    assert not list(s2.raw_dir.rglob("*.part"))


def test_next_run_applies_the_diffs_since_the_loaded_release(settings, ds, paper, tmp_path):
    ds.register("test_get_available_releases.yaml")
    alias = ("/2025-08-19", "/2024-10-08")  # SYNTHETIC: the recorded 2025-08-19 answers serve release 2024-10-08
    ds.register("test_get_release.yaml", path_alias=alias)
    links = {"papers": ds.register("test_get_dataset_download_links.yaml", path_alias=alias)}
    links["citations"] = ds.register("test_get_dataset_download_links.yaml", rename=("papers", "citations"), path_alias=alias)
    refs, citing = release_files(ds, links, paper)
    s = _settings(settings, ds, s2_datasets_release="2024-10-08")
    seed_corpus(s, paper)
    first = run_enrich(s)
    assert first["datasets"]["release"] == "2024-10-08"
    pid = paper["paperId"]

    diffs = {"papers": ds.register("test_get_dataset_diffs.yaml")}
    diffs["citations"] = ds.register("test_get_dataset_diffs.yaml", rename=("papers", "citations"))
    [diff] = diffs["papers"]["diffs"]
    [cdiff] = diffs["citations"]["diffs"]
    # update files: the corpus paper with a higher citation count, one new edge to a reference's paper
    changed = {**paper, "citationCount": paper["citationCount"] + 7}
    ds.files[urlsplit(diff["update_files"][0]).path] = gz_lines([paper_line(changed)])
    new_cited = citing[0]  # the corpus paper now also cites one of its citing papers (a new edge)
    ds.files[urlsplit(cdiff["update_files"][0]).path] = gz_lines(
        [{"citationid": 5000, "citingcorpusid": paper["corpusId"], "citedcorpusid": new_cited["corpusId"],
          "isinfluential": True, "intents": [["result"]]}])
    # delete files: the first reference edge by citation id, the last citing paper by corpus id
    gone_paper = citing[-1]
    ds.files[urlsplit(cdiff["delete_files"][0]).path] = gz_lines([{"citationid": 1000}])
    ds.files[urlsplit(diff["delete_files"][0]).path] = gz_lines([{"corpusid": gone_paper["corpusId"]}])

    s2 = s.model_copy(update={"s2_datasets_release": "2025-08-19"})
    out = run_enrich(s2)
    d = out["datasets"]
    n_files = sum(len(x["update_files"]) + len(x["delete_files"]) for x in (diff, cdiff))
    # the recorded diff list stops at 2024-10-15 (end_release 2025-08-19): the watermark says how far it got
    reached = diff["to_release"]
    assert d["mode"] == "diffs" and d["loaded_before"] == "2024-10-08" and d["release"] == reached
    assert d["calls"] == {"releases": 1, "diffs": 2, "file": n_files}
    assert q(s, "SELECT citation_count FROM papers") == [(changed["citationCount"],)]
    edges = set(q(s, "SELECT citing_work_id, cited_work_id FROM citations"))
    assert (pid, new_cited["paperId"]) in edges
    assert (pid, refs[0]["paperId"]) not in edges
    assert not any(gone_paper["paperId"] in e for e in edges)
    assert q(s, "SELECT count(*) FROM works WHERE work_id = ?", [gone_paper["paperId"]]) == [(0,)]
    expected = ({(pid, r["paperId"]) for r in refs[1:]} | {(c["paperId"], pid) for c in citing[:-1]}
                | {(pid, new_cited["paperId"])})
    assert edges == expected
    assert q(s, "SELECT value FROM watermarks WHERE source = 's2_datasets'") == [(reached,)]

    # a snapshot's catalog carries the edges (citations), not the ledger of citation ids that only a later diff's
    # deletes need (at arXiv's size one row per loaded edge, which a publish would scan every night)
    from pipeline.steps.catalog import build_catalog

    (tmp_path / "snap").mkdir()
    counts, _, _, _ = build_catalog(s2, tmp_path / "snap")
    assert counts["citations"] == len(expected) and "s2_dataset_citations" not in counts
    assert q(s2, "SELECT count(*) FROM s2_dataset_citations")[0][0] == len(expected)

    # --replay after losing the database: the release and the diff from the raw zone, no request
    seen = len(ds.replay.seen)
    s2.db_path.unlink()
    seed_corpus(s2, paper)
    replayed = run_enrich(s2, replay=True)["datasets"]
    assert len(ds.replay.seen) == seen and replayed["mode"] == "replay" and replayed["release"] == reached
    assert [st["release"] for st in replayed["steps"]] == ["2024-10-08", reached]
    assert set(q(s2, "SELECT citing_work_id, cited_work_id FROM citations")) == expected
    assert q(s2, "SELECT citation_count FROM papers") == [(changed["citationCount"],)]


def test_no_api_key_and_a_bad_release_are_one_line_user_errors(settings, ds, paper, capsys, monkeypatch):
    ds.register("test_get_available_releases.yaml")
    s = _settings(settings, ds, s2_api_key=None)
    seed_corpus(s, paper)
    with pytest.raises(UserError, match="needs an API key: set S2_API_KEY"):
        run_enrich(s)
    bad = _settings(settings, ds, s2_datasets_release="1999-01-01")
    with pytest.raises(UserError, match="no dataset release '1999-01-01'"):
        run_enrich(bad)

    from pipeline.cli import main

    monkeypatch.setenv("PAPERKB_S2_MODE", "datasets")
    monkeypatch.setenv("PAPERKB_S2_API_URL", ds.replay.api_url)
    monkeypatch.setenv("PAPERKB_S2_DATASETS_RELEASE", "1999-01-01")
    monkeypatch.setenv("S2_API_KEY", "test-key")
    capsys.readouterr()
    assert main(["--warehouse", str(s.warehouse), "enrich"]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("paperkb: error: Semantic Scholar has no dataset release '1999-01-01'")
    assert q(s, "SELECT count(*) FROM watermarks WHERE source = 's2_datasets'") == [(0,)]
    assert main(["--warehouse", str(s.warehouse), "enrich", "--mode", "bulk"]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert err == ["paperkb: error: --mode 'bulk' is not one of batch, per-paper, datasets"]


def test_datasets_and_batch_paths_fill_the_same_rows(settings, ds, paper, tmp_path):
    """The same papers through /paper/batch (Paper.json with its lists, cut to the 50 citing papers the
    dataset files hold) and through the dataset files give the same works and edges."""
    from s2_replay import GRAPH_PREFIX

    ds.register("test_get_available_releases.yaml")
    ds.register("test_get_release.yaml")
    links = {"papers": ds.register("test_get_dataset_download_links.yaml")}
    links["citations"] = ds.register("test_get_dataset_download_links.yaml", rename=("papers", "citations"))
    refs, citing = release_files(ds, links, paper, noise=0)
    # batch answer: the real record, its lists cut to the papers the synthetic dataset files hold
    rec = {**paper, "references": refs, "citations": citing}  # 50 listed: under the cap, so not paged
    ds.replay.add("POST", f"{GRAPH_PREFIX}/paper/batch", 200, json.dumps([rec]).encode(),
                  json_body={"ids": [paper["externalIds"]["DOI"]]})

    via_ds = _settings(settings, ds, s2_datasets_release="2025-08-19")
    via_batch = via_ds.model_copy(update={"warehouse": tmp_path / "batch-wh", "s2_mode": "batch"})
    for s in (via_ds, via_batch):
        seed_corpus(s, paper)
        run_enrich(s)
    edges = "SELECT citing_work_id, cited_work_id FROM citations ORDER BY ALL"
    works = "SELECT work_id, paper_id, detail, title, year, citation_count FROM works ORDER BY ALL"
    assert q(via_ds, edges) == q(via_batch, edges) and len(q(via_ds, edges)) == len(refs) + len(citing)
    assert q(via_ds, works) == q(via_batch, works)
    ids = "SELECT s2_paper_id, citation_count, reference_count FROM papers"
    assert q(via_ds, ids) == q(via_batch, ids)


def test_an_unreachable_datasets_api_stops_at_once_with_one_line(settings, paper, capsys, monkeypatch):
    import socket

    from pipeline.cli import main

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = settings.model_copy(update={"s2_mode": "datasets", "s2_api_key": "k"})
    seed_corpus(s, paper)
    monkeypatch.setenv("PAPERKB_S2_API_URL", f"http://127.0.0.1:{port}/graph/v1")
    monkeypatch.setenv("S2_API_KEY", "k")
    assert main(["--warehouse", str(s.warehouse), "enrich", "--mode", "datasets"]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith(
        f"paperkb: error: cannot reach Semantic Scholar Datasets API at http://127.0.0.1:{port} (connection refused)")
    assert "PAPERKB_S2_API_URL" in err[0]
