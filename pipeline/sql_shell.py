"""``paperkb sql``: SQL over a catalog opened read-only, as a query, a script, or an interactive shell.

A snapshot's catalog is opened with :func:`pipeline.snapshots.open_catalog` (read-only; its tables are views over
Parquet files inside the snapshot folder, found through DuckDB's ``file_search_path``); ``--warehouse-db`` opens
the working warehouse read-only instead. Read-only means more than DuckDB's ``read_only``: the connection reads
that database (and a snapshot's own Parquet files) and nothing else (:func:`pipeline.snapshots.lock_down`). No
other file or URL is read (``read_csv('/etc/passwd')``, ``glob``), none is written (``COPY ... TO``, ``EXPORT
DATABASE``), no database is attached (an ``ATTACH`` of the warehouse would write it past the writer lock), no
extension is installed or loaded, and those settings cannot be changed: such a statement is refused in one line
that says why. Temporary tables and views (``CREATE TEMP TABLE``) work; they live in memory until the end.

The command-line build of DuckDB on the package index cannot read this DuckDB version's files, so the
project's own ``duckdb`` module runs the SQL. Statements are split with DuckDB's own parser
(``duckdb.extract_statements``); those that return rows (SELECT, SHOW, DESCRIBE, SUMMARIZE, PRAGMA,
CALL, EXPLAIN) print them: as DuckDB's box table cut to the terminal's width (DuckDB's renderer elides
columns and rows that do not fit and says so), as CSV, or as JSON (one array of row objects per
statement). The shell reads statements ending with ``;``, keeps a history (readline, when the platform
has it) and knows ``.tables``, ``.schema [NAME]`` (columns and types), ``.help`` and ``.quit``; an error there is one line on
stderr and the shell goes on. The dot commands also run as the command line's query (``paperkb sql .tables``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Callable, Iterator, TextIO

FORMATS = ("table", "csv", "json")
MAX_ROWS = 40  # rows of a table before DuckDB's renderer elides the middle ones (the DuckDB CLI's default)
HISTORY = Path("~/.paperkb_sql_history")
PROMPT, MORE = "sql> ", "...> "
SHELL_HELP = """statements end with ';' and may span lines; results: DuckDB's table (--format csv|json on the command line)
.tables          the tables and views
.schema [NAME]   the columns and types of NAME (of every table and view without NAME)
.help            this text
.quit            leave (or Ctrl-D)"""


class SqlError(Exception):
    """A statement DuckDB refused: ``str()`` is one line."""


#: why a statement that reaches beyond the catalog is refused, after DuckDB's own words
CONFINED = ("paperkb sql reads the opened database and its own files only: no other file or URL, no ATTACH, COPY ... TO, "
            "EXPORT DATABASE, INSTALL or LOAD, no change to those settings")


def error_line(exc: BaseException) -> str:
    """DuckDB's message on one line: its first paragraph (``Catalog Error: ... Did you mean "papers"?``),
    without the ``LINE 1: ...`` excerpt and its caret; a statement refused because the connection is confined to its
    own files (:func:`pipeline.snapshots.lock_down`) says so."""
    import duckdb

    first = str(exc).strip().split("\n\n")[0]
    line = " ".join(part.strip() for part in first.splitlines() if part.strip() and not part.startswith("LINE "))
    if isinstance(exc, duckdb.PermissionException) or "the configuration has been locked" in line:
        line += f" ({CONFINED})"
    return line


def statements(sql: str) -> list[tuple[str, bool]]:
    """``(statement, returns_rows)`` for each statement of ``sql``, by DuckDB's parser."""
    import duckdb

    try:
        parsed = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise SqlError(error_line(exc)) from None
    rows = {duckdb.StatementType.SELECT, duckdb.StatementType.PRAGMA, duckdb.StatementType.CALL,
            duckdb.StatementType.EXPLAIN}
    return [(s.query.strip(), s.type in rows) for s in parsed if s.query.strip().strip(";").strip()]


def run_script(con, sql: str, out: TextIO, fmt: str = "table", width: int = 80, max_rows: int = MAX_ROWS) -> int:
    """Run every statement of ``sql`` on ``con``, printing the rows of those that return some into ``out``.
    Returns how many statements ran; raises :class:`SqlError` (one line, ``statement N:`` in a script) at
    the first refused one, after printing the results before it."""
    import duckdb

    todo = statements(sql)
    for n, (query, returns_rows) in enumerate(todo, start=1):
        try:
            rel = con.sql(query)
            if returns_rows and rel is not None:
                render(rel, out, fmt, width, max_rows)
        except duckdb.Error as exc:
            where = f"statement {n}: " if len(todo) > 1 else ""
            raise SqlError(where + error_line(exc)) from None
    return len(todo)


def render(rel, out: TextIO, fmt: str, width: int, max_rows: int = MAX_ROWS) -> None:
    """A result as DuckDB's box table (at most ``width`` columns wide), CSV or JSON."""
    if fmt == "table":
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):  # DuckDB's renderer prints through Python's stdout
            rel.show(max_width=width, max_rows=max_rows)
        out.write(buf.getvalue().rstrip("\n") + "\n")
        return
    columns, rows = list(rel.columns), rel.fetchall()
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(columns)
        w.writerows([[_csv_cell(v) for v in row] for row in rows])
        return
    out.write(json.dumps([dict(zip(columns, row)) for row in rows], indent=1, ensure_ascii=False, default=str) + "\n")


def _csv_cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, dict, tuple)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


# ---- the interactive shell ----------------------------------------------------------------------------
def shell(con, *, fmt: str = "table", width: Callable[[], int] = lambda: 80, read: Callable[[str], str] = input,
          out: TextIO = sys.stdout, err: TextIO = sys.stderr, max_rows: int = MAX_ROWS,
          remember: Callable[[str], None] = lambda entry: None) -> None:
    """Read statements until ``.quit`` or end of input; run each when its ``;`` comes. ``remember`` gets
    each statement (its lines joined) and each dot command: the history."""
    buffer: list[str] = []
    while True:
        try:
            line = read(MORE if buffer else PROMPT)
        except EOFError:
            out.write("\n")
            return
        except KeyboardInterrupt:  # drop the statement being typed, as a shell does
            out.write("\n")
            buffer = []
            continue
        if not buffer and line.strip().startswith("."):
            remember(line.strip())
            if not _dot_command(con, line.strip(), out, err, width(), max_rows):
                return
            continue
        if not line.strip() and not buffer:
            continue
        buffer.append(line)
        text = "\n".join(buffer)
        if not text.rstrip().endswith(";"):
            continue
        buffer = []
        remember(" ".join(x.strip() for x in text.splitlines() if x.strip()))
        try:
            run_script(con, text, out, fmt, width(), max_rows)
        except SqlError as exc:
            err.write(f"Error: {exc}\n")


def _dot_command(con, line: str, out: TextIO, err: TextIO, width: int, max_rows: int) -> bool:
    """Run a ``.command``; False to leave the shell."""
    try:
        return dot(con, line, out, width)
    except SqlError as exc:
        err.write(f"Error: {exc}\n")
    return True


def dot(con, line: str, out: TextIO, width: int) -> bool:
    """Run the dot command ``line`` (``.tables``, ``.schema [NAME]``, ``.help``; also ``paperkb sql .tables`` on the
    command line); False for ``.quit``. SqlError (one line) for an unknown command or a refused one."""
    import duckdb

    word, _, arg = line.strip().partition(" ")
    arg = arg.strip().rstrip(";").strip()
    try:
        if word in (".quit", ".exit", ".q"):
            return False
        if word == ".help":
            out.write(SHELL_HELP + "\n")
        elif word == ".tables":
            names = [r[0] for r in con.sql("SELECT name FROM (SHOW TABLES) ORDER BY name").fetchall()]
            out.write(_columns(names, width) + "\n")
        elif word == ".schema":
            out.write(schema(con, arg or None) + "\n")
        else:
            raise SqlError(f"unknown command {word} (.help lists them)")
    except duckdb.Error as exc:
        raise SqlError(error_line(exc)) from None
    return True


def schema(con, name: str | None = None) -> str:
    """The columns and types (DuckDB's ``DESCRIBE``) of the table or view ``name``, of every one when None:
    a heading ``NAME (table|view)``, then one line per column."""
    found = con.execute(
        "SELECT name, kind FROM (SELECT table_name AS name, 'table' AS kind FROM duckdb_tables() WHERE NOT internal "
        "UNION ALL SELECT view_name, 'view' FROM duckdb_views() WHERE NOT internal) "
        "WHERE ? IS NULL OR lower(name) = lower(?) ORDER BY name", [name, name]).fetchall()
    if not found:
        raise SqlError(f"no table or view named {name!r} (.tables lists them)")
    blocks = []
    for table, kind in found:
        quoted = '"' + table.replace('"', '""') + '"'
        columns = con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {quoted})").fetchall()
        pad = max(len(c) for c, _ in columns) + 2 if columns else 0
        blocks.append("\n".join([f"{table} ({kind})", *(f"  {c.ljust(pad)}{t}" for c, t in columns)]))
    return "\n\n".join(blocks)


def _columns(names: list[str], width: int) -> str:
    """Names in as many columns as fit ``width`` (pure)."""
    if not names:
        return ""
    cell = max(len(n) for n in names) + 2
    per_row = max(1, width // cell)
    return "\n".join("".join(n.ljust(cell) for n in names[i:i + per_row]).rstrip()
                     for i in range(0, len(names), per_row))


@contextlib.contextmanager
def history(path: Path = HISTORY) -> Iterator[Callable[[str], None]]:
    """Line editing and a history file for the shell, where the platform has readline; yields the
    ``remember`` of :func:`shell` (a statement typed over several lines is one entry)."""
    try:
        import readline
    except ImportError:  # Windows without pyreadline: plain input(), no history
        yield lambda entry: None
        return
    file = path.expanduser()
    with contextlib.suppress(OSError):
        readline.read_history_file(file)
    readline.set_history_length(1000)
    readline.set_auto_history(False)
    try:
        yield readline.add_history
    finally:
        with contextlib.suppress(OSError):
            readline.write_history_file(file)
            os.chmod(file, 0o600)
