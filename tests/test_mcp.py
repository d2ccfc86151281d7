"""`paperkb mcp`: the MCP server, driven by the official SDK's own client over stdio (the command as a
subprocess), streamable HTTP (the command on a free loopback port) and in-process, against real snapshots
(CISI, CACM with its citation links, a real arXiv PDF's passages)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import anyio
import httpx
import pytest

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402

from conftest import KEEP_ENV, REPO_ROOT, isolated_settings  # noqa: E402
from pipeline.agents.server import HTTP_PATH  # noqa: E402
from live_server import free_port  # noqa: E402

TOOLS = {"search", "get_paper", "get_work", "get_passages", "get_citations", "related", "recommend", "citation_path", "export", "ask"}
PDF = "1409.0473"  # Bahdanau et al.: 15 pages, sections, an appendix
CALL_LIMIT_S = 600  # a hung server fails the test instead of hanging it


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_") or k in KEEP_ENV}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(REPO_ROOT))
    return env


def _command(warehouse: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "--warehouse", str(warehouse), "mcp", *args]


def _readme_snippets() -> list[dict]:
    """The JSON configuration blocks of the README's agent section."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## For agent builders: MCP"):]
    section = section[:section.index("\n## ", 1)]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, flags=re.S)]


def _stdio_from_readme(warehouse: Path) -> Client:
    """The server as an agent host starts it from the README's `mcpServers` snippet: its command (this
    environment's `paperkb`), its args with this warehouse, its env."""
    cfg = _readme_snippets()[0]["mcpServers"]["paperkb"]
    assert cfg["command"].endswith("/bin/paperkb") and cfg["args"][-1] == "mcp"
    args = [str(warehouse) if a == "/srv/paperkb/warehouse" else a for a in cfg["args"]]
    assert str(warehouse) in args
    command = Path(sys.executable).with_name("paperkb")
    if not command.exists():  # no console script in this environment: the same entry point
        command, args = Path(sys.executable), ["-m", "pipeline.cli", *args]
    return Client(StdioServerParameters(command=str(command), args=args, env={**_env(), **cfg["env"]}))


def _run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded():
        with anyio.fail_after(CALL_LIMIT_S):
            return await scenario()

    return anyio.run(bounded)


def _current(settings) -> str:
    return (settings.snapshots_dir / "CURRENT").read_text().strip()


def _catalog(settings, snapshot_id: str):
    from pipeline.snapshots import open_catalog

    return open_catalog(settings.snapshots_dir / snapshot_id)


def _error_line(result) -> str:
    assert result.is_error, result
    text = result.content[0].text
    assert "\n" not in text and "Traceback" not in text, text
    return text


@contextmanager
def _http_server(warehouse: Path, *args: str) -> Iterator[str]:
    """``paperkb mcp --transport http`` on a free loopback port until the block ends; yields the /mcp URL."""
    port = free_port()
    proc = subprocess.Popen(_command(warehouse, "--transport", "http", "--port", str(port), *args), env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + CALL_LIMIT_S  # it listens once the snapshot and the model are loaded
        while True:
            try:
                httpx.get(url, timeout=5)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "exited"
                assert time.monotonic() < deadline, "paperkb mcp --transport http did not come up"
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# ---- stdio, CISI ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_stdio_lists_typed_tools_and_every_tool_answers_from_the_snapshot(cisi_snapshot):
    """The command as an agent host starts it from the README's snippet: typed schemas, real answers naming the
    snapshot, bad calls answered as tool errors while the server keeps answering."""
    sid = _current(cisi_snapshot)
    con = _catalog(cisi_snapshot, sid)
    known = {r[0] for r in con.execute("SELECT paper_id FROM papers").fetchall()}
    con.close()

    async def scenario():
        async with _stdio_from_readme(cisi_snapshot.warehouse) as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            assert set(listed) == TOOLS
            for t in listed.values():
                assert t.description and t.input_schema["type"] == "object", t.name
                assert "snapshot_id" in t.output_schema["properties"], t.name  # structured output, typed
                assert t.annotations.read_only_hint is True
            search_in = listed["search"].input_schema["properties"]
            assert search_in["k"]["maximum"] == 100 and {"year_from", "year_to", "categories", "authors"} <= set(search_in)
            assert listed["get_passages"].input_schema["required"] == ["paper_id"]

            # a real CISI query (CISI.QRY 1's subject): papers that exist, best passages, signals
            r = await c.call_tool("search", {"query": "problems of classification and indexing in libraries", "k": 5})
            assert not r.is_error, r.content
            s = r.structured_content
            assert s["snapshot_id"] == sid and len(s["results"]) == 5
            assert {h["paper_id"] for h in s["results"]} <= known
            assert [h["rank"] for h in s["results"]] == [1, 2, 3, 4, 5]
            top = s["results"][0]
            assert top["passage"] and top["section"] == "abstract" and top["role"] == "abstract" and top["page"] is None
            assert {"ck", "bm25", "pr"} <= set(top["signals"]) and top["score"] > 0
            assert top["citation_count"] is not None and set(top["links"]) == {"arxiv", "pdf", "doi", "s2"}
            assert json.loads(r.content[0].text)["snapshot_id"] == sid  # the text content says the same

            pid = top["paper_id"]
            paper = (await c.call_tool("get_paper", {"paper_id": pid})).structured_content
            assert paper["snapshot_id"] == sid and paper["paper_id"] == pid and paper["title"] == top["title"]
            assert [a["name"] for a in paper["authors"]] == top["authors"] and paper["abstract"] and paper["passages"] == 1
            assert paper["sections"] == [] and paper["links"] == {"arxiv": None, "pdf": None, "doi": None, "s2": None}
            assert paper["metrics"]["pagerank"] is not None

            passages = (await c.call_tool("get_passages", {"paper_id": pid})).structured_content
            assert passages["snapshot_id"] == sid and passages["total"] == 1
            assert passages["passages"][0]["chunk_id"] == f"{pid}#abs" and passages["passages"][0]["kind"] == "abstract"

            rel = (await c.call_tool("related", {"paper_id": pid, "k": 5})).structured_content
            assert rel["snapshot_id"] == sid and rel["paper_id"] == pid and len(rel["related"]) == 5
            assert pid not in {x["paper_id"] for x in rel["related"]} and {x["paper_id"] for x in rel["related"]} <= known

            rec = (await c.call_tool("recommend", {"positive": [pid], "k": 5})).structured_content
            assert rec["snapshot_id"] == sid and rec["positives"] == [pid] and len(rec["results"]) == 5
            assert all(x["why"] and x["paper_id"] in known and x["paper_id"] != pid for x in rec["results"])

            ids = [h["paper_id"] for h in s["results"][:3]]
            bib = (await c.call_tool("export", {"paper_ids": ids})).structured_content
            assert bib["snapshot_id"] == sid and bib["format"] == "bibtex" and bib["count"] == 3
            assert bib["text"].count("\n@") + bib["text"].startswith("@") == 3
            csl = (await c.call_tool("export", {"paper_ids": ids, "format": "csl-json"})).structured_content
            assert [item["title"] for item in json.loads(csl["text"])] == [h["title"] for h in s["results"][:3]]

            asked = (await c.call_tool("ask", {"question": "library classification", "k": 3})).structured_content
            assert asked["snapshot_id"] == sid and [e["n"] for e in asked["evidence"]] == [1, 2, 3]
            assert {e["paper_id"] for e in asked["evidence"]} <= known and asked["claims"] == [] and asked["notes"]

            resources = (await c.list_resources()).resources
            assert [str(x.uri) for x in resources] == ["paperkb://snapshot/manifest"]
            text = (await c.read_resource("paperkb://snapshot/manifest")).contents[0].text
            manifest = json.loads(text)
            assert manifest["snapshot_id"] == sid and manifest["counts"]["papers"] == len(known)
            assert str(cisi_snapshot.warehouse) not in text  # no filesystem paths for a remote client

            # bad calls: tool errors of one line, and the server goes on answering
            line = _error_line(await c.call_tool("get_paper", {"paper_id": "cisi:999999"}))
            assert "unknown paper id 'cisi:999999'" in line and sid in line
            assert "k" in _error_line(await c.call_tool("search", {"query": "libraries", "k": 500}))
            assert "query" in _error_line(await c.call_tool("search", {"query": "   "}))
            assert "after year_to" in _error_line(await c.call_tool("search", {"query": "libraries", "year_from": 1990,
                                                                               "year_to": 1980}))
            assert "cisi:999999" in _error_line(await c.call_tool("export", {"paper_ids": [pid, "cisi:999999"]}))
            assert "format" in _error_line(await c.call_tool("export", {"paper_ids": [pid], "format": "docx"}))
            assert "question" in _error_line(await c.call_tool("ask", {"question": " "}))
            assert "no full text" in _error_line(await c.call_tool("get_passages", {"paper_id": pid, "page_from": 2}))
            assert "both a positive and a negative" in _error_line(
                await c.call_tool("recommend", {"positive": [pid], "negative": [pid]}))
            again = await c.call_tool("search", {"query": "library classification", "k": 2})
            assert not again.is_error and again.structured_content["snapshot_id"] == sid

    _run(scenario)


def test_nothing_published_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run(_command(tmp_path / "empty"), env=_env(), capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("paperkb: error: ") and r.stderr.count("\n") == 1, r.stderr
    bad = subprocess.run(_command(tmp_path, "--transport", "carrier-pigeon"), env=_env(), capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "--transport must be stdio or http" in bad.stderr


def test_docs_name_every_tool_and_argument_and_the_readme_gives_the_http_url():
    from pipeline.agents.server import build_server

    doc = (REPO_ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    listed = anyio.run(build_server(isolated_settings(Path("/nonexistent"))).list_tools)
    assert {t.name for t in listed} == TOOLS
    parts = {p.split("`")[1]: p for p in re.split(r"\n##+ ", doc) if p.startswith("`")}  # "### `search`" ...
    for t in listed:
        part = parts[t.name]
        for arg in t.input_schema["properties"]:
            assert f"| `{arg}` |" in part, (t.name, arg)
        for field in t.output_schema["properties"]:
            assert f"`{field}`" in part, (t.name, field)
    http = _readme_snippets()[1]["mcpServers"]["paperkb"]
    assert http["type"] == "http" and http["url"].endswith(HTTP_PATH)


def test_offsets_are_bounded_as_the_http_apis(tmp_path):
    """Issue 64: get_passages / get_citations with offset >= 2**63 answered only "Error executing tool" (DuckDB's
    OFFSET overflowed): the tools' schemas bound it as the HTTP API does (100,000), so the error names the argument."""
    from pipeline.agents.server import MAX_OFFSET, build_server
    from pipeline.serve.app import MAX_OFFSET as HTTP_MAX_OFFSET

    assert MAX_OFFSET == HTTP_MAX_OFFSET == 100_000

    async def scenario():
        async with Client(build_server(isolated_settings(tmp_path / "nothing published"))) as c:
            schemas = {t.name: t.input_schema for t in (await c.list_tools()).tools}
            for tool in ("get_passages", "get_citations"):
                assert schemas[tool]["properties"]["offset"]["maximum"] == MAX_OFFSET
                line = _error_line(await c.call_tool(tool, {"paper_id": "cisi:1", "offset": 2**63}))
                assert line.startswith(f"invalid arguments for {tool}: offset: ") and "100000" in line, line

    _run(scenario)


def test_a_missing_mcp_sdk_names_the_install_profile():
    from pipeline.cli import install_profile_of

    assert install_profile_of("mcp") == "mcp" and install_profile_of("mcp.server.mcpserver") == "mcp"


# ---- streamable HTTP, CACM -----------------------------------------------------------------------------
def _linked_pairs(settings, snapshot_id: str) -> tuple[tuple[str, str], tuple[str, str, str]]:
    """A directly linked pair of CACM papers, and (a, b, c) where a-b and b-c are citation links but a-c is not."""
    con = _catalog(settings, snapshot_id)
    try:
        edges = """(SELECT w1.paper_id AS a, w2.paper_id AS b FROM citations c
                    JOIN works w1 ON w1.work_id = c.citing_work_id JOIN works w2 ON w2.work_id = c.cited_work_id
                    WHERE w1.paper_id IS NOT NULL AND w2.paper_id IS NOT NULL)"""
        direct = con.execute(f"SELECT a, b FROM {edges} ORDER BY a, b LIMIT 1").fetchone()
        two = con.execute(f"""
            WITH e AS {edges}, u AS (SELECT a, b FROM e UNION SELECT b, a FROM e)
            SELECT u1.a, u1.b, u2.b FROM u u1 JOIN u u2 ON u1.b = u2.a
            WHERE u1.a <> u2.b AND NOT EXISTS (SELECT 1 FROM u x WHERE x.a = u1.a AND x.b = u2.b)
            ORDER BY 1, 2, 3 LIMIT 1""").fetchone()
    finally:
        con.close()
    return direct, two


@pytest.mark.slow
def test_http_citation_paths_and_the_host_rule(cacm_snapshot):
    """`paperkb mcp --transport http`: the SDK's client over streamable HTTP; citation paths between CACM papers
    that the catalog links; a Host (or a browser Origin) outside serve_allowed_hosts is refused."""
    sid = _current(cacm_snapshot)
    (a, b), (x, y, z) = _linked_pairs(cacm_snapshot, sid)
    with _http_server(cacm_snapshot.warehouse) as url:
        for headers, status, word in (({"Host": "attacker.example"}, 400, "host"),
                                      ({"Host": "127.0.0.1.nip.io"}, 400, "host"),
                                      ({"Origin": "http://attacker.example"}, 403, "origin")):
            r = httpx.post(url, headers={**headers, "Content-Type": "application/json", "Accept": "application/json"},
                           content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            assert r.status_code == status, (headers, r.text)
            detail = r.json()["detail"]
            assert detail.startswith(word) and "PAPERKB_SERVE_ALLOWED_HOSTS" in detail and "\n" not in detail
        # issue 64: of two Origin headers the last alone was checked
        r = httpx.post(url, headers=[("Origin", "http://attacker.example"), ("Origin", "http://127.0.0.1"),
                                     ("Content-Type", "application/json"), ("Accept", "application/json")],
                       content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        assert r.status_code == 403 and r.json()["detail"].startswith("origin 'http://attacker.example'"), r.text

        async def scenario():
            async with Client(url) as c:
                assert {t.name for t in (await c.list_tools()).tools} == TOOLS
                paper = (await c.call_tool("get_paper", {"paper_id": a})).structured_content
                assert paper["snapshot_id"] == sid and paper["reference_count"] >= 1 and paper["work_ids"]
                refs = (await c.call_tool("get_citations", {"paper_id": a, "limit": 200})).structured_content
                assert refs["direction"] == "references" and refs["total"] == paper["reference_count"]
                assert b in {r["paper_id"] for r in refs["items"]} and all(r["title"] for r in refs["items"])
                citers = (await c.call_tool("get_citations", {"paper_id": b, "direction": "cited_by",
                                                              "limit": 200})).structured_content
                assert a in {r["paper_id"] for r in citers["items"]} and citers["sort"] == "citations"
                counts = [r["citation_count"] or 0 for r in citers["items"]]
                assert counts == sorted(counts, reverse=True)  # most cited first
                assert "sort" in _error_line(await c.call_tool("get_citations", {"paper_id": a, "sort": "random"}))

                one = (await c.call_tool("citation_path", {"source": a, "target": b})).structured_content
                assert one["snapshot_id"] == sid and one["length"] == 1 and one["count"] >= 1
                assert [h["paper_id"] for h in one["paths"][0]] == [a, b] and one["paths"][0][1]["link"] == "cites"

                two = (await c.call_tool("citation_path", {"source": x, "target": z})).structured_content
                assert two["length"] == 2 and two["count"] >= 1
                assert [[h["paper_id"] for h in p] for p in two["paths"]].count([x, y, z]) == 1
                assert all(h["link"] in ("cites", "cited_by") for p in two["paths"] for h in p[1:])
                near = (await c.call_tool("citation_path", {"source": x, "target": z, "max_length": 1})).structured_content
                assert near["length"] is None and near["paths"] == []

                bad = await c.call_tool("citation_path", {"source": a, "target": "cacm:0"})
                assert "cacm:0" in _error_line(bad)
                assert "max_length" in _error_line(await c.call_tool("citation_path", {"source": a, "target": b,
                                                                                       "max_length": 9}))
                hits = (await c.call_tool("search", {"query": "parsing context-free grammars", "k": 3})).structured_content
                assert hits["snapshot_id"] == sid and all(h["paper_id"].startswith("cacm:") for h in hits["results"])
                rel = (await c.call_tool("related", {"paper_id": a, "k": 5})).structured_content
                assert rel["related"] and any(r["ccbc_weighted"] > 0 for r in rel["related"])  # the citation graph counts

        _run(scenario)


# ---- a real PDF's passages, in process ------------------------------------------------------------------
@pytest.fixture(scope="module")
def pdf_snapshot(shared_data, tmp_path_factory, request):
    """5 CISI abstracts and one real arXiv PDF (chunks with sections and pages, figure legends, the works its reference
    list names), published."""
    from embed_helpers import add_pdf_paper, import_cisi_subset, make_settings
    from pipeline.steps.embed import run_embed
    from pipeline.steps.graph import run_graph
    from pipeline.steps.publish import run_publish

    cache = request.config.cache.mkdir("paperkb-vector-cache") if getattr(request.config, "cache", None) else None
    s = make_settings(tmp_path_factory.mktemp("mcp_pdf"), embed_cache_dir=cache)
    import_cisi_subset(s, shared_data, 5)
    add_pdf_paper(s, shared_data, PDF, references=True)
    run_graph(s)  # its reference list: the works it cites
    run_embed(s)
    run_publish(s)
    return s


def test_passages_by_section_and_page_range(pdf_snapshot):
    from pipeline.agents.server import build_server

    sid = _current(pdf_snapshot)
    con = _catalog(pdf_snapshot, sid)
    rows = con.execute("SELECT section, page_start, page_end, role FROM passages WHERE paper_id = ? AND kind = 'body'",
                       [PDF]).fetchall()
    con.close()
    assert len(rows) > 20

    async def scenario():
        async with Client(build_server(pdf_snapshot)) as c:
            paper = (await c.call_tool("get_paper", {"paper_id": PDF})).structured_content
            assert paper["snapshot_id"] == sid and paper["links"]["arxiv"] == f"https://arxiv.org/abs/{PDF}"
            sections = {x["section"]: x for x in paper["sections"]}
            assert sections["1 INTRODUCTION"]["page_start"] == 1 and sections["1 INTRODUCTION"]["role"] == "body"
            assert len(paper["figures"]) == 3 and all(f["page"] and f["text"] for f in paper["figures"])
            assert paper["passages"] == len(rows) + 1  # the body passages and the abstract

            every = (await c.call_tool("get_passages", {"paper_id": PDF, "limit": 200})).structured_content
            assert every["total"] == len(rows) + 1 and len(every["passages"]) == every["total"]
            assert every["passages"][0]["kind"] == "abstract"
            ordinals = [p["ordinal"] for p in every["passages"]]
            assert ordinals == sorted(ordinals)  # reading order
            assert {p["role"] for p in every["passages"]} == {"abstract", "body", "acknowledgements", "appendix"}
            page = (await c.call_tool("get_passages", {"paper_id": PDF, "limit": 5, "offset": 5})).structured_content
            assert page["passages"] == every["passages"][5:10] and page["total"] == every["total"]

            intro = (await c.call_tool("get_passages", {"paper_id": PDF, "section": "introduction"})).structured_content
            want = sum(1 for s, *_ in rows if s and "introduction" in s.lower())
            assert intro["total"] == want == sections["1 INTRODUCTION"]["passages"] > 0
            assert all("INTRODUCTION" in p["section"] for p in intro["passages"])

            pages = (await c.call_tool("get_passages", {"paper_id": PDF, "page_from": 4, "page_to": 5})).structured_content
            want = sum(1 for _, a, b, _ in rows if a <= 5 and b >= 4)
            assert pages["total"] == want > 0
            assert all(p["page_start"] <= 5 and p["page_end"] >= 4 for p in pages["passages"])

            missing = _error_line(await c.call_tool("get_passages", {"paper_id": PDF, "section": "no such heading"}))
            assert "'1 INTRODUCTION'" in missing and "pages 1-15" in missing
            assert "pages 1-15" in _error_line(await c.call_tool("get_passages", {"paper_id": PDF, "page_from": 40}))
            assert "page_from" in _error_line(await c.call_tool("get_passages", {"paper_id": PDF, "page_from": 0}))
            for tool in ("get_passages", "get_citations"):  # issue 64: was "Error executing tool" (DuckDB's OFFSET)
                assert "offset" in _error_line(await c.call_tool(tool, {"paper_id": PDF, "offset": 2**63}))

            hits = (await c.call_tool("search", {"query": "soft alignment model of the decoder over source annotations",
                                                 "k": 2})).structured_content
            best = hits["results"][0]
            assert best["paper_id"] == PDF and best["page"] and best["section"] and best["role"] in ("body", "appendix")
            assert best["links"]["pdf"] == f"https://arxiv.org/pdf/{PDF}"

            # a work its reference list names, outside the corpus: get_paper says to ask get_work, which tells
            refs = (await c.call_tool("get_citations", {"paper_id": PDF, "limit": 200})).structured_content["items"]
            cited = next(r for r in refs if r["paper_id"] is None and r["work_id"] and r["raw"])
            # where the text cites each entry (author-year here: "Cho et al. (2014a)")
            placed = [r for r in refs if r["contexts"]]
            assert len(placed) >= 0.8 * sum(1 for r in refs if r["raw"])
            assert all(str(r["year"]) in x["text"][x["marker"][0]:x["marker"][1]] for r in placed for x in r["contexts"]
                       if r["paper_id"] is None)
            line = _error_line(await c.call_tool("get_paper", {"paper_id": cited["work_id"]}))
            assert "get_work" in line and cited["work_id"] in line and sid in line
            work = (await c.call_tool("get_work", {"work_id": cited["work_id"]})).structured_content
            assert work["snapshot_id"] == sid and work["work_id"] == cited["work_id"] and work["title"] == cited["title"]
            assert work["cited_by_count"] == work["citing"] == 1 and work["cited_with"] == []  # one citing paper
            assert [(e["paper_id"], e["raw"], e["page"]) for e in work["printed"]] == [(PDF, cited["raw"], cited["page"])]
            assert work["printed_total"] == 1 and work["printed"][0]["title"] == paper["title"]
            assert "get_paper" in _error_line(await c.call_tool("get_work", {"work_id": PDF}))
            assert "unknown paper id" in _error_line(await c.call_tool("get_work", {"work_id": "arXiv:1234.56789"}))
            # a search for that work's title: the paper citing it, and the work among the cited works it names
            found = (await c.call_tool("search", {"query": cited["title"], "k": 3})).structured_content
            assert PDF in [r["paper_id"] for r in found["results"]]
            named = found["cited_works"][0]
            assert (named["work_id"], named["title"], named["match"]) == (cited["work_id"], cited["title"], 1.0)
            assert named["cited_by_results"] == named["cited_here"] == 1

    _run(scenario)


# ---- a snapshot switch -----------------------------------------------------------------------------------
def test_answers_follow_current_and_a_pinned_server_stays(cisi_snapshot, tmp_path):
    """Publish B (a copy of A under a new id) and move CURRENT: a server following CURRENT answers from B on its
    next call, without a restart; one started with --snapshot A keeps answering from A, and says so in a tool
    error when A is deleted under it."""
    from pipeline.agents.server import build_server
    from pipeline.settings import Settings

    root = tmp_path / "wh"
    shutil.copytree(cisi_snapshot.warehouse / "snapshots", root / "snapshots", symlinks=True)
    settings = Settings.load(warehouse=root)
    a = _current(settings)
    b = a + "-b"

    async def ids(c) -> tuple[str, str, str]:
        found = (await c.call_tool("search", {"query": "library classification", "k": 1})).structured_content
        paper = (await c.call_tool("get_paper", {"paper_id": "cisi:1"})).structured_content
        manifest = json.loads((await c.read_resource("paperkb://snapshot/manifest")).contents[0].text)
        return found["snapshot_id"], paper["snapshot_id"], manifest["snapshot_id"]

    async def scenario():
        async with Client(build_server(settings)) as following, Client(build_server(settings, a)) as pinned:
            assert await ids(following) == (a, a, a) and await ids(pinned) == (a, a, a)
            shutil.copytree(root / "snapshots" / a, root / "snapshots" / f"{b}.tmp")
            manifest = json.loads((root / "snapshots" / f"{b}.tmp" / "manifest.json").read_text())
            manifest["snapshot_id"] = b
            (root / "snapshots" / f"{b}.tmp" / "manifest.json").write_text(json.dumps(manifest))
            (root / "snapshots" / f"{b}.tmp").rename(root / "snapshots" / b)
            (root / "snapshots" / "CURRENT.tmp").write_text(b + "\n")
            (root / "snapshots" / "CURRENT.tmp").replace(root / "snapshots" / "CURRENT")
            assert await ids(following) == (b, b, b)
            assert await ids(pinned) == (a, a, a)
            # A deleted by hand under the pinned server: a tool error saying so, and the server still answers
            shutil.rmtree(root / "snapshots" / a)
            line = _error_line(await pinned.call_tool("search", {"query": "library classification", "k": 1}))
            assert f"snapshot {a} is damaged: it was deleted from disk while being served" in line
            assert "deleted" in _error_line(await pinned.call_tool("get_paper", {"paper_id": "cisi:1"}))
            assert await ids(following) == (b, b, b)

    _run(scenario)
