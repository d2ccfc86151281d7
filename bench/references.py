"""Benchmark: reference lists of the 10 real PDFs -> records, our rules against refextract.

- split: references found per paper against the true count (``counts`` in
  tests/fixtures/reference_labels.json, counted by reading the lists);
- fields: precision / recall / F1 per field on the hand labels (the labels' raw strings are
  parsed, so a split error does not also count as a field error), for ``rules``
  (``pipeline.sources.pdf.references.parse_reference``) and ``refextract`` (INSPIRE's reference
  extractor, ``extract_references_from_string`` on each string; it is not a dependency of the
  project: its column is skipped when it is not installed);
- time per paper: layout (open + ``layout`` + ``assign_kinds``, what extraction already pays) and
  the reference step on top (section blocks + split + parse with the rules), best of ``--repeat``;
  refextract's time per paper is the sum over that paper's labelled strings, knowledge-base loading
  (its first call) reported apart.

    .venv/bin/python -m bench.references
    .venv/bin/python -m bench.references --repeat 3

Held-out (``--heldout DIR``): the same field scores and split counts on PDFs the rules were not
written on, against ``bench/heldout_reference_labels.json`` (6 arXiv PDFs of a public GitHub
repository at a fixed commit; the labels give each file's path there and its sha256, and the PDFs
in DIR are matched by sha256, whatever their names). The split is the one extraction runs
(``find_figures`` + ``assign_kinds`` + ``reference_entries``). Skipped with one line when DIR is
absent; ``--misses`` prints every wrong field.

    .venv/bin/python -m bench.references --heldout /tmp/heldout
"""

from __future__ import annotations

import argparse
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
LABELS = REPO / "tests" / "fixtures" / "reference_labels.json"
HELDOUT_LABELS = REPO / "bench" / "heldout_reference_labels.json"
OUT = REPO / "bench" / "out"


def refextract_parse(text: str) -> Any:
    """refextract's fields for one reference string, as a ``Reference``."""
    from refextract import extract_references_from_string

    from pipeline.sources.arxiv.ids import parse_arxiv_id
    from pipeline.sources.pdf.references import Reference, split_authors

    ref = Reference(raw=text)
    found = extract_references_from_string(text, is_only_references=True)
    if not found:
        return ref
    r = found[0]
    if r.get("author"):
        ref.authors = split_authors(" and ".join(r["author"]))
    if r.get("title"):
        ref.title = r["title"][0]
    if r.get("year"):
        try:
            ref.year = int(str(r["year"][0])[:4])
        except ValueError:
            pass
    for rn in r.get("reportnumber", []):
        try:
            ref.arxiv_id = parse_arxiv_id(rn).paper_id
            break
        except ValueError:
            continue
    if r.get("doi"):
        ref.doi = r["doi"][0].removeprefix("doi:").lower()
    if r.get("url"):
        ref.url = r["url"][0]
    if r.get("journal_title"):
        ref.venue = r["journal_title"][0]
    return ref


def heldout(pdf_dir: Path, labels_file: Path, out: Path, show_misses: bool = False) -> int:
    """Field scores and split counts of the rules on the held-out PDFs in ``pdf_dir``."""
    if not pdf_dir.is_dir():
        print(f"bench.references: held-out skipped, no directory {pdf_dir}")
        return 0
    import hashlib

    from pipeline.sources.pdf.figures import find_figures
    from pipeline.sources.pdf.reference_eval import FIELDS, evaluate, split_counts
    from pipeline.sources.pdf.references import parse_reference, reference_entries
    from pipeline.sources.pdf.text import assign_kinds, layout, open_pdf

    fixture = json.loads(labels_file.read_text(encoding="utf-8"))
    labels, truth, sources = fixture["labels"], fixture["counts"], fixture["sources"]
    by_sha = {src["sha256"]: name for name, src in sources.items()}
    found: dict[str, int] = {}
    for f in sorted(pdf_dir.glob("*.pdf")):
        data = f.read_bytes()
        name = by_sha.get(hashlib.sha256(data).hexdigest())
        if name is None:
            continue
        doc = open_pdf(data)
        try:
            laid = layout(doc)
            find_figures(doc, laid)
            assign_kinds(laid)
            found[name] = len(reference_entries(laid, doc))
        finally:
            doc.close()
    missing = sorted(set(sources) - set(found))
    if missing:
        print(f"bench.references: held-out PDFs not in {pdf_dir} (split counts skipped for them): {', '.join(missing)}")
    s, misses = evaluate(labels, parse_reference)
    print(f"held-out: {len(labels)} labelled references from {len(truth)} PDFs ({labels_file.name}); "
          f"load avg {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print()
    print(f"{'field':<10}{'rules P':>14}{'R':>7}{'F1':>7}{'tp':>5}{'fp':>5}{'fn':>5}")
    for field in FIELDS:
        sc = s[field]
        print(f"{field:<10}{sc.precision:>14.3f}{sc.recall:>7.3f}{sc.f1:>7.3f}{sc.tp:>5}{sc.fp:>5}{sc.fn:>5}")
    exact_refs = len({(m[0]["pdf"], m[0]["index"]) for m in misses})
    print(f"references with every field right: {len(labels) - exact_refs}/{len(labels)}")
    print()
    counts = {pdf: nt for pdf, nt in split_counts(found, truth).items() if pdf in found}
    print(f"{'paper':<18}{'found':>6}{'true':>6}{'labelled':>10}")
    for pdf, (n, t) in counts.items():
        print(f"{pdf:<18}{n:>6}{t:>6}{sum(1 for lab in labels if lab['pdf'] == pdf):>10}")
    exact = sum(1 for n, t in counts.values() if n == t)
    print(f"split: {exact}/{len(counts)} papers with exactly the true count; "
          f"{sum(n for n, _ in counts.values())} found, {sum(t for _, t in counts.values())} true")
    if show_misses:
        print()
        for gold, field in misses:
            pred = parse_reference(gold["raw"])
            print(f"{gold['pdf']} #{gold['index']} {field}: got {getattr(pred, field)!r}, true {gold[field]!r}")
            print(f"    {gold['raw']}")
    result = {
        "labels": len(labels),
        "scores": {f: {"precision": round(s[f].precision, 3), "recall": round(s[f].recall, 3), "f1": round(s[f].f1, 3),
                       "tp": s[f].tp, "fp": s[f].fp, "fn": s[f].fn} for f in FIELDS},
        "split": {pdf: {"found": n, "true": t} for pdf, (n, t) in counts.items()},
        "misses": [{"pdf": g["pdf"], "index": g["index"], "field": f} for g, f in misses],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"results: {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None,
                    help="results file (default bench/out/references.json, or references_heldout.json with --heldout)")
    ap.add_argument("--heldout", type=Path, metavar="DIR", help="score the held-out PDFs in DIR instead (see above)")
    ap.add_argument("--heldout-labels", type=Path, default=HELDOUT_LABELS, metavar="FILE")
    ap.add_argument("--misses", action="store_true", help="with --heldout: print every wrong field")
    args = ap.parse_args(argv)
    if args.heldout is not None:
        return heldout(args.heldout, args.heldout_labels, args.out or OUT / "references_heldout.json", args.misses)
    args.out = args.out or OUT / "references.json"
    if not PDF_DIR.is_dir():
        print(f"bench.references: no PDFs at {PDF_DIR} (set PAPERKB_SHARED_DATA)", file=sys.stderr)
        return 2
    import pymupdf

    from pipeline.sources.pdf.reference_eval import FIELDS, evaluate, split_counts
    from pipeline.sources.pdf.references import parse_reference, reference_blocks, split_references
    from pipeline.sources.pdf.text import assign_kinds, layout, open_pdf

    fixture = json.loads(LABELS.read_text(encoding="utf-8"))
    labels, truth = fixture["labels"], fixture["counts"]
    found: dict[str, int] = {}
    t_layout: dict[str, float] = {}
    t_refs: dict[str, float] = {}
    for f in sorted(PDF_DIR.glob("*.pdf")):
        data = f.read_bytes()
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            doc = open_pdf(data)
            laid = layout(doc)
            assign_kinds(laid)
            t1 = time.perf_counter()
            refs = [parse_reference(r.text) for r in split_references(reference_blocks(laid, doc))]
            t2 = time.perf_counter()
            doc.close()
            t_layout[f.name] = min(t_layout.get(f.name, 1e9), t1 - t0)
            t_refs[f.name] = min(t_refs.get(f.name, 1e9), t2 - t1)
        found[f.name] = len(refs)

    parsers: dict[str, Any] = {"rules": parse_reference}
    kb_load = None
    try:
        import refextract  # noqa: F401
    except ImportError:
        print("refextract not installed: its column is skipped (pip install refextract)")
    else:
        t0 = time.perf_counter()
        refextract_parse("A. Author. A title. Journal, 2001.")  # loads its knowledge bases
        kb_load = time.perf_counter() - t0
        parsers["refextract"] = refextract_parse
    scores: dict[str, Any] = {}
    per_paper_time: dict[str, dict[str, float]] = {name: {} for name in parsers}
    pdf_of = {lab["raw"]: lab["pdf"] for lab in labels}
    for name, fn in parsers.items():
        timed: dict[str, float] = {}

        def timed_fn(text: str, _fn: Any = fn, _timed: dict[str, float] = timed) -> Any:
            t0 = time.perf_counter()
            out = _fn(text)
            dt = time.perf_counter() - t0
            _timed[pdf_of[text]] = _timed.get(pdf_of[text], 0.0) + dt
            return out

        s, _ = evaluate(labels, timed_fn)
        scores[name] = {f: {"precision": round(s[f].precision, 3), "recall": round(s[f].recall, 3),
                            "f1": round(s[f].f1, 3), "tp": s[f].tp, "fp": s[f].fp, "fn": s[f].fn} for f in FIELDS}
        per_paper_time[name] = timed

    counts = split_counts(found, truth)
    print(f"{len(labels)} labelled references from {len(truth)} PDFs; load avg {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} CPUs; best of {args.repeat} for the timings")
    print()
    head = f"{'field':<10}" + "".join(f"{name + ' P':>14}{'R':>7}{'F1':>7}" for name in parsers)
    print(head)
    for field in FIELDS:
        row = f"{field:<10}"
        for name in parsers:
            sc = scores[name][field]
            row += f"{sc['precision']:>14.3f}{sc['recall']:>7.3f}{sc['f1']:>7.3f}"
        print(row)
    print()
    print(f"{'paper':<16}{'found':>6}{'true':>6}{'layout ms':>11}{'refs ms':>9}{'labelled':>10}"
          + "".join(f"{name + ' ms':>16}" for name in parsers))
    for pdf, (n, t) in counts.items():
        nlab = sum(1 for lab in labels if lab["pdf"] == pdf)
        row = f"{pdf:<16}{n:>6}{t:>6}{1000 * t_layout[pdf]:>11.1f}{1000 * t_refs[pdf]:>9.1f}{nlab:>10}"
        row += "".join(f"{1000 * per_paper_time[name].get(pdf, 0.0):>16.1f}" for name in parsers)
        print(row)
    exact = sum(1 for n, t in counts.values() if n == t)
    print(f"split: {exact}/{len(counts)} papers with exactly the true count; "
          f"{sum(n for n, _ in counts.values())} found, {sum(t for _, t in counts.values())} true")
    if kb_load is not None:
        print(f"refextract knowledge-base loading (first call): {kb_load:.2f} s")
    result = {
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_avg": os.getloadavg(), "pymupdf": pymupdf.__version__},
        "labels": len(labels), "scores": scores,
        "split": {pdf: {"found": n, "true": t} for pdf, (n, t) in counts.items()},
        "ms_layout": {k: round(1000 * v, 2) for k, v in t_layout.items()},
        "ms_references": {k: round(1000 * v, 2) for k, v in t_refs.items()},
        "ms_parse_labelled": {name: {k: round(1000 * v, 2) for k, v in d.items()} for name, d in per_paper_time.items()},
        "refextract_kb_load_s": kb_load,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
