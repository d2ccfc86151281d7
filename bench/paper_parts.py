"""Benchmark: what a search shows from real PDFs, before and after chunk roles (issue 27), side by side.

For each code version (``--before``: a checkout of the code before roles, e.g. ``git worktree add
/tmp/before c3b74ee``; ``after``: this checkout), in a subprocess running that version's code: import the
PDFs of each folder, run fulltext, graph, embed and publish, then the topical queries (default expansion,
7 papers each) and report every best passage shown. Each shown passage is then labelled with the role
this checkout's extraction gives the text it starts with (front matter, abstract, body, references, ...),
so "before" and "after" are judged by one rule. Also reported: the citation edges the graph holds among
the recorded PDFs against the hand-written truth of tests/test_paper_parts.py (recall, false edges).

    git worktree add /tmp/before c3b74ee
    .venv/bin/python -m bench.paper_parts --before /tmp/before [--heldout DIR]

``--heldout DIR``: a folder of other real PDFs, searched with ``HELDOUT_QUERIES`` (the held-out check;
BENCHMARKS.md says which PDFs were used and where they came from). Vectors are cached across versions.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PAPERKB_SHARED_DATA", REPO.parent / "shared" / "data"))
RECORDED_QUERIES = ["attention mechanism for machine translation", "residual networks for image classification",
                    "adaptive learning rates for stochastic optimization", "biomedical image segmentation",
                    "masked language model pre-training", "image patches as tokens for a transformer",
                    "external memory for neural networks", "over-squashing in graph neural networks",
                    "multi-head self-attention", "alignment between source and target words",
                    "batch normalization", "learning rate warmup schedule", "fine-tuning on the GLUE benchmark"]
HELDOUT_QUERIES = ["vision-and-language navigation", "parameter-efficient transfer learning with adapters",
                   "video text retrieval with CLIP", "expander graphs for message passing",
                   "planning skills in Minecraft", "landmark alignment of navigation instructions",
                   "reinforcement learning from human demonstrations", "sub-word tokens in pretrained language models"]


def _flat(text: str) -> str:
    return " ".join(re.sub(r"\W+", " ", text.lower()).split())


# ---- the subprocess: one code version (its own sys.path) -----------------------------------------
def run_version(warehouse: Path, folder: Path, queries: list[str], cache: Path) -> dict:
    from pipeline.library.pdf_folder import import_pdfs
    from pipeline.query import Searcher, open_snapshot
    from pipeline.settings import Settings
    from pipeline.steps.embed import run_embed
    from pipeline.steps.fulltext import run_fulltext
    from pipeline.steps.graph import run_graph
    from pipeline.steps.publish import run_publish

    settings = Settings.load(warehouse=warehouse, embed_cache_dir=cache)
    t0 = time.perf_counter()
    import_pdfs(settings, folder)
    run_fulltext(settings)
    run_graph(settings)
    run_embed(settings)
    run_publish(settings)
    build_s = time.perf_counter() - t0
    searcher = Searcher(open_snapshot(settings), settings)
    shown = []
    for q in queries:
        for r in searcher.search(q, k=7).results:
            shown.append({"query": q, "paper_id": r.paper_id, "chunk_id": r.chunk_id, "passage": r.passage})
    import duckdb

    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        edges = con.execute("""SELECT a.paper_id, b.paper_id FROM citations c
                               JOIN works a ON a.work_id = c.citing_work_id JOIN works b ON b.work_id = c.cited_work_id
                               WHERE a.paper_id IS NOT NULL AND b.paper_id IS NOT NULL""").fetchall()
    finally:
        con.close()
    return {"shown": shown, "edges": [list(e) for e in edges], "build_s": round(build_s, 1)}


# ---- labelling with this checkout's extraction ------------------------------------------------------
def role_index(folder: Path) -> dict[str, tuple[str, list[tuple[int, str]]]]:
    """paper_id -> (the blocks' flattened texts joined by spaces, [(start offset, role)] of each block), from
    this checkout's extraction."""
    from pipeline.library.pdf_folder import read_pdf
    from pipeline.sources.pdf.figures import find_figures
    from pipeline.sources.pdf.references import reference_entries
    from pipeline.sources.pdf.text import assign_kinds, layout, open_pdf

    out: dict[str, tuple[str, list[tuple[int, str]]]] = {}
    for f in sorted(folder.glob("*.pdf")):
        data = f.read_bytes()
        pid = read_pdf(data, f.name).paper_id
        doc = open_pdf(data)
        laid = layout(doc)
        find_figures(doc, laid)
        assign_kinds(laid)
        reference_entries(laid, doc)  # the roles as fulltext leaves them
        doc.close()
        parts, spans, pos = [], [], 0
        for b in laid.blocks():
            t = _flat(b.text)
            if not t:
                continue
            spans.append((pos, b.role))
            parts.append(t)
            pos += len(t) + 1
        out[pid] = (" ".join(parts), spans)
    return out


def label(passage: dict, index: dict[str, tuple[str, list[tuple[int, str]]]]) -> str:
    """The role of the block the passage starts in (found by its first 50 characters in the paper's text)."""
    if (passage["chunk_id"] or "").endswith("#abs"):
        return "abstract"
    full, spans = index.get(passage["paper_id"], ("", []))
    head = _flat(passage["passage"])[:50]
    at = full.find(head) if head else -1
    if at < 0:
        return "unknown"
    return [role for start, role in spans if start <= at][-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=False, help="a checkout of the code before chunk roles")
    ap.add_argument("--heldout", type=Path, help="a folder of other real PDFs")
    ap.add_argument("--child", nargs=4, metavar=("WAREHOUSE", "FOLDER", "QUERIES_JSON", "CACHE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        wh, folder, queries, cache = args.child
        print(json.dumps(run_version(Path(wh), Path(folder), json.loads(queries), Path(cache))))
        return 0

    sets = [("recorded", SHARED / "arxiv" / "pdf", RECORDED_QUERIES)]
    if args.heldout:
        sets.append(("held-out", args.heldout, HELDOUT_QUERIES))
    versions = [("after", REPO)] + ([("before", args.before)] if args.before else [])
    spec = importlib.util.spec_from_file_location("truth", REPO / "tests" / "test_paper_parts.py")
    assert spec and spec.loader
    truth_mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "tests"))
    spec.loader.exec_module(truth_mod)
    truth = {tuple(e) for e in truth_mod.TRUE_EDGES}
    tmp = Path(tempfile.mkdtemp(prefix="bench-paper-parts-"))
    results: dict[str, dict] = {}
    cache = tmp / "vectors"
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    print("| PDFs | code | best passages shown | references | front matter | abstract | body-like | unknown | edges among them (recall, false) | build s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for set_name, folder, queries in sets:
        index = role_index(folder)
        for version, code in versions:
            env = dict(os.environ, PYTHONPATH=str(code), HF_HUB_OFFLINE="1")
            out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(tmp / f"{set_name}-{version}"),
                                  str(folder), json.dumps(queries), str(cache)],
                                 cwd=code, env=env, capture_output=True, text=True, check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            results[f"{set_name}-{version}"] = res
            roles = [label(p, index) for p in res["shown"]]
            n = len(roles)
            count = {r: roles.count(r) for r in set(roles)}
            body = sum(count.get(r, 0) for r in ("body", "acknowledgements", "appendix"))
            edges = {tuple(e) for e in res["edges"]}
            rec = (f"{len(edges & truth) / len(truth):.2f}, {len(edges - truth)}" if set_name == "recorded" else "-")
            print(f"| {set_name} ({len(index)}) | {version} | {n} | {count.get('references', 0)} | {count.get('front', 0)} | "
                  f"{count.get('abstract', 0)} | {body} | {count.get('unknown', 0)} | {rec} | {res['build_s']} |", flush=True)
            bad = [p for p, r in zip(res["shown"], roles) if r in ("references", "front")]
            for p in bad[:3]:
                print(f"    e.g. {version}: {p['query']!r} -> {p['paper_id']}: {p['passage'][:90]!r}")
    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "paper_parts.json").write_text(json.dumps(results, indent=1))
    print(f"load average {os.getloadavg()[0]:.2f} at the end; every shown passage: {out_dir / 'paper_parts.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
