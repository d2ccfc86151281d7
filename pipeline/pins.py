"""Pins: a reader's lease on the snapshot it reads, so that retention never deletes it (stdlib only).

A reader (``paperkb serve``, ``paperkb search``, a :class:`pipeline.query.Snapshot` opened in Python,
or any outside app) pins the snapshot it reads by putting a *lease file* beside the snapshots::

    warehouse/snapshots/.pins/<snapshot id>@<anything>.json

Everything before the first ``@`` names the pinned snapshot; the rest only has to be unique (paperkb
writes ``<host>@<pid>@<random>``). Names starting with ``.`` are ignored (write there, then rename).
The content is a JSON object, every field optional::

    {"snapshot_id": "20261121T232135Z-84e2", "who": "paperkb serve", "pid": 4242, "host": "box1",
     "created_at": "2026-11-22T08:00:00+00:00", "expires_at": null, "locked": true}

A lease holds its snapshot until its file is removed, except that retention treats it as *stale*
(ignores and deletes it) when

- ``expires_at`` (UTC ISO time) has passed;
- ``locked`` is true and nobody holds a ``flock`` on the file any more: paperkb's own readers keep an
  exclusive ``flock`` on their lease while they live, so a lease of a killed process frees itself,
  whatever host or container it ran in;
- ``host`` is this machine's host name and no process ``pid`` runs here.

An empty or unreadable lease file holds its snapshot until someone removes it (``touch`` is a valid
pin). Retention (in ``paperkb publish``) skips a pinned snapshot and says which reader holds it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import uuid
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PINS_DIR = ".pins"
SEP = "@"


def pins_dir(snapshots_dir: Path | str) -> Path:
    return Path(snapshots_dir) / PINS_DIR


def _host() -> str:
    return socket.gethostname() or "localhost"


def _default_who() -> str:
    path0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("python")
    argv0 = path0.name
    if argv0 in ("paperkb", "cli.py") or argv0.endswith("pipeline.cli") or path0.parts[-2:] == ("cli", "__main__.py"):
        return f"paperkb {_command_of(sys.argv[1:])}".strip()
    return f"python {argv0}" if argv0 not in ("python", "-c", "") else "python"


def _command_of(args: list[str]) -> str:
    """The command in paperkb's arguments: the first word that is neither an option nor the value of the
    global option that takes one (``--warehouse DIR``)."""
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a == "--warehouse":
            skip = True
        elif not a.startswith("-"):
            return a
    return ""


# ---- reading leases ------------------------------------------------------------------------------
@dataclass
class Lease:
    """One lease file: ``path``, the ``snapshot_id`` it pins and its JSON ``info`` (``{}`` if unreadable)."""

    path: Path
    snapshot_id: str
    info: dict[str, Any] = field(default_factory=dict)
    readable: bool = True

    def describe(self) -> str:
        """``paperkb serve pid 123 on host box1`` (what retention logs for a kept snapshot)."""
        if not self.readable:
            return f"lease file {self.path.name} (unreadable: remove it to unpin)"
        who = str(self.info.get("who") or "a reader")
        parts = [who]
        if self.info.get("pid") is not None:
            parts.append(f"pid {self.info['pid']}")
        if self.info.get("host") and self.info.get("host") != _host():
            parts.append(f"on host {self.info['host']}")
        if self.info.get("expires_at"):
            parts.append(f"until {self.info['expires_at']}")
        return " ".join(parts)

    def stale_reason(self, now: datetime | None = None) -> str | None:
        """Why this lease no longer holds its snapshot, or None while it does."""
        info = self.info if self.readable else {}
        exp = info.get("expires_at")
        if exp:
            try:
                t = datetime.fromisoformat(str(exp))
                if t.tzinfo is None:
                    t = t.replace(tzinfo=timezone.utc)
                if t <= (now or datetime.now(timezone.utc)):
                    return f"expired at {exp}"
            except ValueError:
                pass  # an unparsable expiry does not free the snapshot
        if info.get("locked"):
            free = _lock_is_free(self.path)
            if free is True:
                return "its holder is gone (lock released)"
            if free is False:
                return None  # held by a live process: the lock says so, whatever the pid
        pid, host = info.get("pid"), info.get("host")
        if isinstance(pid, int) and host == _host() and not _pid_alive(pid):
            return f"process {pid} is not running"
        return None


def _lock_is_free(path: Path) -> bool | None:
    """True if nobody holds a flock on ``path``, False if someone does, None if it cannot be told."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # a filesystem without flock
        return None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def leases(snapshots_dir: Path | str, snapshot_id: str | None = None) -> list[Lease]:
    """Every lease file (of ``snapshot_id``, or of all snapshots), stale ones included."""
    d = pins_dir(snapshots_dir)
    try:
        names = sorted(os.listdir(d))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for name in names:
        if name.startswith(".") or SEP not in name:
            continue
        sid = name.split(SEP, 1)[0]
        if snapshot_id is not None and sid != snapshot_id:
            continue
        p = d / name
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:  # released meanwhile
            continue
        except OSError:
            out.append(Lease(p, sid, {}, readable=False))
            continue
        if not text.strip():
            out.append(Lease(p, sid, {}))
            continue
        try:
            info = json.loads(text)
        except json.JSONDecodeError:
            out.append(Lease(p, sid, {}, readable=False))
            continue
        out.append(Lease(p, sid, info if isinstance(info, dict) else {}, readable=isinstance(info, dict)))
    return out


def holders(snapshots_dir: Path | str, snapshot_id: str, *, clean: bool = False) -> list[str]:
    """Who pins ``snapshot_id`` now (one description per live lease). ``clean`` deletes stale leases."""
    live = []
    for lease in leases(snapshots_dir, snapshot_id):
        reason = lease.stale_reason()
        if reason is None:
            live.append(lease.describe())
        elif clean:
            log.info("removing stale pin %s of %s: %s", lease.path.name, snapshot_id, reason)
            try:
                lease.path.unlink()
            except OSError:
                pass
    return live


def clean_stale(snapshots_dir: Path | str) -> list[str]:
    """Delete every stale lease file; returns their names."""
    removed = []
    for lease in leases(snapshots_dir):
        reason = lease.stale_reason()
        if reason is not None:
            try:
                lease.path.unlink()
                removed.append(lease.path.name)
            except OSError:
                pass
    return removed


# ---- holding a lease -------------------------------------------------------------------------------
def _release(path: Path, fd: int | None) -> None:
    try:
        path.unlink()
    except OSError:
        pass
    if fd is not None:
        try:
            os.close(fd)  # closing drops the flock
        except OSError:
            pass


class Pin:
    """A lease this process holds on one snapshot; :meth:`release` (or exit, or garbage collection)
    removes it. Use :func:`pin` to take one."""

    def __init__(self, path: Path, snapshot_id: str, fd: int | None):
        self.path, self.snapshot_id = path, snapshot_id
        self._finalizer = weakref.finalize(self, _release, path, fd)

    @property
    def held(self) -> bool:
        return self._finalizer.alive

    def release(self) -> None:
        self._finalizer()

    def __enter__(self) -> Pin:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Pin({self.snapshot_id!r}, {self.path.name!r}, held={self.held})"


def pin(snapshots_dir: Path | str, snapshot_id: str, *, who: str | None = None,
        expires_at: datetime | None = None) -> Pin:
    """Take a lease on ``snapshot_id``: write ``.pins/<id>@<host>@<pid>@<random>.json`` (atomically, with
    an exclusive flock held from before it becomes visible until release). Raises OSError when the
    folder cannot be written (a read-only mount): callers decide whether to go on unpinned."""
    if SEP in snapshot_id or "/" in snapshot_id or snapshot_id.startswith("."):
        raise ValueError(f"not a snapshot id: {snapshot_id!r}")
    d = pins_dir(snapshots_dir)
    d.mkdir(parents=True, exist_ok=True)
    host, pid = _host(), os.getpid()
    name = SEP.join((snapshot_id, host.replace(SEP, "_").replace("/", "_"), str(pid), uuid.uuid4().hex[:8])) + ".json"
    info = {"snapshot_id": snapshot_id, "who": who or _default_who(), "pid": pid, "host": host,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "expires_at": expires_at.isoformat() if expires_at else None, "locked": True}
    tmp = d / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # no flock here: the pid and host still identify the holder
            info["locked"] = False
        os.write(fd, (json.dumps(info) + "\n").encode())
        os.replace(tmp, d / name)
    except BaseException:
        os.close(fd)
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    return Pin(d / name, snapshot_id, fd)
