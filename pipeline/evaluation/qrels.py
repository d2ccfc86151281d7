"""Read evaluation queries and relevance judgements (qrels) in SMART and TREC formats.

Pure parsing, no warehouse access, so ``paperkb eval`` and the benchmarks share one reader.

Queries
- SMART (``CISI.QRY``, ``cran.qry``): records start with ``.I N``; the text is the ``.W`` field
  (``.T`` is used too when present).
- TREC: a TSV file ``qid<TAB>text`` (what ``paperkb search --queries`` reads), or classic TREC
  topics (``<top><num> Number: 1 <title> ...``).

Qrels
- SMART ``.REL`` (CISI): ``qid docid 0 0.000000`` -> every listed pair is relevant (gain 1).
- SMART ``cranqrel`` (Cranfield): ``qid docid grade`` with Cleverdon's grades, 1 = complete answer
  .. 4 = minimum interest, and -1 on exactly one document per query: the paper the query was written
  from (Cranfield queries were set by the authors of source papers). Gain = 5 - grade (grade 1 -> 4,
  grade 4 -> 1) and the source document counts as a complete answer (gain 4). This mapping reproduces
  the published baselines (BM25 nDCG@10 0.511 / MAP 0.404); dropping the -1 rows gives 0.352 / 0.286.
- TREC: ``qid iter docid rel`` (``iter`` is ``0`` or ``Q0``).

Query ids: ``cran.qry`` numbers its queries 001..365 with gaps while ``cranqrel`` numbers them 1..225
in file order. :func:`align_query_ids` maps by position when the judged ids are not the query ids.
"""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.errors import UserError
from pipeline.sources.smart import iter_smart_records, normalise_docno

__all__ = ["read_queries", "read_qrels", "align_query_ids", "detect_format"]

def _read_text(path: Path | str) -> str:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"file not found: {p}")
    return p.read_text(encoding="utf-8", errors="replace")


def detect_format(path: Path | str) -> str:
    """``smart`` when the file starts with a ``.I`` record (queries) or has SMART qrel columns, else ``trec``."""
    text = _read_text(path)
    first = next((ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")), "")
    if first.startswith(".I"):
        return "smart"
    if "\t" in first and len(first.split("\t")) == 2 or first.lstrip().startswith("<top>"):
        return "trec"
    fields = first.split()
    if len(fields) == 4 and fields[1] in {"0", "Q0"}:
        return "trec"
    return "smart"


def read_queries(path: Path | str, fmt: str | None = None) -> dict[str, str]:
    """Queries as ``{qid: text}`` in file order (qids as written, leading zeros removed)."""
    fmt = fmt or detect_format(path)
    text = _read_text(path)
    if fmt == "smart":
        queries = _smart_queries(text)
    elif fmt == "trec":
        queries = _trec_topics(text) if "<top>" in text else _tsv_queries(text)
    else:
        raise UserError(f"unknown query format {fmt!r} (use smart or trec)")
    if not queries:
        raise UserError(f"no queries found in {path}")
    return queries


def _smart_queries(text: str) -> dict[str, str]:
    """The ``.T`` and ``.W`` lines of each record, in file order, whitespace collapsed."""
    return {normalise_docno(rec.docno): " ".join(" ".join(line for name, lines in rec.fields.items()
                                                           if name in {"T", "W"} for line in lines).split())
            for rec in iter_smart_records(text)}


def _tsv_queries(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if "\t" not in line:
            raise UserError(f"line {n}: expected 'qid<TAB>query text'")
        qid, q = line.split("\t", 1)
        out[normalise_docno(qid)] = q.strip()
    return out


def _trec_topics(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for top in re.findall(r"<top>(.*?)</top>", text, flags=re.S | re.I):
        num = re.search(r"<num>\s*(?:Number:)?\s*(\S+)", top, flags=re.I)
        title = re.search(r"<title>\s*(?:Topic:)?\s*(.*?)(?=<\w+>|$)", top, flags=re.S | re.I)
        if num and title:
            out[normalise_docno(num.group(1))] = " ".join(title.group(1).split())
    return out


def read_qrels(path: Path | str, fmt: str | None = None) -> dict[str, dict[str, int]]:
    """Judgements as ``{qid: {docid: gain}}`` (ir-measures' dict form); gain 0 = judged non-relevant."""
    fmt = fmt or detect_format(path)
    if fmt not in {"smart", "trec"}:
        raise UserError(f"unknown qrels format {fmt!r} (use smart or trec)")
    out: dict[str, dict[str, int]] = {}
    for n, line in enumerate(_read_text(path).splitlines(), 1):
        f = line.split()
        if not f:
            continue
        try:
            if fmt == "trec":
                if len(f) != 4:
                    raise ValueError
                qid, docid, gain = f[0], f[2], int(float(f[3]))
            elif len(f) == 3:  # cranqrel: graded 1 (best) .. 4, -1 = the query's source paper
                qid, docid, grade = f[0], f[1], int(float(f[2]))
                gain = 5 - grade if 1 <= grade <= 4 else (4 if grade == -1 else 0)
            elif len(f) in (2, 4):  # CISI.REL (or a bare pair list): listed = relevant
                qid, docid, gain = f[0], f[1], 1
            else:
                raise ValueError
        except ValueError:
            raise UserError(f"{path}: line {n} is not a {fmt.upper()} qrels line: {line.strip()[:80]!r}") from None
        out.setdefault(normalise_docno(qid), {})[normalise_docno(docid)] = gain
    if not out:
        raise UserError(f"no judgements found in {path}")
    return out


def align_query_ids(queries: dict[str, str], qrels: dict[str, dict[str, int]]) -> tuple[dict[str, str], str | None]:
    """Make query ids match the qrels' ids; returns ``(queries, note)``.

    When every judged query id is a query id, nothing changes. Otherwise (Cranfield) the queries are
    renumbered 1..N in file order, provided that covers every judged id; else a ``UserError``.
    """
    judged = set(qrels)
    if judged <= set(queries):
        return queries, None
    by_pos = {str(i): q for i, q in enumerate(queries.values(), 1)}
    if judged <= set(by_pos):
        return by_pos, "query ids in the qrels do not match the query file: queries numbered by position (1..N)"
    missing = sorted(judged - set(queries), key=lambda s: (len(s), s))[:5]
    raise UserError(f"judged query ids not found in the query file (e.g. {', '.join(missing)})")
