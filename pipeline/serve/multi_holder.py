"""Several indexes served as one (``PAPERKB_SERVE_SNAPSHOTS``): one :class:`SnapshotHolder` per index, each
following its own warehouse's ``CURRENT`` or holding its own pinned snapshot, and a
:class:`pipeline.query.multi.MultiSearcher` over their live searchers, rebuilt when one of them switches."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline import snapshots
from pipeline.errors import UserError
from pipeline.serve.holder import Opened, SnapshotHolder
from pipeline.settings import Settings


def split_specs(value: str | None) -> list[str]:
    """``PAPERKB_SERVE_SNAPSHOTS``: comma-separated ``[NAME=]WHERE`` -> the specs, blanks dropped."""
    return [s.strip() for s in (value or "").split(",") if s.strip()]


def spec_holder(settings: Settings, where: str, who: str | None = None) -> tuple[SnapshotHolder, str]:
    """A holder for ``where`` and the index's default name: a snapshot folder (pinned to it), a warehouse or
    snapshots folder (its CURRENT, followed), else a snapshot id of ``settings``' warehouse (pinned)."""
    from pipeline.store.url import is_store_url, parse_store_url

    if is_store_url(where):  # s3://bucket/prefix (its CURRENT, followed) or s3://bucket/prefix@id (pinned)
        url = parse_store_url(where, what="PAPERKB_SERVE_SNAPSHOTS:")
        return SnapshotHolder(settings, pinned=where), (url.prefix.rsplit("/", 1)[-1] or url.bucket)
    p = Path(where).expanduser()
    if p.is_dir() and (p / snapshots.MANIFEST).is_file():
        root = p.resolve().parent
        wh = root.parent if root.name == "snapshots" else root
        return SnapshotHolder(settings.model_copy(update={"warehouse": wh}), pinned=p.name), wh.name or p.name
    if p.is_dir():
        root = snapshots.snapshots_root(p).resolve()
        wh = root.parent if root.name == "snapshots" else root
        return SnapshotHolder(settings.model_copy(update={"warehouse": wh})), wh.name
    if "/" in where or not snapshots.is_snapshot_name(where):
        raise UserError(f"PAPERKB_SERVE_SNAPSHOTS: {where!r} is neither a folder nor a snapshot id")
    return SnapshotHolder(settings, pinned=where), Path(settings.warehouse).resolve().name


@dataclass
class MultiOpened:
    """What a search over every index reads: each index's :class:`Opened` and the MultiSearcher over them."""

    snapshot_id: str
    opened: list[Opened]
    names: list[str]
    searcher: Any


class MultiHolder:
    def __init__(self, settings: Settings, specs: list[str]):
        from pipeline.query.multi import index_names, split_spec

        given, self.holders = [], []
        for spec in specs:
            name, where = split_spec(spec)
            holder, default = spec_holder(settings, where)
            self.holders.append(holder)
            given.append((name, default))
        self.names = index_names(given)
        self._lock = threading.Lock()
        self._current: MultiOpened | None = None

    @property
    def primary(self) -> SnapshotHolder:
        """The first index's holder: it answers everything but search (paper pages, health)."""
        return self.holders[0]

    def get(self) -> MultiOpened:
        """Every index's live searcher (each holder reopens its own when its CURRENT moved), merged."""
        opened = [h.get() for h in self.holders]
        cur = self._current
        if cur is not None and all(a is b for a, b in zip(cur.opened, opened)):
            return cur
        with self._lock:
            cur = self._current
            if cur is None or not all(a is b for a, b in zip(cur.opened, opened)):
                from pipeline.query.multi import MultiSearcher

                old = cur
                ms = MultiSearcher([o.searcher for o in opened], self.names)
                cur = self._current = MultiOpened("+".join(o.snapshot_id for o in opened), opened, self.names, ms)
                if old is not None:  # its indexes stay open in their holders; only its threads go
                    old.searcher.shutdown()
            return cur

    def close(self) -> None:
        """Unpin every index's snapshot."""
        for h in self.holders:
            h.close()
