"""One writer at a time per warehouse: ``<warehouse>/.writer.lock``.

Every step that writes the warehouse (harvest, lookup, enrich, fulltext, graph, embed, publish,
import-collection, import-pdfs, refresh, and the DAG's merges) runs inside :func:`hold`. A second
writer is refused at once with one line naming the step that holds the lock and its PID
(``UserError``: exit 2 in the CLI); Airflow tasks ``wait=True`` instead: they log who holds the lock and
queue behind it for up to ``lock_wait_s`` seconds. Tasks that only read DuckDB read-only and write their
own staging Parquet (``plan_*``, ``fetch_batch``, ``extract_batch``, ``embed_shard``) take no lock, so they
still run in parallel.

The lock is an ``fcntl.flock`` on the file, so the kernel releases it when its process dies however it
dies (SIGKILL, OOM, a lost container): a stale lock of a dead process never blocks anybody, and the next
writer simply takes it over (it logs whose it was). The file holds one JSON line naming the holder
(step, pid, host, since); it is written after the flock is won and emptied before it is released, so a
non-empty file found on acquiring names a holder that died.

Why not the ``filelock`` package: we need the holder's record *inside* the locked file (written after
winning, read by contenders for the refusal message), a process-wide reentrant hold (``refresh`` runs
several steps, each of which takes the lock, in one process) and a polling wait that logs the holder;
``filelock`` is per-thread reentrant by default and keeps its file contents to itself. The kernel
primitive it wraps, ``flock``, is all we need.

Reentrant within a process: nested :func:`hold` calls (any thread) only count; the outermost one locks
and unlocks. flock works across hosts on NFSv4 (Linux emulates it with POSIX locks), so Celery workers
on several hosts sharing the warehouse queue behind one another too.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import logging
import os
import socket
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from pipeline.errors import UserError

log = logging.getLogger(__name__)

LOCK_NAME = ".writer.lock"
POLL_S = 0.5
LOG_EVERY_S = 60.0

F = TypeVar("F", bound=Callable)


class WarehouseLocked(UserError):
    """Another process is writing this warehouse (``holder``: its record, or {} if unreadable)."""

    def __init__(self, message: str, holder: dict | None = None):
        super().__init__(message)
        self.holder = holder or {}

    def __reduce__(self):  # picklable across processes (Airflow, multiprocessing)
        return (type(self), (str(self), self.holder))


class _Held:
    def __init__(self, fd: int, path: Path, record: dict):
        self.fd, self.path, self.record, self.depth = fd, path, record, 0


_HELD: dict[str, _Held] = {}
_GUARD = threading.RLock()


def lock_path(warehouse: Path) -> Path:
    return Path(warehouse) / LOCK_NAME


def read_holder(path: Path) -> dict:
    """The record of whoever holds (or last held without releasing) the lock at ``path``; {} if none."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError:
        return {}
    if not text:
        return {}
    try:
        rec = json.loads(text.splitlines()[0])
    except ValueError:
        return {}
    return rec if isinstance(rec, dict) else {}


def describe(rec: dict) -> str:
    """```embed` (pid 1234 on host h, since 14:02)``, or ``another process`` when the record is unknown."""
    if not rec.get("step"):
        return "another process"
    since = rec.get("since", "")
    try:
        since = datetime.fromisoformat(since).astimezone().strftime("%H:%M:%S")
    except (TypeError, ValueError):
        pass
    doing = f", now `{rec['doing']}`" if rec.get("doing") and rec.get("doing") != rec.get("step") else ""
    return f"`{rec['step']}`{doing} (pid {rec.get('pid', '?')} on host {rec.get('host', '?')}, since {since})"


def _open(path: Path) -> int:
    """Open (create) the lock file without truncating it: a contender must not wipe the holder's record."""
    warehouse = path.parent
    try:
        warehouse.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o664)
    except (FileExistsError, NotADirectoryError):
        raise UserError(f"warehouse {warehouse} is not a directory: point --warehouse / PAPERKB_WAREHOUSE at a folder") from None
    except PermissionError:
        raise UserError(f"warehouse {warehouse} is not writable by this user: cannot take its writer lock {path.name}") from None
    except OSError as exc:
        if exc.errno == errno.EROFS:
            raise UserError(f"warehouse {warehouse} is on a read-only file system: steps that write need a writable one") from None
        raise UserError(f"cannot open the writer lock {path}: {exc.strerror or exc}") from None


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise


def _write_record(fd: int, rec: dict) -> None:
    data = (json.dumps(rec, sort_keys=True) + "\n").encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


def _record(step: str) -> dict:
    return {"step": step, "pid": os.getpid(), "host": socket.gethostname(),
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def _holder_now(path: Path) -> dict:
    """The holder's record; it is written right after the flock is won, so retry briefly when empty."""
    for _ in range(10):
        rec = read_holder(path)
        if rec:
            return rec
        time.sleep(0.05)
    return {}


@contextmanager
def hold(warehouse: Path | str, step: str, *, wait: bool = False, timeout_s: float | None = None) -> Iterator[dict]:
    """Hold the writer lock of ``warehouse`` for ``step`` (reentrant in this process).

    ``wait=False`` (the CLI): refuse at once with a one-line :class:`WarehouseLocked` naming the holder.
    ``wait=True`` (Airflow tasks): poll until the lock is free, logging who holds it, and raise
    :class:`WarehouseLocked` after ``timeout_s`` seconds (``None``: wait as long as it takes)."""
    path = lock_path(Path(warehouse))
    key = os.path.abspath(path)
    with _GUARD:
        held = _HELD.get(key)
        if held is not None:  # nested step of the same process (refresh, a task wrapper): just count
            held.depth += 1
            previous = held.record.get("doing")
            if step != held.record.get("step") and step != previous:
                held.record["doing"] = step
                _safe_write(held)
    if held is not None:
        try:
            yield held.record
        finally:
            with _GUARD:
                held.depth -= 1
                if held.record.get("doing") != previous:
                    if previous is None:
                        held.record.pop("doing", None)
                    else:
                        held.record["doing"] = previous
                    _safe_write(held)
        return

    fd = _open(path)
    try:
        _acquire(fd, path, step, wait=wait, timeout_s=timeout_s)
    except BaseException:
        os.close(fd)
        raise
    stale = read_holder(path)
    if stale and not (stale.get("pid") == os.getpid() and stale.get("host") == socket.gethostname()):
        log.warning("writer lock of %s: taking over from %s, which ended without releasing it",
                 path.parent, describe(stale))
    held = _Held(fd, path, _record(step))
    try:
        _write_record(fd, held.record)
    except OSError as exc:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        raise UserError(f"cannot write the writer lock {path}: {exc.strerror or exc}") from None
    held.depth = 1
    with _GUARD:
        _HELD[key] = held
    try:
        yield held.record
    finally:
        with _GUARD:
            _HELD.pop(key, None)
        try:
            os.ftruncate(fd, 0)  # still holding the flock: nobody reads a half-cleared record
        except OSError:
            pass
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _safe_write(held: _Held) -> None:
    try:
        _write_record(held.fd, held.record)
    except OSError:  # the record is informative only
        pass


def _acquire(fd: int, path: Path, step: str, *, wait: bool, timeout_s: float | None) -> None:
    if _try_flock(fd):
        return
    rec = _holder_now(path)
    where = path.parent
    if not wait:
        raise WarehouseLocked(f"warehouse {where} is being written by {describe(rec)}: try `{step}` again when it ends",
                              rec)
    t0 = last_log = time.monotonic()
    log.warning("waiting for the warehouse lock held by %s (up to %s)", describe(rec),
             "no limit" if timeout_s is None else f"{timeout_s:g}s")
    while True:
        time.sleep(POLL_S)
        if _try_flock(fd):
            log.info("warehouse lock free after %.1fs: `%s` goes on", time.monotonic() - t0, step)
            return
        now = time.monotonic()
        if timeout_s is not None and now - t0 >= timeout_s:
            rec = _holder_now(path)
            raise WarehouseLocked(f"warehouse {where} is still being written by {describe(rec)} after waiting "
                                  f"{timeout_s:g}s (PAPERKB_LOCK_WAIT_S): `{step}` gave up", rec)
        if now - last_log >= LOG_EVERY_S:
            last_log = now
            log.info("still waiting for the warehouse lock held by %s (%.0fs)", describe(_holder_now(path)), now - t0)


def is_held_here(warehouse: Path | str) -> bool:
    """Whether this process holds the writer lock of ``warehouse``."""
    with _GUARD:
        return os.path.abspath(lock_path(Path(warehouse))) in _HELD


def writes(step: str) -> Callable[[F], F]:
    """Decorator for a step function whose first argument is its ``Settings``: the call holds the writer
    lock. It refuses at once when another process holds it, unless ``settings.lock_queue`` (Airflow tasks):
    then it waits up to ``settings.lock_wait_s`` (0 or less = no limit). Reentrant within a process."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(settings, *args, **kwargs):
            with hold(settings.warehouse, step, **_queueing(settings)):
                return fn(settings, *args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return deco


def _queueing(settings) -> dict:
    if not getattr(settings, "lock_queue", False):
        return {}
    limit = settings.lock_wait_s
    return {"wait": True, "timeout_s": limit if limit and limit > 0 else None}
