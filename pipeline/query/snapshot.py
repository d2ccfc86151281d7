"""Open a published snapshot read-only: resolved, pinned and checked.

A :class:`Snapshot` holds the resolved folder (``snapshots/<id>``), so a reader keeps reading
the same snapshot while a newer one is published and ``CURRENT`` moves on. While it is open it
*pins* that snapshot (a lease file under ``snapshots/.pins/``, see :mod:`pipeline.pins`), so
retention never deletes it; :meth:`Snapshot.close` (or garbage collection, or exit) unpins it.

Opening checks the snapshot with ``stat`` alone (:func:`pipeline.snapshots.check`: the manifest's
shape, every listed file and its size, the indexes the search needs) and refuses a damaged one with
:class:`pipeline.errors.DamagedSnapshot`, one line naming what is missing.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pipeline import snapshots as _snapshots
from pipeline.errors import UserError

log = logging.getLogger(__name__)

_LANCEDB_IMPORT = threading.Lock()


def import_lancedb():
    """``lancedb``, imported whole by one thread at a time. A search's stages run side by side in threads, and two of
    them importing ``lancedb`` (the dense stage opening a table) and ``lancedb.query`` (the BM25 stage) at once, whose
    modules import each other, left one with a partly initialised module: an ImportError on the first search of
    every process reading chunk vectors from LanceDB (``query_resident_mb`` 0, or chunks with an ANN index)."""
    with _LANCEDB_IMPORT:
        import lancedb
        import lancedb.query  # noqa: F401 - the module the BM25 stage takes its queries from
    return lancedb


@dataclass
class Snapshot:
    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    pin: Any = field(default=None, repr=False, compare=False)  # pipeline.pins.Pin while pinned

    def close(self) -> None:
        """Unpin the snapshot (retention may delete it from now on). Idempotent."""
        if self.pin is not None:
            self.pin.release()

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def gone(self) -> bool:
        """True when the snapshot's folder was deleted from under this reader."""
        return not (self.path / _snapshots.MANIFEST).is_file()

    def check(self) -> list[str]:
        """The open check again (stat only): problems found now, empty when it is intact."""
        return _snapshots.check(self.path, self.manifest)

    @property
    def snapshot_id(self) -> str:
        return str(self.manifest.get("snapshot_id") or self.path.name)

    @cached_property
    def db(self):
        return import_lancedb().connect(str(self.path / "lancedb"))

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

    def dataset(self, name: str):
        """The LanceDB table ``name`` for reading with Lance itself (:class:`pipeline.query.tables.ReadTable`:
        scans, takes, counts, index listing; LanceDB is imported only for its searches). UserError if absent."""
        from pipeline.query.tables import ReadTable

        try:
            return self._datasets[name]
        except KeyError:
            pass
        if not self.has_dataset(name):
            raise UserError(f"snapshot {self.snapshot_id} has no {name!r} table")
        t = self._datasets[name] = ReadTable(self.path / "lancedb", name, lambda: self.table(name))
        return t

    def has_dataset(self, name: str) -> bool:
        """Whether the snapshot has the LanceDB table ``name`` (a ``stat``, unlike :meth:`has_table`)."""
        return (self.path / "lancedb" / f"{name}.lance").is_dir()

    @cached_property
    def _datasets(self) -> dict:
        return {}

    def _layout_path(self, key: str) -> Path | None:
        rel = (self.manifest.get("layout") or {}).get(key)
        return self.path / rel if isinstance(rel, str) and rel else None

    @property
    def query_encoder_dir(self) -> Path | None:
        """The snapshot's own query encoder (``query_encoder/``: :mod:`pipeline.embedding.query_encoder`), or
        None for snapshots published without one."""
        return self._layout_path("query_encoder")

    @property
    def bm25_path(self) -> Path | None:
        """The BM25 statistics counted at publish (:mod:`pipeline.query.bm25_stats`), or None."""
        return self._layout_path("bm25")

    @property
    def catalog_path(self) -> Path:
        return self.path / _snapshots.CATALOG

    def has_catalog(self) -> bool:
        return self.catalog_path.is_file()

    def catalog(self):
        """A read-only DuckDB connection to the snapshot's catalog (caller closes it):
        :func:`pipeline.snapshots.open_catalog`."""
        if not self.catalog_path.is_file():
            raise UserError(f"snapshot {self.snapshot_id} has no {_snapshots.CATALOG}")
        return _snapshots.open_catalog(self.path)


def open_snapshot(settings_or_root, snapshot_id: str | None = None, *, pin: bool = True,
                  who: str | None = None, need_fts: bool = True) -> Snapshot:
    """Open ``snapshot_id`` (or ``CURRENT``) read-only, pinned and checked.

    ``settings_or_root``: a Settings (uses ``settings.snapshots_dir``), a snapshots folder, or a
    snapshot folder itself (one holding ``manifest.json``). ``pin``: hold a lease on it while it is
    open (``who`` names this reader in retention's messages; a read-only folder opens unpinned, with
    a warning). Raises UserError when there is no such snapshot, and DamagedSnapshot (a UserError)
    when it fails the open check. ``snapshot_id`` (or ``settings_or_root``) may be a store URL,
    ``s3://bucket/prefix`` (its CURRENT) or ``s3://bucket/prefix@<id>``: see :mod:`pipeline.store.reader`.
    """
    from pipeline.store.url import is_store_url

    if is_store_url(snapshot_id) or (snapshot_id is None and is_store_url(settings_or_root)):
        from pipeline.store.reader import open_store_snapshot

        return open_store_snapshot(settings_or_root, snapshot_id or settings_or_root, pin=pin, who=who,
                                   need_fts=need_fts)
    path = _snapshots.resolve(settings_or_root, snapshot_id).resolve()
    manifest = _snapshots.read_manifest(path)  # DamagedSnapshot when truncated or not an object
    lease = _pin(path, who) if pin else None
    try:
        # after pinning: a retention that has not seen the pin has already renamed the folder away
        if not (path / _snapshots.MANIFEST).is_file():
            raise UserError(f"snapshot {path.name} was deleted while it was being opened")
        _snapshots.check_or_raise(path, manifest, need_fts=need_fts)
    except BaseException:
        if lease is not None:
            lease.release()
        raise
    return Snapshot(path=path, manifest=manifest, pin=lease)


def _pin(path: Path, who: str | None):
    from pipeline import pins

    parent = path.parent
    if not ((parent / _snapshots.CURRENT).exists() or (parent / pins.PINS_DIR).is_dir()):
        return None  # a snapshot folder outside a snapshots root: nobody runs retention there
    try:
        return pins.pin(parent, path.name, who=who)
    except OSError as exc:
        log.warning("could not pin snapshot %s (%s): retention may delete it while it is read",
                    path.name, exc.strerror or exc)
        return None
