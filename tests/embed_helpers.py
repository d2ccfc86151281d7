"""Small real warehouses for the embed/publish tests (built from ../shared/data into tmp folders)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from pipeline.settings import Settings


def cisi_subset(shared_data: Path, out_dir: Path, n: int) -> Path:
    """The first ``n`` records of the real CISI.ALL, written as a SMART file under ``out_dir``."""
    text = (shared_data / "collections" / "cisi" / "CISI.ALL").read_text(encoding="utf-8", errors="replace")
    starts = [m.start() for m in re.finditer(r"^\.I ", text, flags=re.M)]
    end = starts[n] if n < len(starts) else len(text)
    out_dir.mkdir(parents=True, exist_ok=True)
    f = out_dir / "CISI.ALL"
    f.write_text(text[:end], encoding="utf-8")
    return f


def smart_head(src: Path, out_dir: Path, n: int) -> Path:
    """The first ``n`` records of the SMART file ``src`` (a test collection's documents), written under ``out_dir``
    with the same file name."""
    text = src.read_text(encoding="utf-8", errors="replace")
    starts = [m.start() for m in re.finditer(r"^\.I ", text, flags=re.M)]
    out_dir.mkdir(parents=True, exist_ok=True)
    f = out_dir / src.name
    f.write_text(text[:starts[n]] if n < len(starts) else text, encoding="utf-8")
    return f


def cacm_without_last(shared_data: Path, out_dir: Path, drop: int) -> Path:
    """The real CACM without its last ``drop`` records, written as a SMART file under ``out_dir`` (a folder
    ``import-collection`` reads as CACM)."""
    text = (shared_data / "collections" / "cacm" / "cacm.all").read_text(encoding="utf-8", errors="replace")
    starts = [m.start() for m in re.finditer(r"^\.I ", text, flags=re.M)]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "cacm.all").write_text(text[:starts[-drop]], encoding="utf-8")
    return out_dir


def import_cisi_subset(settings: Settings, shared_data: Path, n: int) -> dict:
    from pipeline.sources.local_corpus import import_collection

    f = cisi_subset(shared_data, settings.warehouse.parent / "cisi_subset", n)
    return import_collection(settings, f, fmt="smart", name="cisi")


def add_pdf_paper(settings: Settings, shared_data: Path, arxiv_id: str, *, references: bool = False) -> dict:
    """Extract a real arXiv PDF with the full-text extractor and load paper, chunks and figures (and, with
    ``references``, its reference list: ``paperkb graph`` links it)."""
    import pyarrow as pa

    from pipeline.steps.fulltext import extract_pdf
    from pipeline.warehouse import Warehouse

    data = (shared_data / "arxiv" / "pdf" / f"{arxiv_id}.pdf").read_bytes()
    ex = extract_pdf(data, arxiv_id, settings)
    title = next((c["text"].split("\n")[0] for c in ex.chunks if c["ordinal"] == 0), arxiv_id)[:200]
    with Warehouse(settings) as wh:
        wh.init()
        wh.upsert("papers", pa.table({"paper_id": [arxiv_id], "source": ["arxiv"], "external_id": [arxiv_id],
                                      "title": [title], "abstract": [ex.abstract],
                                      "categories": pa.array([["cs.CL"]], pa.list_(pa.string())),
                                      "primary_category": ["cs.CL"], "year": pa.array([2014], pa.int32())}),
                  keys=["paper_id"])
        wh.upsert("chunks", pa.Table.from_pylist(ex.chunks), keys=["chunk_id"])
        if ex.figures:
            wh.upsert("figures", pa.Table.from_pylist(ex.figure_rows()), keys=["figure_id"])
        if references and ex.references:
            from pipeline.steps.fulltext import REFERENCE_SCHEMA

            wh.upsert("paper_references", pa.Table.from_pylist(ex.references, schema=REFERENCE_SCHEMA),
                      keys=["reference_id"])
    return {"chunks": len(ex.chunks), "figures": len(ex.figures)}


def clone_settings(src: Settings, dest_root: Path, **overrides) -> Settings:
    """A copy of a whole warehouse folder (DuckDB, vector cache, LanceDB, snapshots) under dest_root."""
    dest = dest_root / "warehouse"
    shutil.copytree(src.warehouse, dest, symlinks=True)
    data = src.model_dump()
    data.update(warehouse=dest, **overrides)
    return Settings(**data)


def make_settings(root: Path, **overrides) -> Settings:
    return Settings(warehouse=root / "warehouse", **overrides)
