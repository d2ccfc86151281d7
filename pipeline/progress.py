"""Progress of the long steps, reported by the step and shown by whoever runs it (stdlib only).

A step says what it is doing through :func:`task` and never decides how that looks::

    with progress.task("embed: encoding", total=len(texts), unit="texts") as bar:
        for batch in batches:
            ...
            bar.advance(len(batch))
        bar.stage("embed: writing LanceDB")        # the next phase, without a count

The caller picks the look by installing a *reporter* (:func:`install`, or :func:`reporting` for one
block): the CLI shows one rich bar on a terminal and plain periodic lines on a pipe
(:mod:`pipeline.cli.console`). Without one (a Python program, an Airflow task) a task is logged at INFO
on the ``pipeline.progress`` logger at most once every :data:`LOG_INTERVAL_S` seconds, so a task log
shows a long step moving without a line per item. Tasks may be advanced from any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Protocol

LOG_INTERVAL_S = 30.0


class Reporter(Protocol):
    """Shows tasks: ``start`` when one opens, ``update`` on every change (throttling is its own
    business), ``stop`` when it closes."""

    def start(self, task: Task) -> None: ...

    def update(self, task: Task) -> None: ...

    def stop(self, task: Task) -> None: ...


class Task:
    """One long piece of work: a description, a count ``completed`` of ``total`` (None: unknown) ``unit``."""

    def __init__(self, description: str, total: int | None, unit: str, reporter: Reporter) -> None:
        self.description, self.total, self.unit = description, total, unit
        self.completed = 0
        self.started = time.monotonic()
        self._reporter = reporter
        self._lock = threading.Lock()

    def advance(self, n: int = 1) -> None:
        """``n`` more units done."""
        if n:
            with self._lock:
                self.completed += n
            self._reporter.update(self)

    def update(self, *, completed: int | None = None, total: int | None = None, description: str | None = None) -> None:
        """Set the count, the total or the description (what is left out stays)."""
        with self._lock:
            if completed is not None:
                self.completed = completed
            if total is not None:
                self.total = total
            if description is not None:
                self.description = description
        self._reporter.update(self)

    def stage(self, description: str, total: int | None = None, unit: str = "") -> None:
        """The next phase of the work: a new description, and a count from 0 (of ``total``, None: unknown)."""
        with self._lock:
            self.description, self.total, self.unit, self.completed = description, total, unit, 0
        self._reporter.update(self)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def line(self) -> str:
        """``embed: encoding: 1,024/3,013 texts (34%), 1m10s, about 2m15s left`` (for plain reporters)."""
        return describe(self.description, self.completed, self.total, self.unit, self.elapsed)


def describe(description: str, completed: int, total: int | None, unit: str, elapsed: float) -> str:
    """A task's state as one line (pure)."""
    unit = f" {unit}" if unit else ""
    if total:
        done = min(completed, total)
        count = f"{done:,}/{total:,}{unit} ({100 * done / total:.0f}%)"
        left = f", about {duration(elapsed * (total - done) / done)} left" if 0 < done < total else ""
    else:
        count, left = (f"{completed:,}{unit}" if completed else ""), ""
    return f"{description}: {count}{', ' if count else ''}{duration(elapsed)}{left}"


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m`` (pure)."""
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class LineReporter:
    """Plain lines through ``write``: a task that runs longer than ``interval_s`` gets a line every
    ``interval_s`` seconds and one when it ends; a shorter one gets none (its step's summary says enough)."""

    def __init__(self, write: Callable[[str], None], interval_s: float = LOG_INTERVAL_S) -> None:
        self.write, self.interval_s = write, interval_s
        self._last: dict[int, float] = {}
        self._shown: dict[int, tuple] = {}  # task -> its state when its last line was written
        self._lock = threading.Lock()

    def start(self, task: Task) -> None:
        with self._lock:
            self._last[id(task)] = time.monotonic()

    def update(self, task: Task) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(id(task), now) < self.interval_s:
                return
            self._last[id(task)] = now
            self._shown[id(task)] = _state(task)
        self.write(task.line())

    def stop(self, task: Task) -> None:
        with self._lock:
            shown = self._shown.pop(id(task), None)
            self._last.pop(id(task), None)
        if shown != _state(task) and (shown is not None or task.elapsed >= self.interval_s):
            self.write(f"{task.line()}, done")


def _state(task: Task) -> tuple:
    return task.description, task.completed, task.total


class NullReporter:
    """Shows nothing."""

    def start(self, task: Task) -> None:
        pass

    def update(self, task: Task) -> None:
        pass

    def stop(self, task: Task) -> None:
        pass


_log = logging.getLogger(__name__)
_default: Reporter = LineReporter(_log.info)
_current: list[Reporter] = [_default]


def current() -> Reporter:
    return _current[-1]


def install(reporter: Reporter | None) -> None:
    """Show every task from now on with ``reporter`` (None: back to logging)."""
    _current[:] = [reporter or _default]


@contextmanager
def reporting(reporter: Reporter) -> Iterator[Reporter]:
    """Show the tasks of this block with ``reporter``."""
    _current.append(reporter)
    try:
        yield reporter
    finally:
        _current.remove(reporter)


@contextmanager
def task(description: str, total: int | None = None, unit: str = "") -> Iterator[Task]:
    """A long piece of work, shown by the current reporter while the block runs."""
    reporter = current()
    t = Task(description, total, unit, reporter)
    reporter.start(t)
    try:
        yield t
    finally:
        reporter.stop(t)
