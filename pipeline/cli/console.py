"""The terminal side of the CLI: quiet logs, one progress bar, and lines that fit the terminal.

- :func:`configure` (once, from the root callback): logs at WARNING on stderr (``-v``: DEBUG, with the
  logger names), the libraries' own progress bars and chatter off (Hugging Face, transformers,
  sentence-transformers follow the log level), Python warnings of libraries shown with ``-v`` only,
  and the steps' progress (:mod:`pipeline.progress`) shown as one rich bar when stderr is a terminal,
  as a plain line every 30 seconds otherwise (a pipe, a log file, an Airflow BashOperator).
- :func:`echo` prints human lines wrapped to the terminal's width (80 when piped, or ``COLUMNS``),
  continuation lines indented; documents (JSON, CSV, BibTeX, ...) are printed as they are, elsewhere, and
  so are the one-line warnings and errors on stderr.
- Every human line, warning and error is :func:`pipeline.terminal.printable`: a title or a file name that holds ESC,
  NUL or a newline prints as ``\x1b``, ``\x00``, ``\n`` (one-line messages escape line breaks too); :func:`out` prints
  the views (``show``, ``papers``, ``author``, ``ask``) the same way.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import textwrap
from typing import Any

from pipeline import progress
from pipeline.terminal import printable

PIPE_INTERVAL_S = 30.0


def configure(verbose: bool) -> None:
    """Logging, the libraries' output, and how progress is shown, for this CLI process."""
    if not verbose:
        # read when these libraries are imported (later, inside the commands): their download and
        # "Loading weights" bars off, transformers' advice off; sentence-transformers' "Batches" bar
        # follows its logger, which stays at WARNING
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    restore()
    root, warns = logging.getLogger(), logging.getLogger("py.warnings")
    _saved.update(level=root.level, warnings_level=warns.level)
    handler = _StderrHandler()
    # the handler's own level too: a library logger set to INFO (werkzeug's, say) reaches the root's
    # handlers whatever the root's level
    handler.setLevel(logging.DEBUG if verbose else logging.WARNING)
    handler.setFormatter(_Verbose("%(levelname)s %(name)s: %(message)s") if verbose else _OneLine())
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logging.captureWarnings(True)  # libraries' warnings.warn: a log record like the others ...
    warns.setLevel(logging.WARNING if verbose else logging.ERROR)  # ... shown with -v
    progress.install(RichReporter() if sys.stderr.isatty() else progress.LineReporter(_stderr_line, PIPE_INTERVAL_S))


_saved: dict = {}


def restore() -> None:
    """Undo :func:`configure` (``pipeline.cli.main`` calls it when a command ends, so a program or a test
    that runs commands in its own process keeps its logging)."""
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(h)
    if _saved:
        root.setLevel(_saved.pop("level"))
        logging.getLogger("py.warnings").setLevel(_saved.pop("warnings_level"))
        logging.captureWarnings(False)
    progress.install(None)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (like logging's own last-resort handler),
    so a warning during a progress bar goes through rich's proxy and prints above the bar."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


class _OneLine(logging.Formatter):
    """``paperkb: warning: <message>``: the shape of the CLI's other lines on stderr."""

    def format(self, record: logging.LogRecord) -> str:
        return f"paperkb: {record.levelname.lower()}: {printable(record.getMessage(), one_line=True)}"


class _Verbose(logging.Formatter):
    """``-v``'s records: level, logger, message, traceback (its lines kept), printable."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def _stderr_line(line: str) -> None:
    print(f"paperkb: {printable(line, one_line=True)}", file=sys.stderr, flush=True)


def width() -> int:
    """Columns to fill: the terminal's, ``COLUMNS`` when set, 80 when piped."""
    return max(shutil.get_terminal_size((80, 24)).columns, 20)


def wrap(text: str, width: int, indent: str | None = None) -> str:
    """Each line of ``text`` wrapped at ``width`` between words (a longer word is cut); continuation lines
    start with ``indent`` (default: the line's own indentation and two spaces) (pure)."""
    out: list[str] = []
    for line in text.splitlines() or [""]:
        if len(line) <= width:
            out.append(line)
            continue
        hang = indent if indent is not None else line[:len(line) - len(line.lstrip())] + "  "
        out += textwrap.wrap(line, width=width, subsequent_indent=hang, break_on_hyphens=False) or [""]
    return "\n".join(out)


def short(text: str | None, n: int) -> str:
    """``text`` on one line, at most ``n`` characters, cut between words (`` …`` marks the cut) (pure)."""
    t = " ".join((text or "").split())
    if len(t) <= n:
        return t
    cut = t[: max(n - 2, 1)]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + " \u2026"


def echo(text: str = "", *, err: bool = False, indent: str | None = None) -> None:
    """Print ``text`` wrapped to the terminal (:func:`wrap`) on stdout; with ``err``, as it is on stderr (a
    warning or an error is one line, whatever its length: logs and tests read it whole). Either way
    :func:`~pipeline.terminal.printable` (on stderr, line breaks escaped too)."""
    if err:
        print(printable(text, one_line=True), file=sys.stderr, flush=True)
        return
    print(wrap(printable(text), width(), indent))


def out(text: str) -> None:
    """Print a view laid out by its own code (lines already fit), :func:`~pipeline.terminal.printable`."""
    print(printable(text))


class RichReporter:
    """One rich progress bar on stderr while a task runs (transient: the step's summary line takes its
    place). rich is imported when the first task starts, so commands without one never load it."""

    def __init__(self, console: Any = None) -> None:
        self._console = console  # a rich Console (default: stderr's)
        self._progress: Any = None
        self._ids: dict[int, int] = {}
        self._open = 0

    def start(self, task: progress.Task) -> None:
        if self._progress is None:
            self._progress = _rich_progress(self._console)
        if self._open == 0:
            self._progress.start()
        self._open += 1
        self._ids[id(task)] = self._progress.add_task(task.description, total=task.total, count=_count(task))

    def update(self, task: progress.Task) -> None:
        tid = self._ids.get(id(task))
        if self._progress is not None and tid is not None:
            self._progress.update(tid, completed=task.completed, total=task.total, description=task.description,
                                  count=_count(task))

    def stop(self, task: progress.Task) -> None:
        tid = self._ids.pop(id(task), None)
        if self._progress is None or tid is None:
            return
        self._progress.remove_task(tid)
        self._open -= 1
        if self._open == 0:
            self._progress.stop()


def _count(task: progress.Task) -> str:
    """``1,024/3,013 texts``, ``1,024 texts``, or nothing for a phase without a count."""
    if task.total:
        return f"{task.completed:,}/{task.total:,} {task.unit}".rstrip()
    return f"{task.completed:,} {task.unit}".rstrip() if task.completed else ""


def _rich_progress(console: Any = None):
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.table import Column

    return Progress(SpinnerColumn(), TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis")),
                    BarColumn(bar_width=20), TextColumn("{task.fields[count]}"), TimeElapsedColumn(), TimeRemainingColumn(compact=True),
                    console=console or Console(stderr=True), transient=True)
