"""Keeps the server on the CURRENT snapshot and switches without a restart.

Each request asks the holder for a searcher. The holder stats the ``CURRENT`` pointer (cheap) and,
when it names a new snapshot, opens that one and swaps it in under a lock. Requests already running
keep the searcher they were handed, which still reads its own (immutable) snapshot folder, so a
publish never fails a request in flight.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Opened:
    snapshot_id: str
    path: Path
    searcher: Any


class SnapshotHolder:
    def __init__(self, settings: Settings, pinned: str | None = None):
        self.settings = settings
        self.pinned = pinned
        self._lock = threading.Lock()
        self._current: Opened | None = None
        self._pointer_state: tuple[int, int] | None = None

    def _pointer(self) -> Path:
        return self.settings.snapshots_dir / "CURRENT"

    def _state(self) -> tuple[int, int] | None:
        try:
            st = self._pointer().stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_ino)

    def get(self) -> Opened:
        """The searcher for the live snapshot, reopened when CURRENT has moved."""
        cur = self._current
        if cur is not None and (self.pinned or self._state() == self._pointer_state):
            return cur
        with self._lock:
            state = self._state()
            if self._current is not None and (self.pinned or state == self._pointer_state):
                return self._current
            from pipeline import snapshots
            from pipeline.query import Searcher, open_snapshot

            path = snapshots.resolve(self.settings.snapshots_dir, self.pinned)
            snapshot_id = path.name
            if self._current is None or self._current.snapshot_id != snapshot_id:
                snap = open_snapshot(self.settings, snapshot_id)
                self._current = Opened(snapshot_id, path, Searcher(snap, self.settings).warm())
                log.info("serving snapshot %s", snapshot_id)
            self._pointer_state = state
            return self._current
