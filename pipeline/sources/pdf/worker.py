"""Each PDF is read in a worker process, within a time budget (``PAPERKB_PDF_TIMEOUT_S``, default 120 s).

A PDF is anyone's input, and reading one runs MuPDF (C) and our own layout code over whatever it holds: a file of a
few kilobytes can be built to take minutes (a ToUnicode map once did, :mod:`.tounicode`), and C code cannot be
stopped from inside the process that runs it. So ``import-pdfs``, ``fulltext`` and ``extract`` hand each file to a
worker process and wait at most the budget for its answer. Past the budget the worker is killed and the file is
rejected (reason ``timeout``); a worker that dies on a file (MuPDF crashing, the kernel killing it for memory)
rejects that file too (reason ``crashed``). The next file goes to a new worker, and the run goes on.

One worker serves a whole run: it starts (a Python interpreter importing PyMuPDF) while the step prepares, and
again only after a file it could not finish, so a file costs the copy of its bytes and of its answer between the
two processes. The worker is a plain ``python -c`` child over two pipes with the parent's ``sys.path`` (not
``multiprocessing``: a forked child would inherit the DuckDB and Arrow threads of a step, and a ``spawn`` or
``forkserver`` child runs the program's ``__main__`` again, an installed ``paperkb`` script or an Airflow task).
What the function logs in the worker, PyMuPDF's messages included, is logged again in the parent under the same
logger names; anything else printed goes to stderr. A budget of 0 reads each PDF in the step's own process, as before the budget existed, and
so does a run whose worker cannot start (with a warning).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
_HEADER = struct.Struct(">Q")  # each message: its length, then a pickle
START_TIMEOUT_S = 300.0  # the worker's own start (imports on a loaded machine); not part of any file's budget
_SETTING = "PAPERKB_PDF_TIMEOUT_S"
# a worker that cannot start: warn once per process, then read in-process
_warned: dict[str, bool] = {}


class _Timeout(Exception):
    pass


def _write(fd: int, payload: bytes) -> None:
    for part in (_HEADER.pack(len(payload)), payload):
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; None at end of file; ``_Timeout`` past ``deadline`` (monotonic)."""
    buf = bytearray()
    poller = select.poll()  # (not select.select: no limit on the descriptor's number)
    poller.register(fd, select.POLLIN)
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(max(1, int(left * 1000))):
                raise _Timeout
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read(fd: int, deadline: float | None = None) -> Any:
    """The next message from ``fd`` (None at end of file)."""
    head = _read_exact(fd, _HEADER.size, deadline)
    if head is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(head)[0], deadline)
    return None if body is None else pickle.loads(body)


# ---- the parent ---------------------------------------------------------------------------------------------------
class PdfWorker:
    """Runs ``fn(*args)`` for one PDF at a time in a worker process, each call within ``timeout_s`` seconds.

    ``with PdfWorker(settings.pdf_timeout_s, preload=[...]) as worker: worker.call(read_pdf, data, name)``.
    The worker starts on entering (this module imports nothing heavy: a command can start it before its own imports)
    and is waited for at the first call. :meth:`call` raises ``PdfRejected`` (the function's own, or ``timeout`` / ``crashed``) and re-raises any other
    error the function raised. ``preload``: modules the worker imports before its first file; ``warm_up``: a call
    ``(fn, args)`` it makes then (loading a tokenizer, say), so that no file's budget pays for what every worker
    does once."""

    def __init__(self, timeout_s: float | None, preload: tuple[str, ...] = (),
                 warm_up: tuple[Callable[..., Any], tuple] | None = None) -> None:
        self.timeout_s = timeout_s if timeout_s and timeout_s > 0 else None
        self.preload = preload
        self.warm_up = warm_up
        self._proc: subprocess.Popen | None = None
        self._ready = False
        self._in_process = self.timeout_s is None
        self.started = 0  # workers started (the first, and one after each file it could not finish)

    def __enter__(self) -> PdfWorker:
        self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        if self._in_process or self._proc is not None:
            return
        code = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
                "from pipeline.sources.pdf.worker import serve; serve(sys.argv[2:])")
        try:
            self._proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(sys.path), *self.preload],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, close_fds=True)
        except OSError as exc:
            self._give_up(f"{type(exc).__name__}: {exc}")
            return
        self._ready = False
        self.started += 1
        assert self._proc.stdin is not None
        try:  # its warm-up (or none), made before it says it is ready: beside this process's own work
            _write(self._proc.stdin.fileno(), pickle.dumps(self.warm_up, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            pass  # (gone already: _wait_ready says why)

    def _give_up(self, why: str) -> None:
        """Read in-process from now on (no budget), after a worker that could not start."""
        self._kill()
        self._in_process = True
        if not _warned.get(why):
            _warned[why] = True
            log.warning("PDFs are read without a time budget (%s): the worker process did not start: %s", _SETTING, why)

    def _wait_ready(self) -> bool:
        """Whether the worker is ready for a file (False: it did not start, and files are read in-process now)."""
        if self._proc is None:
            return False
        if self._ready:
            return True
        assert self._proc.stdout is not None
        try:
            msg = _read(self._proc.stdout.fileno(), time.monotonic() + START_TIMEOUT_S)
        except _Timeout:
            msg = None
        if msg != "ready":
            code = self._proc.poll()
            self._give_up(f"exit code {code}" if code is not None else f"no answer in {START_TIMEOUT_S:g} s")
            return False
        self._ready = True
        return True

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, run in the worker within the budget (in this process when there is none)."""
        if not self._in_process:
            if self._proc is not None and self._proc.poll() is not None:  # died between files: a new one
                self._kill()
            self._start()
            if self._wait_ready():
                return self._call(fn, args)
        return fn(*args)

    def _call(self, fn: Callable[..., T], args: tuple) -> T:
        from pipeline.sources.pdf.text import PdfRejected

        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        level = min(logging.getLogger(name).getEffectiveLevel() for name in ("pipeline", "pymupdf"))
        payload = pickle.dumps((fn, args, level), protocol=pickle.HIGHEST_PROTOCOL)
        limit = self.timeout_s
        assert limit is not None
        t0 = time.monotonic()
        try:
            _write(proc.stdin.fileno(), payload)
            reply = _read(proc.stdout.fileno(), t0 + limit)
        except _Timeout:
            self._kill()
            raise PdfRejected("timeout", f"not read within {limit:g} s ({_SETTING}); the worker reading it "
                                         "was stopped") from None
        except OSError:  # the worker is gone (a broken pipe)
            reply = None
        if reply is None:
            code = self._kill()
            why = f"killed by signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
            raise PdfRejected("crashed", f"the process reading it stopped ({why})")
        kind, value, records = reply
        for rec in records:
            logger = logging.getLogger(rec["name"])
            if logger.isEnabledFor(rec["levelno"]):
                logger.handle(logging.makeLogRecord(rec))
        if kind == "ok":
            return value
        if kind == "rejected":
            raise PdfRejected(*value)
        exc, text = value
        if not isinstance(exc, BaseException):
            exc = RuntimeError(exc)
        exc.add_note(f"in the PDF worker process:\n{text}")
        raise exc

    def _kill(self) -> int | None:
        """Stop the worker now; its exit code (negative: the signal)."""
        proc, self._proc, self._ready = self._proc, None, False
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        return proc.wait()

    def close(self) -> None:
        """End the worker (killed: it holds nothing to save, and a Python interpreter's own exit takes longer)."""
        self._kill()


def for_import(settings: Any) -> PdfWorker:
    """The worker of ``import-pdfs`` (``read_pdf``), with ``settings``' budget."""
    return PdfWorker(settings.pdf_timeout_s, preload=("pipeline.library.pdf_folder",))


def for_extraction(settings: Any) -> PdfWorker:
    """The worker of ``fulltext`` and ``extract`` (``extract_pdf``), with ``settings``' budget; it loads the tokenizer
    that cuts the chunks before its first file (seconds, once)."""
    from pipeline.embedding.chunking import load_tokenizer, tokenizer_path

    return PdfWorker(settings.pdf_timeout_s, preload=("pipeline.steps.fulltext",),
                     warm_up=(load_tokenizer, (tokenizer_path(settings),)))


# ---- the worker ---------------------------------------------------------------------------------------------------
class _Collect(logging.Handler):
    """Keeps the worker's log records for the parent, as plain dicts (message formatted, traceback as text)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        d = dict(record.__dict__)
        d["msg"], d["args"] = record.getMessage(), None
        if record.exc_info:
            d["exc_text"] = logging.Formatter().formatException(record.exc_info)
        d["exc_info"] = None
        self.records.append({k: v for k, v in d.items() if isinstance(v, (str, int, float, type(None)))})


def serve(preload: list[str]) -> None:
    """The worker's loop: make the warm-up call the parent sends first, say ``"ready"``, then read ``(fn, args, log
    level)`` and answer ``(kind, value, log records)``, until the input closes. Its stdout is the answer pipe; anything else printed to stdout goes to stderr."""
    import importlib

    # PyMuPDF 2.0 imports its pymupdf.layout on import (ONNX Runtime and a layout model: two thirds of the worker's
    # start); paperkb never asks a page for its layout (Page.get_layout), so the worker goes without
    sys.modules.setdefault("pymupdf.layout", None)  # type: ignore[arg-type]
    import pymupdf

    from pipeline.sources.pdf.text import PdfRejected

    pymupdf.no_recommend_layout()

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent, which ends the worker
    out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    pymupdf.set_messages(pylogging=True)  # PyMuPDF's messages: log records (logger "pymupdf"), sent to the parent
    for name in preload:
        importlib.import_module(name)
    handler = _Collect()
    root = logging.getLogger()
    root.handlers[:] = [handler]
    warm_up = _read(0)  # the parent's first message: a call to make before any file (loading a tokenizer), or None
    if warm_up is not None:
        try:
            warm_up[0](*warm_up[1])
        except Exception:  # noqa: BLE001 - the files' own calls meet the same error, if it is one
            pass
    try:
        _write(out, pickle.dumps("ready"))
    except BrokenPipeError:  # the parent is gone
        return
    while True:
        msg = _read(0)
        if msg is None:
            return
        fn, args, level = msg
        root.setLevel(level)
        handler.records = []
        reply: tuple
        try:
            reply = ("ok", fn(*args))
        except PdfRejected as rej:
            reply = ("rejected", (rej.reason, rej.detail))
        except Exception as exc:  # noqa: BLE001 - the parent raises it again
            reply = ("error", (exc, traceback.format_exc()))
        try:
            data = pickle.dumps((*reply, handler.records), protocol=pickle.HIGHEST_PROTOCOL)
            if reply[0] == "error":
                pickle.loads(data)  # an exception the parent could not rebuild is sent as text
        except Exception as exc:  # noqa: BLE001
            text = reply[1][1] if reply[0] == "error" else traceback.format_exc()
            what = f"{type(reply[1][0]).__name__}: {reply[1][0]}" if reply[0] == "error" else f"{type(exc).__name__}: {exc}"
            data = pickle.dumps(("error", (what, text), handler.records))
        try:
            _write(out, data)
        except BrokenPipeError:
            return
