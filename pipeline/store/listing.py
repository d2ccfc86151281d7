"""The snapshots of a store, in the shape of :func:`pipeline.snapshots.list_snapshots` (``paperkb snapshots list
--store``): id, created_at, current, counts, model, bytes, bytes_new, status, problems, pinned_by."""

from __future__ import annotations

from typing import Any

from pipeline.store.leases import read_pins
from pipeline.store.s3 import S3Store


def list_store(url: str) -> list[dict[str, Any]]:
    """Every snapshot whose manifest is in the store, oldest first (a GET per manifest)."""
    store = S3Store(url)
    cur, _ = store.current()
    live, _ = read_pins(store)
    have = store.object_names()
    out: list[dict[str, Any]] = []
    for sid in store.snapshot_ids():
        m: dict[str, Any] = store.manifest(sid) or {}
        files: dict[str, str] = m["files"] if isinstance(m.get("files"), dict) else {}
        missing = sorted({sha for sha in files.values() if sha not in have})
        sizes: dict[str, Any] = m["sizes"] if isinstance(m.get("sizes"), dict) else {}
        model: dict[str, Any] = m["model"] if isinstance(m.get("model"), dict) else {}
        out.append({"snapshot_id": sid, "path": str(store.url.at(sid)), "created_at": m.get("created_at"),
                    "current": sid == cur, "counts": m.get("counts") if isinstance(m.get("counts"), dict) else {},
                    "model": model.get("name"), "bytes": sum(v for v in sizes.values() if isinstance(v, int)),
                    "bytes_new": m.get("bytes_new") if isinstance(m.get("bytes_new"), int) else None,
                    "status": "damaged" if missing else "ok",
                    "problems": [f"{len(missing)} object(s) missing from the store"] if missing else [],
                    "pinned_by": live.get(sid, [])})
    out.sort(key=lambda s: (str(s["created_at"] or ""), s["snapshot_id"]))
    return out
