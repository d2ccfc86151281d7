"""Benchmark: our PDF extraction against bare PyMuPDF ``page.get_text()`` on the 10 real PDFs.

Side by side in one run, interleaved per paper and repeated (the fastest of ``--repeat`` runs is
kept, which removes most of the noise of a shared machine). Both wall-clock and CPU time of this
process (``time.process_time``; every method is single-threaded) are kept: on a loaded machine
the CPU-time ratios are the steadier ones.

- ``bare``: open the PDF from bytes, ``page.get_text()`` on every page (the floor);
- ``extract``: our extraction without chunking: validation, MuPDF's JSON text page per page,
  layout (reading order, headers, footers, stamp, page numbers), figure legends (with a graphics
  run on the few pages where a caption's font does not decide), headings, abstract, body text;
- ``extract+chunk``: the same plus token windows with the embedding model's tokenizer (what
  ``paperkb fulltext`` does per paper; the tokenizer is loaded once before timing).

Memory: after the timing, the full extraction runs ``--passes`` times over the 10 papers in this
process and the RSS is read after every paper; flat means the last pass ends where the first did.

    .venv/bin/python -m bench.fulltext               # 5 repeats, 3 memory passes
    .venv/bin/python -m bench.fulltext --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PAPERKB_SHARED_DATA", REPO.parent / "shared" / "data"))
PDF_DIR = SHARED / "arxiv" / "pdf"


def _bare(data: bytes) -> int:
    import pymupdf

    with pymupdf.open(stream=data, filetype="pdf") as doc:
        n = 0
        for page in doc:
            n += len(page.get_text())
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "fulltext.json")
    args = ap.parse_args(argv)
    if not PDF_DIR.is_dir():
        print(f"bench.fulltext: no PDFs at {PDF_DIR} (set PAPERKB_SHARED_DATA)", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import psutil
    import pymupdf

    from pipeline.embedding.chunking import load_tokenizer, tokenizer_path
    from pipeline.steps.fulltext import extract_pdf
    from pipeline.settings import Settings

    settings = Settings.load()
    load_tokenizer(tokenizer_path(settings))
    files = sorted(PDF_DIR.glob("*.pdf"))
    papers = [(f.stem, f.read_bytes()) for f in files]
    pages = {pid: pymupdf.open(stream=d, filetype="pdf").page_count for pid, d in papers}
    methods = {
        "bare": lambda pid, d: _bare(d),
        "extract": lambda pid, d: extract_pdf(d, pid, settings, chunk=False),
        "extract+chunk": lambda pid, d: extract_pdf(d, pid, settings),
    }
    for pid, d in papers:  # warm-up: font caches, regex compilation, imports
        for fn in methods.values():
            fn(pid, d)
    best: dict[str, dict[str, float]] = {m: {} for m in methods}
    best_cpu: dict[str, dict[str, float]] = {m: {} for m in methods}
    for _ in range(args.repeat):
        for pid, d in papers:
            for m, fn in methods.items():  # interleaved: the same moment of machine load for all three
                c0, t0 = time.process_time(), time.perf_counter()
                fn(pid, d)
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                best[m][pid] = min(dt, best[m].get(pid, float("inf")))
                best_cpu[m][pid] = min(dc, best_cpu[m].get(pid, float("inf")))
    total_pages = sum(pages.values())
    rows = []
    for pid, _ in papers:
        rows.append({"paper": pid, "pages": pages[pid],
                     **{f"{m}_pages_per_s": round(pages[pid] / best[m][pid], 1) for m in methods},
                     "ratio_extract": round(best["extract"][pid] / best["bare"][pid], 2),
                     "ratio_extract_chunk": round(best["extract+chunk"][pid] / best["bare"][pid], 2)})
    totals = {m: sum(best[m].values()) for m in methods}
    summary: dict[str, Any] = {m: {"seconds": round(totals[m], 3), "pages_per_s": round(total_pages / totals[m], 1)} for m in methods}
    summary["ratio_extract_vs_bare"] = round(totals["extract"] / totals["bare"], 2)
    summary["ratio_extract_chunk_vs_bare"] = round(totals["extract+chunk"] / totals["bare"], 2)
    cpu = {m: sum(best_cpu[m].values()) for m in methods}
    summary["cpu_seconds"] = {m: round(cpu[m], 3) for m in methods}
    summary["cpu_ratio_extract_vs_bare"] = round(cpu["extract"] / cpu["bare"], 2)
    summary["cpu_ratio_extract_chunk_vs_bare"] = round(cpu["extract+chunk"] / cpu["bare"], 2)

    # memory across papers
    proc = psutil.Process()
    gc.collect()
    rss = []
    for p in range(args.passes):
        for pid, d in papers:
            ex = extract_pdf(d, pid, settings)
            del ex
            rss.append({"pass": p + 1, "paper": pid, "rss_mb": round(proc.memory_info().rss / 2**20, 1)})
    first_pass_end = rss[len(papers) - 1]["rss_mb"]
    last = rss[-1]["rss_mb"]
    memory = {"rss_mb_after_pass_1": first_pass_end, "rss_mb_after_last_pass": last,
              "growth_mb": round(last - first_pass_end, 1), "max_rss_mb": max(r["rss_mb"] for r in rss),
              "per_paper": rss}

    result = {
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_avg": os.getloadavg(), "pymupdf": pymupdf.__version__},
        "repeat": args.repeat, "papers": len(papers), "pages": total_pages,
        "summary": summary, "per_paper": rows, "memory": memory,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))

    print(f"{len(papers)} PDFs, {total_pages} pages, best of {args.repeat} interleaved runs "
          f"(load avg {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'paper':<12}{'pages':>6}{'bare p/s':>10}{'extract p/s':>13}{'+chunk p/s':>12}{'x bare':>8}{'x bare+chunk':>14}")
    for r in rows:
        print(f"{r['paper']:<12}{r['pages']:>6}{r['bare_pages_per_s']:>10}{r['extract_pages_per_s']:>13}"
              f"{r['extract+chunk_pages_per_s']:>12}{r['ratio_extract']:>8}{r['ratio_extract_chunk']:>14}")
    print(f"{'all':<12}{total_pages:>6}{summary['bare']['pages_per_s']:>10}{summary['extract']['pages_per_s']:>13}"
          f"{summary['extract+chunk']['pages_per_s']:>12}{summary['ratio_extract_vs_bare']:>8}"
          f"{summary['ratio_extract_chunk_vs_bare']:>14}")
    print(f"CPU time (best of {args.repeat}): bare {cpu['bare']:.3f} s, extract {cpu['extract']:.3f} s "
          f"({summary['cpu_ratio_extract_vs_bare']}x), extract+chunk {cpu['extract+chunk']:.3f} s "
          f"({summary['cpu_ratio_extract_chunk_vs_bare']}x)")
    print(f"RSS after pass 1: {first_pass_end} MB, after pass {args.passes}: {last} MB "
          f"(growth {memory['growth_mb']} MB over {len(rss) - len(papers)} more papers)")
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
