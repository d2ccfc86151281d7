"""Benchmark: what a night adds to the snapshots (issue 31 part 1: every part of a snapshot grows with the change).

Two runs, each side by side with today's ``main`` (its code unpacked by ``git archive main`` into a temporary
folder, or ``--old-code DIR``); every step is the product's own, run by the checkout under test:

``cisi``: CISI (the real collection beside the checkout): all but the last 1% of its papers imported, then
``graph``, ``embed`` (the real encoder; vectors cached) and ``publish``; then the last 1% imported and the same
steps again. Target: the second snapshot adds at most 20% of the first's disk.

``synthetic``: a warehouse of ``--papers`` synthetic papers (arXiv-like increasing ids, three authors, 9 body
passages + the abstract each, 20 references each to earlier papers and to outside works) goes through the real
``graph`` step, an embed with synthetic unit vectors (the product's ``build_*_table``, ``sync_table`` and
``ensure_indexes``: only the encoder is left out) and ``run_publish``; then ``--nights`` nights of ``--grow``
new papers with their passages and references, the graph recomputed (every PageRank value moves), embed,
publish. Targets: each night's publish adds at most 5% of the first snapshot's disk and takes at most 5% of
its time.

What a night adds: the bytes of the new snapshot's files whose inode no earlier snapshot holds (a hard link to
an earlier snapshot's file costs nothing), by part of the snapshot.

    .venv/bin/python -m bench.publish_night cisi
    .venv/bin/python -m bench.publish_night synthetic [--papers 100000] [--nights 30] [--grow 0.01]
    options: --layout new|old|both (default both), --old-code DIR, --keep DIR, --profile DIR (cProfile each publish)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
SHARED = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))
DIM = 384
FACTS = {"name": "synthetic-384", "query_model": "synthetic-384", "dim": DIM, "key": "synthetic-384",
         "doc_format": "{text}", "path": "", "query_path": "", "truncate_dim": None, "max_seq_length": None,
         "backend": "torch", "precision": "fp32"}


# ---- measuring -------------------------------------------------------------------------------------------
def part_of(rel: str) -> str:
    """Which part of a snapshot a file belongs to (the rows of the report)."""
    parts = rel.split("/")
    if parts[0] == "lancedb" and len(parts) > 1:
        return "lancedb/" + parts[1].removesuffix(".lance")
    if parts[0] in ("catalog", "catalog.duckdb"):
        return "catalog"
    return parts[0]


def _files(folder: Path):
    for dirpath, _dirs, names in os.walk(folder):
        for n in names:
            p = Path(dirpath, n)
            yield p, p.stat()


def new_bytes(folder: Path, seen: set[tuple[int, int]]) -> dict[str, int]:
    """Bytes per part of ``folder``'s files whose (device, inode) is not in ``seen``; adds them to ``seen``."""
    out: dict[str, int] = {}
    for p, st in _files(folder):
        key = (st.st_dev, st.st_ino)
        if key not in seen:
            seen.add(key)
            k = part_of(p.relative_to(folder).as_posix())
            out[k] = out.get(k, 0) + st.st_size
    return out


# ---- CISI --------------------------------------------------------------------------------------------------
def smart_head(text: str, n: int | None, out: Path) -> Path:
    """The first ``n`` records (all with None) of the SMART collection ``text`` as the file ``out``."""
    starts = [m.start() for m in re.finditer(r"^\.I ", text, flags=re.M)]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text[:starts[n] if n is not None and n < len(starts) else len(text)], encoding="utf-8")
    return out


def cisi_head(out_dir: Path, n: int | None) -> Path:
    """The first ``n`` records of the real CISI.ALL (all with None) as a SMART file under ``out_dir``."""
    text = (SHARED / "collections" / "cisi" / "CISI.ALL").read_text(encoding="utf-8", errors="replace")
    return smart_head(text, n, out_dir / "CISI.ALL")


def cisi_night(settings, collection: Path) -> dict:
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.embed import run_embed
    from pipeline.steps.graph import run_graph
    from pipeline.steps.publish import run_publish

    t: dict[str, float] = {}
    t0 = time.perf_counter()
    import_collection(settings, collection, fmt="smart", name="cisi")
    t["import_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_graph(settings)
    t["graph_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    emb = run_embed(settings)
    t["embed_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    pub = run_publish(settings)
    t["publish_s"] = time.perf_counter() - t0
    return {"timings": {k: round(v, 2) for k, v in t.items()}, "snapshot": pub["snapshot_id"],
            "lance_rows_written": {k: c["inserted"] + c["updated"] for k, c in emb["changes"].items()}}


def run_cisi(work: Path, grow: float) -> dict:
    """Both CISI nights in ``work`` with the checkout on ``sys.path``."""
    from pipeline.settings import Settings

    text = (SHARED / "collections" / "cisi" / "CISI.ALL").read_text(encoding="utf-8", errors="replace")
    n = len(re.findall(r"^\.I ", text, flags=re.M))
    first_n = n - max(1, round(n * grow))
    cache = Path(os.environ.get("PAPERKB_BENCH_VECTOR_CACHE", ROOT / ".pytest_cache" / "d" / "paperkb-vector-cache"))
    settings = Settings(warehouse=work / "warehouse", embed_cache_dir=cache, snapshot_keep=10)
    first = cisi_night(settings, cisi_head(work / "first", first_n))
    second = cisi_night(settings, cisi_head(work / "second", None))
    root = settings.snapshots_dir
    seen: set[tuple[int, int]] = set()
    full = new_bytes(root / first["snapshot"], seen)
    added = new_bytes(root / second["snapshot"], seen)
    return {"papers_first": first_n, "papers_second": n, "first": first, "second": second,
            "first_bytes": full, "added_bytes": added, "first_total": sum(full.values()),
            "added_total": sum(added.values()),
            "added_pct": round(100 * sum(added.values()) / sum(full.values()), 2), "target_pct": 20}


# ---- synthetic ---------------------------------------------------------------------------------------------
WORDS = "list_transform(range({n}), lambda k: 'w' || CAST(pow((hash({seed}, k) % 1000003) / 1000003.0, 4) * 30000 AS INTEGER))"


def _text(n: int, seed: str) -> str:
    return f"array_to_string({WORDS.format(n=n, seed=seed)}, ' ')"


def add_papers(db: Path, start: int, stop: int, outside: int = 100_000) -> None:
    """Papers start..stop-1 (ids increase with time, as arXiv's do), their authors, 9 body passages each, their
    works and 20 references each (12 to earlier papers, 8 to ``outside`` works), straight into the warehouse."""
    import duckdb

    try:  # the code under test's change log (pipeline.catalog_changes); an older checkout's logs only its own tables
        from pipeline.catalog_changes import JOURNALED, record
    except ImportError:
        JOURNALED, record = frozenset(), None  # type: ignore[assignment]
    con = duckdb.connect(str(db))

    def write(sql: str, table: str) -> None:  # a writer of the warehouse logs what it changed, as the steps do
        keys = [r[0] for r in con.execute(sql).fetchall()]
        if record is not None and table in JOURNALED:
            record(con, table, keys)

    try:
        con.execute("BEGIN TRANSACTION")
        write(f"""
            INSERT INTO papers (paper_id, source, external_id, title, abstract, categories, primary_category, year, published)
            SELECT 'p' || lpad(i::VARCHAR, 8, '0'), 'arxiv', 'x' || i, {_text(8, "i, 't'")}, {_text(150, "i, 'a'")},
                   ['cs.' || chr(65 + (i % 20)::INTEGER)], 'cs.' || chr(65 + (i % 20)::INTEGER), 2000 + (i // 5000)::INTEGER,
                   DATE '2000-01-01' + (i // 100)::INTEGER
            FROM range({start}, {stop}) t(i) RETURNING paper_id""", "papers")
        write(f"""
            INSERT INTO authors SELECT DISTINCT 'a' || ((hash(i, j) % 50000)::INTEGER), 'Author ' || ((hash(i, j) % 50000)::INTEGER), NULL, NULL
            FROM range({start}, {stop}) t(i), range(3) u(j) ON CONFLICT DO NOTHING RETURNING author_id""", "authors")
        write(f"""
            INSERT INTO paper_authors (paper_id, position, author_id, name)
            SELECT 'p' || lpad(i::VARCHAR, 8, '0'), j, 'a' || ((hash(i, j) % 50000)::INTEGER), 'Author ' || ((hash(i, j) % 50000)::INTEGER)
            FROM range({start}, {stop}) t(i), range(3) u(j) RETURNING paper_id""", "paper_authors")
        write(f"""
            INSERT INTO chunks (chunk_id, paper_id, ordinal, section, role, char_start, char_end, text, n_tokens, content_hash)
            SELECT 'p' || lpad(i::VARCHAR, 8, '0') || '#' || j, 'p' || lpad(i::VARCHAR, 8, '0'), j, 'Section ' || j, 'body',
                   j * 400, j * 400 + 400, {_text(60, "i, j")}, 60, md5(i::VARCHAR || '-' || j)
            FROM range({start}, {stop}) t(i), range(9) u(j) RETURNING chunk_id""", "chunks")
        write(f"""
            INSERT INTO works (work_id, paper_id, title, year)
            SELECT 'W' || lpad(i::VARCHAR, 8, '0'), 'p' || lpad(i::VARCHAR, 8, '0'), 'title ' || i, 2000 + (i // 5000)::INTEGER
            FROM range({start}, {stop}) t(i) RETURNING work_id""", "works")
        write(f"""
            INSERT INTO works (work_id, title, year)
            SELECT 'X' || lpad(j::VARCHAR, 8, '0'), 'outside work ' || j, 1990 + (j % 30)::INTEGER
            FROM range({outside}) t(j) ON CONFLICT DO NOTHING RETURNING work_id""", "works")
        write(f"""
            INSERT INTO citations (citing_work_id, cited_work_id, source)
            SELECT DISTINCT 'W' || lpad(i::VARCHAR, 8, '0'),
                   CASE WHEN k < 12 AND i > 0 THEN 'W' || lpad((hash(i, k) % i)::VARCHAR, 8, '0')
                        ELSE 'X' || lpad(((hash(i, k) % {outside}) * (hash(i, k + 100) % 1000) // 1000)::VARCHAR, 8, '0') END,
                   's2'
            FROM range({start}, {stop}) t(i), range(20) u(k) ON CONFLICT DO NOTHING RETURNING citing_work_id""", "citations")
        con.execute("COMMIT")
    finally:
        con.close()


class SyntheticVectors:
    """A unit vector for each passage hash, drawn from the hash itself (SHAKE-256 bytes as int8 components): any
    process gives the same passage the same vector, as the vector cache does."""

    def get(self, hashes: list[str]):
        import numpy as np

        if not hashes:
            return np.zeros((0, DIM), np.float32)
        raw = b"".join(hashlib.shake_256(h.encode()).digest(DIM) for h in hashes)
        v = np.frombuffer(raw, np.int8).reshape(len(hashes), DIM).astype(np.float32) + 0.5
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return v


def synthetic_embed(settings, vectors: SyntheticVectors) -> dict:
    """The merge step without its encoder: the product's sync of the changed rows (``sync_lancedb``: source hashes
    compared, the changed rows built and written) and its index policy, with synthetic vectors."""
    from pipeline.steps import embed as E

    if not hasattr(E, "sync_lancedb"):
        return _synthetic_embed_whole(settings, vectors)

    def inputs(kind: str, rows):
        return [f"{a}\x00{b}" for a, b in zip(rows.column("title").to_pylist(), rows.column("text").to_pylist())]

    out = E.sync_lancedb(settings, FACTS, DIM, inputs, lambda hashes, _texts: vectors.get(hashes))
    E.ensure_indexes(E.db_of(settings), settings)
    E.mark_synced(settings, out, FACTS)
    if hasattr(E, "record_embed_run"):  # the embed run's row, as merge_embeddings writes it (older checkouts: none)
        E.record_embed_run(settings, out["rows"], read=out["read"],
                           encoded=sum(c["inserted"] + c["updated"] for c in out["changes"].values()))
    return {name: c["inserted"] + c["updated"] for name, c in out["changes"].items()}


def _synthetic_embed_whole(settings, vectors: SyntheticVectors) -> dict:
    """:func:`synthetic_embed` for a checkout from before the merge wrote only changed rows (``--old-code``): every row
    read, hashed, given its vector and built, then synced."""
    import duckdb
    import lancedb

    from pipeline.steps import embed as E

    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        passages, figures, papers = E.read_passages(con), E.read_figures(con), E.read_paper_meta(con)
    finally:
        con.close()
    titles, texts = passages.column("title").to_pylist(), passages.column("text").to_pylist()
    hashes = [hashlib.sha256(f"{a}\x00{b}".encode()).hexdigest() for a, b in zip(titles, texts)]
    vec = vectors.get(hashes)
    settings.lancedb_dir.mkdir(parents=True, exist_ok=True)
    db = lancedb.connect(str(settings.lancedb_dir))
    changes, rows = {}, {}
    for name, table, key in (("chunks", E.build_chunks_table(passages, hashes, vec, DIM), "chunk_id"),
                             ("papers", E.build_papers_table(papers, passages, hashes, vec, DIM), "paper_id"),
                             ("figures", E.build_figures_table(figures, [], vec[:0], DIM), "figure_id")):
        c = E.sync_table(db, name, table, key, FACTS)
        assert c is not None  # (a whole sync)
        changes[name] = c["inserted"] + c["updated"]
        rows[name] = table.num_rows
    E.ensure_indexes(db, settings)
    if hasattr(E, "record_embed_run"):  # the embed run's row, as merge_embeddings writes it (older checkouts: none)
        E.record_embed_run(settings, rows, read=len(hashes), encoded=sum(changes.values()))
    return changes


def _profiled(fn, settings, night: int):
    """``fn(settings)``, under cProfile when ``PAPERKB_BENCH_PROFILE`` names a folder (``publish-<night>.prof`` there)."""
    folder = os.environ.get("PAPERKB_BENCH_PROFILE")
    if not folder:
        return fn(settings)
    import cProfile

    Path(folder).mkdir(parents=True, exist_ok=True)
    prof = cProfile.Profile()
    try:
        return prof.runcall(fn, settings)
    finally:
        prof.dump_stats(str(Path(folder) / f"publish-{night}.prof"))


def publish_from_scratch(settings, publish) -> float:
    """Seconds of a first publish of the warehouse as it is now (no previous snapshot to link from, no BM25 terms kept):
    what a full snapshot of the last night's data costs. The snapshots and the terms are put back after."""
    from pipeline.query.bm25_stats import terms_cache

    moved = [p for p in (settings.snapshots_dir, terms_cache(settings.warehouse).parent) if p.exists()]
    for p in moved:
        os.replace(p, p.with_name(p.name + ".aside"))
    try:
        return publish(settings)["seconds"]
    finally:
        for p in (settings.snapshots_dir, terms_cache(settings.warehouse).parent):
            shutil.rmtree(p, ignore_errors=True)
        for p in moved:
            os.replace(p.with_name(p.name + ".aside"), p)


STORE_FIGURES = ("objects", "objects_uploaded", "bytes_total", "bytes_uploaded", "requests", "requests_total", "seconds")


def run_synthetic(work: Path, papers: int, nights: int, grow: float) -> dict:
    """Build and publish ``papers`` synthetic papers, then ``nights`` nights, with the checkout on ``sys.path``."""
    from pipeline.settings import Settings
    from pipeline.steps.graph import run_graph
    from pipeline.steps.publish import run_publish
    from pipeline.warehouse import Warehouse

    store = os.environ.get("PAPERKB_BENCH_STORE")  # --store: s3://bucket/prefix
    settings = Settings(warehouse=work / "warehouse", snapshot_keep=nights + 2, snapshot_min_age_h=0, snapshot_store=store)
    with Warehouse(settings) as wh:
        wh.init()
    vectors = SyntheticVectors()
    seen: set[tuple[int, int]] = set()
    rows = []
    n = 0
    for night in range(nights + 1):
        add = papers if night == 0 else max(1, round(papers * grow))
        t0 = time.perf_counter()
        add_papers(settings.db_path, n, n + add)
        n += add
        t_data = time.perf_counter() - t0
        run_graph(settings)
        t_graph = time.perf_counter() - t0 - t_data
        written = synthetic_embed(settings, vectors)
        t_embed = time.perf_counter() - t0 - t_data - t_graph
        pub = _profiled(run_publish, settings, night)
        added = new_bytes(Path(pub["path"]), seen)
        row = {"night": night, "papers": n, "chunks": pub["counts"].get("lancedb.chunks"),
               "publish_s": pub["seconds"], "added": added, "added_total": sum(added.values()),
               "snapshot_bytes": pub["bytes"], "lance_rows_written": written,
               "data_s": round(t_data, 1), "graph_s": round(t_graph, 1), "embed_s": round(t_embed, 1)}
        if "store" in pub:  # what the night sent to the store (only the objects it lacked)
            row["store"] = {k: pub["store"][k] for k in STORE_FIGURES}
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("night", "papers", "embed_s", "publish_s", "added_total", "lance_rows_written",
                                              "store")
                          if k in row}), flush=True)
    again_s = publish_from_scratch(settings.model_copy(update={"snapshot_store": None}), run_publish) if nights else None
    full, full_s = rows[0]["added_total"], rows[0]["publish_s"]
    for r in rows[1:]:
        r["added_pct"] = round(100 * r["added_total"] / full, 2)  # of the first full snapshot
        r["added_pct_of_own"] = round(100 * r["added_total"] / r["snapshot_bytes"], 2)  # of that night's snapshot
        r["time_pct"] = round(100 * r["publish_s"] / full_s, 2)
    return {"papers": papers, "nights": nights, "grow": grow, "full_bytes": full, "full_publish_s": full_s,
            "nights_detail": rows,
            # the last night beside a full publish of the same warehouse (its papers, fragments and index deltas)
            "full_again_publish_s": again_s,
            "last_time_pct_of_full_again": round(100 * rows[-1]["publish_s"] / again_s, 2) if again_s else None,
            "max_added_pct": max((r["added_pct"] for r in rows[1:]), default=None),
            "mean_added_pct": round(sum(r["added_pct"] for r in rows[1:]) / max(1, nights), 2),
            "max_added_pct_of_own": max((r["added_pct_of_own"] for r in rows[1:]), default=None),
            "max_time_pct": max((r["time_pct"] for r in rows[1:]), default=None),
            # the nightly embed (the merge with synthetic vectors and the index policy): grows with the change since
            # it compares source hashes instead of building every row
            "max_embed_s": max((r["embed_s"] for r in rows[1:]), default=None),
            "mean_time_pct": round(sum(r["time_pct"] for r in rows[1:]) / max(1, nights), 2)}


# ---- driver: each layout in its own process, with its own checkout on sys.path -------------------------------
def old_checkout(dest: Path) -> Path:
    """``main`` unpacked by ``git archive`` (no worktree registered, nothing in the repository changed)."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "main"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def run_layout(kind: str, code: Path, work: Path, args: argparse.Namespace) -> dict:
    """Run ``kind`` (cisi / synthetic) in a child process whose ``pipeline`` is the one in ``code``."""
    out = work / "result.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "_child", kind, str(work), str(out),
           str(args.papers), str(args.nights), str(args.grow)]
    env = dict(os.environ, PYTHONPATH=str(code), HF_HUB_OFFLINE="1", PAPERKB_SHARED_DATA=str(SHARED))
    env.pop("PAPERKB_WAREHOUSE", None)
    if args.profile:
        env["PAPERKB_BENCH_PROFILE"] = str(args.profile.resolve() / work.name)
    subprocess.run(cmd, env=env, check=True, cwd=str(code))
    return json.loads(out.read_text())


def child(argv: list[str]) -> int:
    kind, work, out, papers, nights, grow = argv
    import logging

    logging.basicConfig(level=logging.WARNING)
    res = run_cisi(Path(work), float(grow)) if kind == "cisi" else \
        run_synthetic(Path(work), int(papers), int(nights), float(grow))
    Path(out).write_text(json.dumps(res, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child"]:
        return child(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", nargs="?", choices=["cisi", "synthetic"], default="cisi")
    ap.add_argument("--papers", type=int, default=100_000, help="synthetic papers before the first night (10 passages each)")
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--grow", type=float, default=0.01, help="share of new papers a night")
    ap.add_argument("--layout", choices=["new", "old", "both"], default="both")
    ap.add_argument("--old-code", type=Path, help="a checkout of main (default: git archive main into a temp folder)")
    ap.add_argument("--keep", type=Path, help="build here and keep it (default: a temporary folder, removed)")
    ap.add_argument("--profile", type=Path, help="profile each synthetic publish (cProfile) into DIR/<layout>/publish-<night>.prof")
    ap.add_argument("--store", nargs="?", const="moto", metavar="ENDPOINT",
                    help="synthetic: publish to an S3-compatible store too (PAPERKB_SNAPSHOT_STORE) and report what each "
                         "night uploads; without ENDPOINT, moto's S3 server on loopback")
    args = ap.parse_args(argv)
    server = None
    if args.store:  # the children inherit AWS_ENDPOINT_URL (and moto's credentials) and the bucket's URL
        from bench.snapshot_store import store_bucket

        server, os.environ["PAPERKB_BENCH_STORE"] = store_bucket(None if args.store == "moto" else args.store)
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-night-"))
    res: dict = {"kind": args.kind, "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.machine()})",
                 "command": "python -m bench.publish_night " + " ".join(argv), "load_before": os.getloadavg()}
    try:
        for layout in (["new", "old"] if args.layout == "both" else [args.layout]):
            code = ROOT if layout == "new" else (args.old_code or old_checkout(base / "main-code"))
            t0 = time.perf_counter()
            res[layout] = run_layout(args.kind, code, base / layout, args)
            res[layout]["wall_s"] = round(time.perf_counter() - t0, 1)
            res[layout]["load_after"] = os.getloadavg()
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
        if server is not None:
            server.stop()
    OUT.mkdir(parents=True, exist_ok=True)
    name = (f"publish_night_{args.kind}" + (f"_{args.papers}" if args.kind == "synthetic" else "")
            + (f"_{args.layout}" if args.layout != "both" else "") + ".json")
    (OUT / name).write_text(json.dumps(res, indent=1))
    ok = True
    for layout in ("new", "old"):
        r = res.get(layout)
        if not r:
            continue
        if args.kind == "cisi":
            print(f"{layout}: first snapshot {r['first_total'] / 1e6:.1f} MB, the night added {r['added_total'] / 1e6:.2f} MB "
                  f"({r['added_pct']}%, target <= 20%): {json.dumps(r['added_bytes'])}")
            ok &= layout == "old" or r["added_pct"] <= 20
        else:
            print(f"{layout}: full snapshot {r['full_bytes'] / 1e6:.0f} MB in {r['full_publish_s']} s; {r['nights']} nights: "
                  f"added mean {r['mean_added_pct']}% / max {r['max_added_pct']}% of its disk, took mean {r['mean_time_pct']}% "
                  f"/ max {r['max_time_pct']}% of its time (targets <= 5%); at most {r['max_added_pct_of_own']}% of that "
                  f"night's own snapshot; the last night took {r.get('last_time_pct_of_full_again')}% of a full publish of "
                  f"its own warehouse ({r.get('full_again_publish_s')} s)")
            ok &= layout == "old" or (r["max_added_pct"] or 0) <= 5 and (r["max_time_pct"] or 0) <= 5
    print(f"results: {OUT / name}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
