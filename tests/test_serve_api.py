"""HTTP API over a snapshot built from CISI: answers, 4xx on bad input, never a 5xx, live switch."""

from __future__ import annotations

import re
import shutil
import threading

import pytest

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from pipeline.serve import create_app  # noqa: E402


@pytest.fixture(scope="module")
def client(cisi_snapshot):
    with TestClient(create_app(cisi_snapshot)) as c:
        yield c


def test_health_and_snapshots(client, cisi_snapshot):
    h = client.get("/api/health").json()
    assert h["status"] == "ok"
    current = (cisi_snapshot.snapshots_dir / "CURRENT").read_text().strip()
    assert h["snapshot_id"] == current
    s = client.get("/api/snapshots").json()
    assert s["current"] == current and len(s["snapshots"]) >= 1


def test_search_returns_signals_and_queries(client):
    r = client.get("/api/search", params={"q": "automatic indexing and classification of documents", "k": 5})
    assert r.status_code == 200, r.text
    data = r.json()
    assert 1 <= len(data["results"]) <= 5
    assert data["queries"][0] == "automatic indexing and classification of documents"
    first = data["results"][0]
    for key in ("ck", "doc", "abs", "fig", "pr"):
        assert key in first["signals"]
    assert first["paper_id"].startswith("cisi:") and first["title"]
    scores = [x["score"] for x in data["results"]]
    assert scores == sorted(scores, reverse=True)


def test_paper_and_related(client):
    hit = client.get("/api/search", params={"q": "citation analysis", "k": 1}).json()["results"][0]
    p = client.get(f"/api/papers/{hit['paper_id']}")
    assert p.status_code == 200 and p.json()["paper_id"] == hit["paper_id"]
    rel = client.get(f"/api/papers/{hit['paper_id']}/related", params={"k": 5})
    assert rel.status_code == 200, rel.text
    body = rel.json()
    assert body["paper"]["paper_id"] == hit["paper_id"]
    assert all(e["source"] for e in body["edges"])


@pytest.mark.parametrize(
    "params, status",
    [
        ({"q": ""}, 422),
        ({"q": "   "}, 422),
        ({"q": "x" * 1001}, 422),
        ({"q": "library", "k": 0}, 422),
        ({"q": "library", "k": 100000}, 422),
        ({"q": "library", "year_from": "abc"}, 422),
        ({"q": "library", "year_from": 2000, "year_to": 1990}, 400),
        ({"q": "library", "fusion": "magic"}, 422),
        ({"q": "library", "category": "cs.AI' OR 1=1 --"}, 200),
    ],
)
def test_bad_input_is_4xx_never_5xx(client, params, status):
    r = client.get("/api/search", params=params)
    assert r.status_code == status, r.text
    assert "detail" in r.json() or status == 200


def test_unknown_paper_is_404(client):
    assert client.get("/api/papers/cisi:999999").status_code == 404
    assert client.get("/api/papers/no-such-id/related").status_code == 404


def test_no_endpoint_writes(client):
    schema = client.get("/openapi.json").json()
    methods = {m for ops in schema["paths"].values() for m in ops}
    assert methods == {"get"}


def test_snapshot_switch_during_requests_fails_none(cisi_snapshot, tmp_path):
    """Publish B (a copy of A under a new id) while a stream of requests runs: none fails, and the
    server then serves B without a restart."""
    from pipeline.settings import Settings

    root = tmp_path / "wh"
    shutil.copytree(cisi_snapshot.warehouse / "snapshots", root / "snapshots", symlinks=True)
    settings = Settings.load(warehouse=root)
    a = (root / "snapshots" / "CURRENT").read_text().strip()
    b = a + "-b"
    errors: list[str] = []
    seen: set[str] = set()
    stop = threading.Event()

    with TestClient(create_app(settings)) as c:
        def hammer():
            while not stop.is_set():
                r = c.get("/api/search", params={"q": "information retrieval", "k": 3})
                if r.status_code != 200:
                    errors.append(r.text)
                else:
                    seen.add(r.json()["snapshot_id"])

        threads = [threading.Thread(target=hammer) for _ in range(3)]
        for t in threads:
            t.start()
        shutil.copytree(root / "snapshots" / a, root / "snapshots" / f"{b}.tmp")
        (root / "snapshots" / f"{b}.tmp").rename(root / "snapshots" / b)
        tmp_ptr = root / "snapshots" / "CURRENT.tmp"
        tmp_ptr.write_text(b + "\n")
        tmp_ptr.replace(root / "snapshots" / "CURRENT")
        deadline = threading.Event()
        for _ in range(200):
            if b in seen:
                break
            deadline.wait(0.05)
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    assert b in seen


# ---- pinned snapshots (issue 17) -------------------------------------------------------------------------
@pytest.fixture
def own_warehouse(cisi_snapshot, tmp_path):
    """A private copy of the CISI warehouse (DuckDB, LanceDB, snapshots) that tests may publish into."""
    from embed_helpers import clone_settings

    return clone_settings(cisi_snapshot, tmp_path, snapshot_keep=5, snapshot_min_age_h=0)


def _one_line(r) -> str:
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail, detail
    return detail


def test_pinned_server_survives_six_publishes(own_warehouse):
    """`paperkb serve --snapshot A`, then six publishes with keep=5: A used to be deleted (500 on papers);
    now the server's pin keeps it, retention says so, and A goes once the server stops."""
    import os

    from pipeline import snapshots
    from pipeline.steps.publish import run_publish

    s = own_warehouse
    a = snapshots.current_id(s)
    with TestClient(create_app(s, a)) as c:
        runs = [run_publish(s) for _ in range(6)]
        assert runs[-1]["kept_pinned"] == {a: f"pinned by paperkb serve pid {os.getpid()}"}
        listed = {x["snapshot_id"]: x for x in snapshots.list_snapshots(s)}
        assert a in listed and len(listed) == 6 and listed[a]["pinned_by"] and listed[a]["status"] == "ok"
        assert runs[0]["snapshot_id"] not in listed  # the oldest unpinned one went instead
        r = c.get("/api/papers/cisi:1")
        assert r.status_code == 200 and r.json()["snapshot_id"] == a
        assert c.get("/api/papers/cisi:1/related", params={"k": 3}).status_code == 200
        assert c.get("/api/health").json() == {"status": "ok", "snapshot_id": a}
        body = c.get("/api/snapshots").json()
        assert body["serving"] == a and body["current"] == runs[-1]["snapshot_id"]
    run_publish(s)  # the server stopped: its pin is gone, and so is A
    assert a not in {x["snapshot_id"] for x in snapshots.list_snapshots(s)}


def test_pinned_snapshot_deleted_by_hand_is_503(own_warehouse):
    """Deleted nonetheless (by hand): data endpoints answer 503 with one line, health says so, and
    /api/snapshots calls the deleted id neither current nor served."""
    from pipeline import snapshots
    from pipeline.steps.publish import run_publish

    s = own_warehouse
    a = snapshots.current_id(s)
    b = run_publish(s)["snapshot_id"]
    with TestClient(create_app(s, a)) as c:
        assert c.get("/api/papers/cisi:1").status_code == 200
        shutil.rmtree(s.snapshots_dir / a)
        for path, params in (("/api/papers/cisi:1", None), ("/api/papers/cisi:1/related", None),
                             ("/api/search", {"q": "library classification"})):
            r = c.get(path, params=params)
            assert r.status_code == 503, (path, r.text)
            assert _one_line(r).startswith(f"snapshot {a} is damaged: it was deleted from disk while being served")
        h = c.get("/api/health")
        assert h.status_code == 503 and h.json()["status"] != "ok" and a in _one_line(h)
        body = c.get("/api/snapshots").json()
        assert body["current"] == b and body["serving"] is None
        assert a not in {x["snapshot_id"] for x in body["snapshots"]}


def test_damaged_served_snapshot_is_503_never_500(own_warehouse):
    """A data file of the served snapshot deleted under a server following CURRENT: health reports the
    damage, and every data endpoint answers 503 with health's line (issue 28: they answered from memory)."""
    from pipeline import snapshots

    s = own_warehouse
    a = snapshots.current_id(s)
    with TestClient(create_app(s), raise_server_exceptions=False) as c:
        assert c.get("/api/health").json()["status"] == "ok"
        for f in sorted((s.snapshots_dir / a / "lancedb").glob("*.lance/data/*.lance")):
            f.unlink()
        h = c.get("/api/health")
        assert h.status_code == 503 and "(a data file of LanceDB table" in _one_line(h)
        for path, params in DATA_ENDPOINTS:
            r = c.get(path, params=params)
            assert r.status_code == 503, (path, r.status_code, r.text)
            assert _one_line(r) == h.json()["detail"]


# every endpoint that reads the served snapshot, with inputs that answer 200 on an intact one
DATA_ENDPOINTS = [
    ("/api/search", {"q": "citation indexing", "expand": "off"}),
    ("/api/search", {"q": "citation indexing", "format": "bibtex"}),
    ("/api/papers/cisi:2", None),
    ("/api/papers/cisi:2/related", None),
    ("/api/recommend", {"pos": "cisi:2"}),
    ("/api/export", {"id": "cisi:2"}),
    ("/api/path", {"from": "cisi:2", "to": "cisi:3"}),
    ("/api/feeds", None),
]


@pytest.mark.parametrize("health_first", [True, False])
def test_one_index_file_deleted_every_data_endpoint_agrees_with_health(own_warehouse, monkeypatch, health_first):
    """Issue 28: one index file of the served snapshot deleted: /api/health said 503 while search, papers,
    related and recommend still answered 200. Now each data endpoint answers 503 with health's line, whether
    health was asked first or not (data endpoints re-check at most every SNAPSHOT_CHECK_S seconds, and
    reuse health's fresher answer)."""
    import json

    import pipeline.serve.app as app_mod
    from pipeline import snapshots

    s = own_warehouse
    a = snapshots.current_id(s)
    with TestClient(create_app(s), raise_server_exceptions=False) as c:
        for path, params in DATA_ENDPOINTS:
            r = c.get(path, params=params)
            assert r.status_code in (200, 404), (path, r.status_code, r.text)  # 404: a path the graph lacks
        manifest = json.loads((s.snapshots_dir / a / "manifest.json").read_text())
        index_file = sorted(f for f in manifest["files"] if "/_indices/" in f)[0]
        (s.snapshots_dir / a / index_file).unlink()
        if not health_first:
            monkeypatch.setattr(app_mod, "SNAPSHOT_CHECK_S", 0.0)
            first = c.get(DATA_ENDPOINTS[0][0], params=DATA_ENDPOINTS[0][1])
            assert first.status_code == 503, first.text
        h = c.get("/api/health")
        assert h.status_code == 503 and h.json()["status"] == "unavailable"
        detail = h.json()["detail"]
        assert detail.startswith(f"snapshot {a} is damaged: missing file {index_file}"), detail
        for path, params in DATA_ENDPOINTS:
            r = c.get(path, params=params)
            assert r.status_code == 503, (path, r.status_code, r.text)
            assert _one_line(r) == detail, path
        assert c.get("/api/snapshots").status_code == 200  # the list still answers: it says which are damaged


# ---- one-line errors, documented --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "params, detail",
    [
        ({"q": "library", "k": 100000}, "query parameter k: must be <= 100"),
        ({"q": "library", "k": 0}, "query parameter k: must be >= 1"),
        ({"q": ""}, "query parameter q: must not be empty"),
        ({"q": "x" * 1001}, "query parameter q: must be at most 1000 characters"),
        ({"q": "library", "year_from": "abc"}, "query parameter year_from: must be an integer"),
        ({"q": "library", "fusion": "magic"}, "query parameter fusion: must be 'blend', 'interleave' or 'rrf'"),
        ({}, "query parameter q: is required"),
    ],
)
def test_422_detail_is_one_line(client, params, detail):
    r = client.get("/api/search", params=params)
    assert r.status_code == 422
    assert r.json() == {"detail": detail}


def test_every_error_answer_is_documented(client):
    schema = client.get("/openapi.json").json()
    error = schema["components"]["schemas"]["ErrorDetail"]
    assert set(error["properties"]) == {"detail", "candidates"} and error["required"] == ["detail"]  # candidates: an
    assert schema["components"]["schemas"]["AuthorCandidate"]["required"] == ["name", "paper_count"]  # author name only
    expected = {"/api/health": {"400", "503"}, "/api/snapshots": {"400", "503"},
                "/api/search": {"400", "422", "503"},
                "/api/papers/{paper_id}": {"400", "404", "422", "503"},
                "/api/papers/{paper_id}/related": {"400", "404", "422", "503"}}
    for path, codes in expected.items():
        responses = schema["paths"][path]["get"]["responses"]
        assert codes <= set(responses), (path, sorted(responses))
        for code in codes:
            ref = responses[code]["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/ErrorDetail"), (path, code, ref)


# ---- hardening ------------------------------------------------------------------------------------------
def _strings(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def test_no_filesystem_paths_in_responses(client, cisi_snapshot):
    hit = client.get("/api/search", params={"q": "citation analysis", "k": 3}).json()
    pid = hit["results"][0]["paper_id"]
    answers = [hit, client.get("/api/snapshots").json(), client.get("/api/health").json(),
               client.get(f"/api/papers/{pid}").json(), client.get(f"/api/papers/{pid}/related").json()]
    root = str(cisi_snapshot.warehouse.resolve())
    for answer in answers:
        leaked = [s for s in _strings(answer) if s.startswith("/") or root in s]
        assert not leaked, leaked
    assert all("path" not in s for s in answers[1]["snapshots"])


def test_security_headers_on_every_answer(client):
    for url in ("/", "/paper?id=x", "/docs", "/redoc", "/openapi.json", "/api/health", "/api/search?q=",
                "/static/style.css", "/no/such/page"):
        r = client.get(url)
        assert r.headers["x-content-type-options"] == "nosniff", url
        assert r.headers["x-frame-options"] == "DENY", url
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, url


def test_docs_pages_load_nothing_from_elsewhere(client):
    for url in ("/docs", "/redoc"):
        page = client.get(url)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "http" not in page.text and "<script>" not in page.text  # no CDN, no inline script
        for src in re.findall(r'(?:src|href)="([^"]+)"', page.text):
            assert client.get(src).status_code == 200, src


def test_only_allowed_hosts_are_answered(cisi_snapshot):
    from pipeline.settings import Settings

    loopback = ["localhost", "127.0.0.1", "::1"]
    assert Settings.model_fields["serve_allowed_hosts"].default == loopback
    app = create_app(cisi_snapshot.model_copy(update={"serve_allowed_hosts": loopback}))
    for base in ("http://localhost:8000", "http://127.0.0.1:8000", "http://[::1]:8000"):
        assert TestClient(app, base_url=base).get("/openapi.json").status_code == 200, base
    for base in ("http://attacker.example", "http://testserver", "http://127.0.0.1.nip.io:8000"):
        r = TestClient(app, base_url=base).get("/api/health")
        assert r.status_code == 400, base
        assert "PAPERKB_SERVE_ALLOWED_HOSTS" in r.json()["detail"] and "\n" not in r.json()["detail"]
        assert r.headers["x-frame-options"] == "DENY"
    wide = create_app(cisi_snapshot.model_copy(update={"serve_allowed_hosts": ["*.example.org"]}))
    assert TestClient(wide, base_url="http://papers.example.org").get("/openapi.json").status_code == 200
    assert TestClient(wide, base_url="http://example.com").get("/openapi.json").status_code == 400


def test_model_and_snapshot_are_loaded_before_the_first_request(cisi_snapshot):
    app = create_app(cisi_snapshot)
    with TestClient(app):  # runs the lifespan, as uvicorn does before it accepts connections
        cur = app.state.holder._current
        assert cur is not None
        assert "_encode" in cur.searcher.__dict__  # the query encoder is loaded (a cached_property)


def _raw_get(base: str, path: str, headers: list[tuple[str, str]]) -> tuple[int, bytes]:
    """GET ``path`` over a plain socket with exactly ``headers`` (an HTTP client library sends one Host)."""
    import socket

    host, port = base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as s:
        head = "".join(f"{k}: {v}\r\n" for k, v in headers)
        s.sendall(f"GET {path} HTTP/1.1\r\n{head}Connection: close\r\n\r\n".encode("latin-1"))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def test_a_request_with_more_than_one_host_header_is_refused(cisi_snapshot):
    """Issue 64: with two Host headers the guard checked the last one only, so ``Host: attacker.example`` then
    ``Host: 127.0.0.1`` was answered (a server or proxy in front may route by the first)."""
    from live_server import served

    with served(cisi_snapshot) as base:
        assert _raw_get(base, "/api/health", [("Host", "127.0.0.1")])[0] == 200
        for hosts in (["attacker.example", "127.0.0.1"], ["127.0.0.1", "attacker.example"], ["127.0.0.1", "127.0.0.1"]):
            status, body = _raw_get(base, "/api/health", [("Host", h) for h in hosts])
            assert status == 400, (hosts, body)
            assert body.endswith(b'{"detail":"2 Host headers: a request names one host"}'), body


def test_a_catalog_view_over_other_files_is_refused_on_the_serve_path(cisi_snapshot, tmp_path):
    """Issue 64: a snapshot's catalog (a snapshot store can supply it: its views are whatever its file says) is opened
    by serve, MCP, feeds and the API with DuckDB's external access off, file access limited to the snapshot's own
    files, no extension autoloaded and the configuration locked: a view over /etc/passwd is refused, the snapshot's
    own views (read_parquet of its files) read."""
    import json

    import duckdb

    from pipeline import snapshots
    from pipeline.agents.catalogs import Catalogs
    from pipeline.settings import Settings

    root = tmp_path / "wh"
    shutil.copytree(cisi_snapshot.warehouse / "snapshots", root / "snapshots", symlinks=True)  # copies: no links
    sid = (root / "snapshots" / "CURRENT").read_text().strip()
    folder = root / "snapshots" / sid
    catalog = folder / snapshots.CATALOG
    with duckdb.connect(str(catalog)) as con:  # as a store's snapshot could have it, its manifest to match
        con.execute("CREATE VIEW leak AS SELECT * FROM read_csv('/etc/passwd', header = false, sep = ':')")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"][snapshots.CATALOG] = snapshots.sha256_file(catalog)
    manifest.setdefault("sizes", {})[snapshots.CATALOG] = catalog.stat().st_size
    (folder / "manifest.json").write_text(json.dumps(manifest))

    app = create_app(Settings.load(warehouse=root))
    with TestClient(app) as client:
        assert client.get("/api/papers/cisi:1").json()["paper_id"] == "cisi:1"  # the snapshot's own views
        snap = app.state.holder.get().searcher.snap
        serve_con = snap.catalog()  # what serve's catalog cursors are made from
        catalogs = Catalogs()  # what the MCP tools read through
        try:
            with catalogs.cursor(snap) as mcp_cursor:
                for con in (serve_con.cursor(), mcp_cursor):
                    assert con.execute("SELECT count(*) FROM papers").fetchall()[0][0] > 1000
                    for sql in ("SELECT * FROM leak", "SELECT * FROM read_csv('/etc/passwd')",
                                "SELECT * FROM glob('/etc/*')", f"COPY (SELECT 1) TO '{tmp_path}/out.csv'",
                                f"ATTACH '{tmp_path}/new.duckdb' AS other", "INSTALL httpfs", "LOAD httpfs"):
                        with pytest.raises(duckdb.PermissionException):
                            con.execute(sql).fetchall()
                    with pytest.raises(duckdb.InvalidInputException, match="locked"):
                        con.execute("SET enable_external_access = true")
        finally:
            catalogs.close()
            serve_con.close()
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "new.duckdb").exists()
