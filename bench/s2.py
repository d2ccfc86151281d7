"""Benchmark for `paperkb enrich`: 1,000 papers replayed from a local S2 stand-in.

The 1,000 papers are the 1,000 recorded citing papers in ../shared/data/s2/Paper.json (real S2
records: arXiv ids where S2 has one, else the DOI, else the CorpusId). A local HTTP server answers
``POST /paper/batch`` with those recorded records (null for ids it does not know), every
``/references`` with one page holding the recorded references of Paper.json, and every
``/citations`` with the recorded empty page. Measured, in one process:

1. fetch run: HTTP calls by kind (batch calls must be ceil(N/500)), wall time, time slept by the rate
   limiter, time inside HTTP, and the rest (processing: raw-zone writes, parsing, DuckDB upserts);
2. rerun: nothing pending -> 0 calls;
3. lost warehouse: the DuckDB file deleted, papers re-seeded, a normal (not --replay) run -> 0 calls,
   every answer is taken from the raw zone;
4. a small run at the default rate (s2_delay_s=1.0), to show the wall time follows the rate.

    .venv/bin/python -m bench.s2 [--papers 1000] [--delay 0.02] [--real-rate-papers 20]

``--bulk`` (issue 14, item 2): requests and wall time to enrich a synthetic corpus (default 60,000
papers) in each mode, per-paper (a smaller run, extrapolated), batch and datasets, against a local
server that answers the Graph API and the Datasets API (the recorded release, release-info and
download-link answers) and serves the gzipped JSON-lines dataset files; writes ``bench/out/s2_bulk.json``:

    .venv/bin/python -m bench.s2 --bulk --papers 60000 --delay 1.0 --per-paper-papers 1000
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))
OUT = ROOT / "bench" / "out"


def lookup_of(rec: dict) -> tuple[dict, str]:
    ext = rec.get("externalIds") or {}
    if ext.get("ArXiv"):
        return {"source": "arxiv", "external_id": ext["ArXiv"], "doi": None}, f"arXiv:{ext['ArXiv']}"
    if ext.get("DOI"):
        return {"source": "bench", "external_id": f"doc-{rec['corpusId']}", "doi": ext["DOI"]}, ext["DOI"]
    return {"source": "bench", "external_id": f"CorpusId:{rec['corpusId']}", "doi": None}, f"CorpusId:{rec['corpusId']}"


def start_server(records: dict[str, bytes], references_page: bytes, empty_page: bytes):
    from pytest_httpserver import HTTPServer
    from werkzeug import Response
    import re

    server = HTTPServer(host="127.0.0.1", port=0)
    counts: dict[str, int] = {}

    def handle(request):
        path = request.path
        if path.endswith("/paper/batch"):
            counts["batch"] = counts.get("batch", 0) + 1
            ids = json.loads(request.get_data())["ids"]
            body = b"[" + b", ".join(records.get(i, b"null") for i in ids) + b"]"
            return Response(body, content_type="application/json")
        for kind, page in (("references", references_page), ("citations", empty_page)):
            if path.endswith(f"/{kind}"):
                counts[kind] = counts.get(kind, 0) + 1
                return Response(page, content_type="application/json")
        return Response(b'{"error":"unexpected"}', status=404, content_type="application/json")

    server.expect_request(re.compile(".*")).respond_with_handler(handle)
    server.start()
    return server, counts


def seed(settings, rows) -> None:
    from pipeline.warehouse import Warehouse

    with Warehouse(settings) as wh:
        wh.init()
        import pyarrow as pa

        wh.con.register("_bench_rows", pa.Table.from_pylist(
            [{k: r[k] for k in ("paper_id", "source", "external_id", "doi")} for r in rows]))
        wh.con.execute("INSERT INTO papers (paper_id, source, external_id, doi) "
                       "SELECT paper_id, source, external_id, doi FROM _bench_rows")


def timed_run(settings, counts, **kw):
    from pipeline.steps.enrich import run_enrich

    before = dict(counts)
    t0 = time.perf_counter()
    out = run_enrich(settings, **kw)
    wall = time.perf_counter() - t0
    calls = {k: counts.get(k, 0) - before.get(k, 0) for k in set(counts) | set(before)}
    processing = wall - out["rate_wait_s"] - out["backoff_wait_s"] - out["http_s"]
    return {"wall_s": round(wall, 2), "server_calls": calls, "client_calls": out["calls"], "http_calls": out["http_calls"],
            "rate_wait_s": out["rate_wait_s"], "http_s": out["http_s"], "processing_s": round(processing, 2),
            "from_raw": out["from_raw"], "resolved": out["resolved"], "edges": out["edges"],
            "works_inserted": out["tables"]["works"]["inserted"], "papers": out["papers"]}


# ==== Semantic Scholar in bulk (issue 14, item 2) ===================================================
# SYNTHETIC corpus (the recordings hold a few papers, not 60,000): corpus paper i is arXiv 2601.<i>,
# with REFS references and CITES citing papers drawn from a pool of OTHERS other works; every
# OVER_EVERY-th paper has OVER_CITES citations, more than the 1,000 a /paper/batch list carries. The
# Datasets API request flow is the recorded one (releases, release, download links with the S3 host
# rewritten to the local server; the "citations" links are the recorded "papers" answer renamed).
REFS, CITES, OVER_CITES = 10, 10, 1500
CORPUS_BASE, OTHER_BASE = 10_000_000, 20_000_000


class Bulk:
    def __init__(self, papers: int, others: int, over_every: int, noise: int):
        self.n, self.others, self.over_every, self.noise = papers, others, over_every, noise

    @staticmethod
    def sha(corpus_id: int) -> str:
        return f"{corpus_id:040x}"

    def arxiv(self, i: int) -> str:
        return f"2601.{i:05d}"

    def other(self, j: int) -> dict:
        cid = OTHER_BASE + j
        return {"paperId": self.sha(cid), "corpusId": cid, "externalIds": {"CorpusId": cid}, "title": f"work {j}",
                "year": 2000 + j % 25, "citationCount": j % 100, "referenceCount": j % 50}

    def refs(self, i: int) -> list[int]:
        return [(i * 7 + k * 13) % self.others for k in range(REFS)]

    def cites(self, i: int) -> list[int]:
        n = OVER_CITES if self.over(i) else CITES
        return [(i * 11 + k * 17 + 1) % self.others for k in range(n)]

    def over(self, i: int) -> bool:
        return self.over_every > 0 and i % self.over_every == 0

    def record(self, i: int, cap: int = 1000) -> dict:
        cid = CORPUS_BASE + i
        cites = self.cites(i)
        return {"paperId": self.sha(cid), "corpusId": cid, "externalIds": {"ArXiv": self.arxiv(i), "CorpusId": cid},
                "title": f"corpus paper {i}", "year": 2026, "publicationDate": "2026-01-02", "venue": "arXiv",
                "citationCount": len(cites), "referenceCount": REFS, "influentialCitationCount": 0,
                "authors": [{"authorId": str(900_000 + i % 5000), "name": f"Author {i % 5000}"}],
                "references": [self.other(j) for j in self.refs(i)],
                "citations": [self.other(j) for j in cites[:cap]]}

    def papers_line(self, rec: dict) -> dict:
        return {"corpusid": rec["corpusId"], "externalids": rec.get("externalIds"),
                "url": f"https://www.semanticscholar.org/paper/{rec['paperId']}", "title": rec.get("title"),
                "authors": rec.get("authors") or [], "venue": rec.get("venue"), "year": rec.get("year"),
                "referencecount": rec.get("referenceCount"), "citationcount": rec.get("citationCount"),
                "influentialcitationcount": rec.get("influentialCitationCount"), "publicationtypes": None,
                "publicationdate": rec.get("publicationDate")}

    def write_files(self, out: Path, n_files: int) -> tuple[list[Path], list[Path]]:
        """The "papers" and "citations" dataset files (gzipped JSON lines), lines spread over n_files each:
        the corpus, the pool of other works, and `noise` papers + edges that touch no corpus paper."""
        import gzip

        out.mkdir(parents=True, exist_ok=True)
        pf = [gzip.open(out / f"papers_{k}.gz", "wt", compresslevel=1) for k in range(n_files)]
        cf = [gzip.open(out / f"citations_{k}.gz", "wt", compresslevel=1) for k in range(n_files)]
        cit_id = 0
        for i in range(self.n):
            rec = self.record(i)
            pf[i % n_files].write(json.dumps(self.papers_line(rec)) + "\n")
            for j in self.refs(i):
                cit_id += 1
                cf[cit_id % n_files].write(json.dumps({"citationid": cit_id, "citingcorpusid": rec["corpusId"],
                                                       "citedcorpusid": OTHER_BASE + j, "isinfluential": False,
                                                       "intents": [["background"]]}) + "\n")
            for j in self.cites(i):
                cit_id += 1
                cf[cit_id % n_files].write(json.dumps({"citationid": cit_id, "citingcorpusid": OTHER_BASE + j,
                                                       "citedcorpusid": rec["corpusId"], "isinfluential": False,
                                                       "intents": []}) + "\n")
        for j in range(self.others + self.noise):
            pf[j % n_files].write(json.dumps(self.papers_line(self.other(j))) + "\n")
        for k in range(self.noise):  # edges between non-corpus works only
            cit_id += 1
            cf[cit_id % n_files].write(json.dumps({"citationid": cit_id, "citingcorpusid": OTHER_BASE + self.others + k,
                                                   "citedcorpusid": OTHER_BASE + (k * 3) % self.others,
                                                   "isinfluential": False, "intents": None}) + "\n")
        for f in pf + cf:
            f.close()
        return [out / f"papers_{k}.gz" for k in range(n_files)], [out / f"citations_{k}.gz" for k in range(n_files)]


def start_bulk_server(bulk: Bulk, files_dir: Path):
    from urllib.parse import urlsplit

    from pytest_httpserver import HTTPServer
    from werkzeug import Response
    import re

    from devtools.replay_server import load_cassette

    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    host = server.url_for("/").rstrip("/")
    counts: dict[str, int] = {}
    by_arxiv = {f"arXiv:{bulk.arxiv(i)}": i for i in range(bulk.n)}
    by_sha = {bulk.sha(CORPUS_BASE + i): i for i in range(bulk.n)}

    def recorded(name: str) -> str:
        content = load_cassette(DATA / "s2" / name)[0]["content"].decode("utf-8")
        return content.replace("https://ai2-s2ag.s3.amazonaws.com", host)

    links = json.loads(recorded("test_get_dataset_download_links.yaml"))
    file_paths = {}
    for k, url in enumerate(links["files"]):
        file_paths[urlsplit(url).path] = files_dir / f"papers_{k}.gz"
        file_paths[urlsplit(url).path.replace("/papers/", "/citations/")] = files_dir / f"citations_{k}.gz"
    api = {"/datasets/v1/release/": recorded("test_get_available_releases.yaml"),
           "/datasets/v1/release/2025-08-19": recorded("test_get_release.yaml"),
           "/datasets/v1/release/2025-08-19/dataset/papers": json.dumps(links),
           "/datasets/v1/release/2025-08-19/dataset/citations": json.dumps(links).replace("/papers/", "/citations/")}

    def count(kind: str) -> None:
        counts[kind] = counts.get(kind, 0) + 1

    def handle(request):
        path = request.path
        if path in api:
            count("datasets_api")
            return Response(api[path], content_type="application/json")
        if path in file_paths:
            count("datasets_file")
            return Response(file_paths[path].read_bytes(), content_type="binary/octet-stream")
        if path.endswith("/paper/batch"):
            count("batch")
            ids = json.loads(request.get_data())["ids"]
            recs = [bulk.record(by_arxiv[x]) if x in by_arxiv else None for x in ids]
            return Response(json.dumps(recs), content_type="application/json")
        m = re.search(r"/paper/([0-9a-f]{40})/(references|citations)$", path)
        if m and m.group(1) in by_sha:
            kind = m.group(2)
            count(kind)
            i = by_sha[m.group(1)]
            js = bulk.refs(i) if kind == "references" else bulk.cites(i)
            off, lim = int(request.args.get("offset", 0)), int(request.args.get("limit", 1000))
            key = "citedPaper" if kind == "references" else "citingPaper"
            env = {"offset": off, "data": [{key: bulk.other(j)} for j in js[off:off + lim]]}
            if off + lim < len(js):
                env["next"] = off + lim
            return Response(json.dumps(env), content_type="application/json")
        return Response(b'{"error":"unexpected"}', status=404, content_type="application/json")

    server.expect_request(re.compile(".*")).respond_with_handler(handle)
    return server, counts


def bulk_seed(settings, bulk: Bulk, n: int) -> None:
    import pyarrow as pa
    from pipeline.warehouse import Warehouse

    ids = [bulk.arxiv(i) for i in range(n)]
    with Warehouse(settings) as wh:
        wh.init()
        wh.con.register("_bench_rows", pa.table({"paper_id": ids}))
        wh.con.execute("INSERT INTO papers (paper_id, source, external_id) SELECT paper_id, 'arxiv', paper_id FROM _bench_rows")


def bulk_run(settings, counts, label: str) -> dict:
    from pipeline.steps.enrich import run_enrich
    from pipeline.warehouse import Warehouse

    before = dict(counts)
    t0 = time.perf_counter()
    out = run_enrich(settings)
    wall = time.perf_counter() - t0
    calls = {k: counts.get(k, 0) - before.get(k, 0) for k in counts if counts.get(k, 0) - before.get(k, 0)}
    with Warehouse(settings) as wh:
        tables = dict(zip(("works", "citations", "enriched"), wh.con.execute(
            "SELECT (SELECT count(*) FROM works), (SELECT count(*) FROM citations), "
            "(SELECT count(*) FROM papers WHERE s2_enriched_at IS NOT NULL)").fetchall()[0]))
    ds = out.get("datasets") or {}
    res = {"mode": label, "wall_s": round(wall, 1), "requests": sum(calls.values()), "server_calls": calls,
           "over_cap_papers": out.get("over_cap", 0), "rate_wait_s": round(out["rate_wait_s"] + ds.get("rate_wait_s", 0.0), 1),
           **({"duckdb_load_s": ds["load_s"], "downloaded_mb": round(ds["bytes_downloaded"] / 1e6, 1)} if ds else {}),
           **tables}
    print(json.dumps(res), flush=True)
    return res


def bulk_main(args) -> int:
    import logging
    import subprocess

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    from pipeline.settings import Settings

    results: dict = {"machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpu, python {platform.python_version()}",
                     "uptime_before": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
                     "papers": args.papers, "others": args.others, "noise": args.noise, "over_every": args.over_every,
                     "delay_s": args.delay}
    bulk = Bulk(args.papers, args.others, args.over_every, args.noise)
    tmp = Path(tempfile.mkdtemp(prefix="bench-s2-bulk-"))
    t0 = time.perf_counter()
    bulk.write_files(tmp / "files", 30)
    results["generate_files_s"] = round(time.perf_counter() - t0, 1)
    results["files_mb"] = round(sum(p.stat().st_size for p in (tmp / "files").iterdir()) / 1e6, 1)
    server, counts = start_bulk_server(bulk, tmp / "files")
    runs = []
    try:
        base = dict(s2_api_url=server.url_for("/graph/v1").rstrip("/"), retry_max_backoff_s=1.0, s2_delay_s=args.delay)
        # today's per-paper path: a smaller run; requests are 1 per 500 papers + 2 per paper (extrapolated)
        s = Settings.load(warehouse=tmp / "per-paper", s2_mode="per-paper", **{**base, "s2_delay_s": 0.0})
        bulk_seed(s, bulk, args.per_paper_papers)
        r = bulk_run(s, counts, "per-paper")
        r["papers"] = args.per_paper_papers
        # extrapolated to the whole corpus at the default rate (1 request/s): the wall time is the requests
        r["extrapolated"] = {"papers": args.papers, "requests": math.ceil(args.papers / 500) + 2 * args.papers
                             + round(r["server_calls"].get("citations", 0) + r["server_calls"].get("references", 0)
                                     - 2 * args.per_paper_papers) * args.papers // args.per_paper_papers}
        r["extrapolated"]["wall_h_at_1_per_s"] = round(r["extrapolated"]["requests"] / 3600, 1)
        runs.append(r)
        s = Settings.load(warehouse=tmp / "batch", s2_mode="batch", **base)
        bulk_seed(s, bulk, args.papers)
        r = bulk_run(s, counts, "batch")
        r["papers"] = args.papers
        runs.append(r)
        s = Settings.load(warehouse=tmp / "datasets", s2_mode="datasets", s2_api_key="bench-key",
                          s2_datasets_release="2025-08-19", **base)
        bulk_seed(s, bulk, args.papers)
        r = bulk_run(s, counts, "datasets")
        r["papers"] = args.papers
        runs.append(r)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    results["runs"] = runs
    results["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "s2_bulk.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    batch, ds = runs[1], runs[2]
    paged = sum(v for k, v in batch["server_calls"].items() if k in ("references", "citations"))
    ok = (batch["server_calls"].get("batch", 0) <= args.papers / 100 and ds["requests"] <= 1000
          and batch["enriched"] == ds["enriched"] == args.papers)
    print(f"batch: {batch['server_calls'].get('batch', 0)} batch requests + {paged} pages for "
          f"{batch['over_cap_papers']} papers over the cap; datasets: {ds['requests']} requests")
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bulk", action="store_true", help="issue 14: per-paper vs batch vs datasets on a synthetic corpus")
    ap.add_argument("--others", type=int, default=200_000, help="--bulk: works outside the corpus that it cites or is cited by")
    ap.add_argument("--noise", type=int, default=200_000, help="--bulk: dataset papers/edges that touch no corpus paper")
    ap.add_argument("--over-every", type=int, default=1000, help="--bulk: every N-th paper has more citations than a batch list holds")
    ap.add_argument("--per-paper-papers", type=int, default=1000, help="--bulk: papers of the (extrapolated) per-paper run")
    ap.add_argument("--papers", type=int, default=1000)
    ap.add_argument("--delay", type=float, default=0.02, help="s2_delay_s for the big run (default rate is 1.0)")
    ap.add_argument("--real-rate-papers", type=int, default=20, help="papers for the run at s2_delay_s=1.0 (0 = skip)")
    args = ap.parse_args()
    if args.bulk:
        return bulk_main(args)

    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log per request
    from pipeline.settings import Settings

    paper = json.loads((DATA / "s2" / "Paper.json").read_bytes())
    recs = paper["citations"][: args.papers]
    if len(recs) < args.papers:
        raise SystemExit(f"only {len(recs)} recorded papers available")
    records, rows = {}, []
    for i, rec in enumerate(recs):
        row, lookup = lookup_of(rec)
        records[lookup] = json.dumps(rec).encode("utf-8")
        rows.append({"paper_id": row["external_id"] if row["source"] == "arxiv" else f"bench:{i}", **row})
    references_page = json.dumps({"offset": 0, "data": [{"citedPaper": r} for r in paper["references"]]}).encode()
    from devtools.replay_server import load_cassette

    empty = load_cassette(DATA / "s2" / "test_empty_paginated_results.yaml")[0]["content"]
    server, counts = start_server(records, references_page, empty)
    tmp = Path(tempfile.mkdtemp(prefix="bench-s2-"))
    results: dict = {"machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpu, python {platform.python_version()}",
                     "papers": args.papers, "delay_s": args.delay}
    try:
        base = dict(s2_api_url=server.url_for("/graph/v1").rstrip("/"), retry_max_backoff_s=1.0)
        s = Settings.load(warehouse=tmp / "wh", s2_delay_s=args.delay, **base)
        seed(s, rows)
        results["fetch"] = timed_run(s, counts)
        results["fetch"]["expected_batch_calls"] = math.ceil(args.papers / s.s2_batch_size)
        results["rerun"] = timed_run(s, counts)
        s.db_path.unlink()
        seed(s, rows)
        results["lost_warehouse_rerun"] = timed_run(s, counts)
        if args.real_rate_papers:
            s1 = Settings.load(warehouse=tmp / "wh1", s2_delay_s=1.0, **base)
            seed(s1, rows[: args.real_rate_papers])
            results["default_rate"] = {"papers": args.real_rate_papers, **timed_run(s1, counts)}
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "s2.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    f = results["fetch"]
    ok = (f["server_calls"].get("batch") == f["expected_batch_calls"]
          and results["rerun"]["http_calls"] == 0 and results["lost_warehouse_rerun"]["http_calls"] == 0)
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
