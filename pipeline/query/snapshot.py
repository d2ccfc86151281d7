"""Open a published snapshot read-only.

A :class:`Snapshot` holds the resolved folder (``snapshots/<id>``), so a reader keeps reading
the same snapshot while a newer one is published and ``CURRENT`` moves on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pipeline.errors import UserError

_SNAPSHOT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _resolve(snapshots_dir: Path, snapshot_id: str | None) -> Path:
    """``snapshots/<id>`` (or the one named in ``CURRENT``); UserError when it does not exist."""
    try:  # the publish side owns resolution; keep a fallback so readers work without it
        from pipeline.snapshots import resolve
    except ImportError:
        resolve = None
    if resolve is not None:
        return Path(resolve(snapshots_dir, snapshot_id))
    if snapshot_id is not None and not _SNAPSHOT_ID.match(str(snapshot_id)):
        raise UserError(f"not a snapshot id: {snapshot_id!r}")
    if snapshot_id is None:
        current = snapshots_dir / "CURRENT"
        if not current.is_file():
            raise UserError(f"no published snapshot under {snapshots_dir} (run `paperkb publish` first)")
        snapshot_id = current.read_text().strip()
    path = snapshots_dir / snapshot_id
    if not (path / "manifest.json").is_file():
        raise UserError(f"snapshot {snapshot_id!r} does not exist under {snapshots_dir}")
    return path


@dataclass
class Snapshot:
    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def snapshot_id(self) -> str:
        return str(self.manifest.get("snapshot_id") or self.path.name)

    @cached_property
    def db(self):
        import lancedb

        return lancedb.connect(str(self.path / "lancedb"))

    def table(self, name: str):
        try:
            return self._tables[name]
        except KeyError:
            pass
        try:
            t = self.db.open_table(name)
        except (FileNotFoundError, ValueError) as exc:
            raise UserError(f"snapshot {self.snapshot_id} has no {name!r} table ({exc})") from None
        self._tables[name] = t
        return t

    def has_table(self, name: str) -> bool:
        try:
            self.table(name)
            return True
        except UserError:
            return False

    @cached_property
    def _tables(self) -> dict:
        return {}

    @property
    def catalog_path(self) -> Path:
        return self.path / "catalog.duckdb"

    def catalog(self):
        """A read-only DuckDB connection to the snapshot's catalog (caller closes it)."""
        import duckdb

        if not self.catalog_path.is_file():
            raise UserError(f"snapshot {self.snapshot_id} has no catalog.duckdb")
        return duckdb.connect(str(self.catalog_path), read_only=True)


def open_snapshot(settings_or_root, snapshot_id: str | None = None) -> Snapshot:
    """Open ``snapshot_id`` (or ``CURRENT``) read-only.

    ``settings_or_root``: a Settings (uses ``settings.snapshots_dir``), a snapshots folder, or a
    snapshot folder itself (one holding ``manifest.json``).
    """
    if hasattr(settings_or_root, "snapshots_dir"):
        root = Path(settings_or_root.snapshots_dir)
    else:
        root = Path(settings_or_root)
    if snapshot_id is None and (root / "manifest.json").is_file():
        path = root
    else:
        path = _resolve(root, snapshot_id)
    try:
        manifest = json.loads((path / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"snapshot at {path} has no readable manifest.json ({exc})") from None
    return Snapshot(path=path.resolve(), manifest=manifest)
