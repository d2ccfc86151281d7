"""Published snapshots: find, list, read and verify them (standard library only, safe for any reader).

Layout (the contract for downstream apps)::

    warehouse/snapshots/
        CURRENT                 one line: the id of the snapshot readers should open
        <id>/manifest.json      snapshot_id, created_at, schema_version, counts, model, weights,
                                watermarks, files {relative path: sha256}
        <id>/catalog.duckdb     the analyst/app tables (papers, authors, citations, chunks, metrics...)
        <id>/lancedb/           LanceDB tables chunks, papers, figures (vectors + BM25 index)
        <id>.tmp/               a publish in progress (never opened by readers, removed if abandoned)

A snapshot folder never changes once its name is final. ``CURRENT`` is replaced atomically
(``os.replace``), so a reader sees either the old id or the new one, and a reader that resolved a
snapshot keeps reading the same files while a newer one is published.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

from pipeline.errors import UserError

SCHEMA_VERSION = 1
CURRENT = "CURRENT"
MANIFEST = "manifest.json"
TMP_SUFFIX = ".tmp"
DELETING_SUFFIX = ".deleting"


def snapshots_root(settings_or_root: Any) -> Path:
    """``settings.snapshots_dir``, a warehouse folder, or the snapshots folder itself."""
    if hasattr(settings_or_root, "snapshots_dir"):
        return Path(settings_or_root.snapshots_dir)
    p = Path(settings_or_root)
    if (p / "snapshots").is_dir() and not (p / CURRENT).exists():
        return p / "snapshots"
    return p


def is_snapshot_name(name: str) -> bool:
    return not name.startswith(".") and not name.endswith((TMP_SUFFIX, DELETING_SUFFIX)) and name != CURRENT


def current_id(settings_or_root: Any) -> str | None:
    f = snapshots_root(settings_or_root) / CURRENT
    try:
        value = f.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return value or None


def resolve(settings_or_root: Any, snapshot_id: str | None = None) -> Path:
    """The folder of snapshot ``snapshot_id``, or of ``CURRENT`` when None. UserError if missing."""
    root = snapshots_root(settings_or_root)
    if snapshot_id is None:
        snapshot_id = current_id(root)
        if snapshot_id is None:
            raise UserError(f"no published snapshot in {root}: run `paperkb publish` first")
    if not is_snapshot_name(snapshot_id) or "/" in snapshot_id or "\\" in snapshot_id:
        raise UserError(f"not a snapshot id: {snapshot_id!r}")
    path = root / snapshot_id
    if not (path / MANIFEST).is_file():
        known = ", ".join(s["snapshot_id"] for s in list_snapshots(root)[-5:]) or "none"
        raise UserError(f"snapshot {snapshot_id} not found in {root} (latest: {known})")
    return path


def read_manifest(path: Path | str) -> dict:
    """The manifest of a snapshot folder (or of the manifest file itself)."""
    p = Path(path)
    if p.is_dir():
        p = p / MANIFEST
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"no manifest at {p}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"manifest {p} is not valid JSON: {exc}") from None


def list_snapshots(settings_or_root: Any) -> list[dict]:
    """Every complete snapshot, oldest first: id, path, created_at, current, counts, model."""
    root = snapshots_root(settings_or_root)
    if not root.is_dir():
        return []
    cur = current_id(root)
    out = []
    for d in root.iterdir():
        if not d.is_dir() or not is_snapshot_name(d.name) or not (d / MANIFEST).is_file():
            continue
        try:
            m = read_manifest(d)
        except UserError:
            continue
        out.append({"snapshot_id": d.name, "path": str(d), "created_at": m.get("created_at"),
                    "current": d.name == cur, "counts": m.get("counts", {}),
                    "model": (m.get("model") or {}).get("name"), "bytes": sum(
                        (m.get("sizes") or {}).values()) if m.get("sizes") else None})
    out.sort(key=lambda s: (s["created_at"] or "", s["snapshot_id"]))
    return out


# ---- checksums ------------------------------------------------------------------------------------
def sha256_file(path: Path, bufsize: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(bufsize):
            h.update(chunk)
    return h.hexdigest()


def snapshot_files(folder: Path) -> list[str]:
    """Relative paths (POSIX) of every file in a snapshot except the manifest, sorted."""
    files = []
    for dirpath, _dirs, names in os.walk(folder):
        for n in names:
            rel = Path(dirpath, n).relative_to(folder).as_posix()
            if rel != MANIFEST:
                files.append(rel)
    return sorted(files)


def verify(settings_or_root: Any, snapshot_id: str | None = None, *, path: Path | None = None) -> list[str]:
    """Problems found by re-hashing every file against the manifest (empty list = intact)."""
    folder = Path(path) if path is not None else resolve(settings_or_root, snapshot_id)
    m = read_manifest(folder)
    expected: dict[str, str] = m.get("files") or {}
    problems = []
    if not expected:
        problems.append("manifest lists no files")
    present = set(snapshot_files(folder))
    for rel, digest in sorted(expected.items()):
        f = folder / rel
        if rel not in present:
            problems.append(f"missing file {rel}")
        elif sha256_file(f) != digest:
            problems.append(f"checksum mismatch {rel}")
    for rel in sorted(present - set(expected)):
        problems.append(f"unexpected file {rel}")
    return problems


# ---- CURRENT ----------------------------------------------------------------------------------------
def write_current(settings_or_root: Any, snapshot_id: str) -> None:
    """Point CURRENT at ``snapshot_id`` atomically (write a temp file, fsync, ``os.replace``)."""
    root = snapshots_root(settings_or_root)
    resolve(root, snapshot_id)  # must exist and be complete
    tmp = root / f".{CURRENT}.{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(snapshot_id + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, root / CURRENT)
    _fsync_dir(root)


def rollback(settings_or_root: Any, snapshot_id: str) -> dict:
    """Make an older (or any complete, intact) snapshot CURRENT again."""
    root = snapshots_root(settings_or_root)
    folder = resolve(root, snapshot_id)
    problems = verify(root, path=folder)
    if problems:
        raise UserError(f"snapshot {snapshot_id} failed verification ({problems[0]}); not rolling back to it")
    previous = current_id(root)
    write_current(root, snapshot_id)
    return {"snapshot_id": snapshot_id, "previous": previous, "path": str(folder)}


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
