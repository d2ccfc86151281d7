"""``paperkb sql``: a query, a script (-f or stdin) and the interactive shell on a real CACM snapshot, read-only
and pinned; SQL errors are one line and exit code 2 (in the shell: one line, and the shell goes on)."""

from __future__ import annotations

import io
import json
import os
import pty
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from pipeline import sql_shell

REPO_ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_") or k == "PAPERKB_SHARED_DATA"}
    env.update(PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", COLUMNS="80", **extra)
    return env


def _sql(warehouse: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "--warehouse", str(warehouse), "sql", *args],
                          capture_output=True, text=True, input=stdin, env=_env(), timeout=300)


def json_results(text: str) -> list[list[dict]]:
    """The JSON arrays ``--format json`` prints, one per statement that returns rows."""
    dec, i, out = json.JSONDecoder(), 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        value, i = dec.raw_decode(text, i)
        out.append(value)


# ---- the module, on an in-memory database ----------------------------------------------------------------
@pytest.fixture
def con():
    c = duckdb.connect()
    c.execute("CREATE TABLE papers AS SELECT 'p' || range AS paper_id, range AS n, ['a', 'b'] AS tags, "
              "NULL::VARCHAR AS note FROM range(100)")
    c.execute("CREATE VIEW few AS SELECT * FROM papers WHERE n < 3")
    yield c
    c.close()


def test_statements_are_split_by_duckdb_and_marked_when_they_return_rows():
    got = sql_shell.statements("SELECT 1; SET threads = 1; -- a comment\nSHOW TABLES; CREATE TEMP TABLE t (a INT);")
    assert got == [("SELECT 1;", True), ("SET threads = 1;", False), ("-- a comment\nSHOW TABLES;", True),
                   ("CREATE TEMP TABLE t (a INT);", False)]
    with pytest.raises(sql_shell.SqlError, match='^Parser Error: syntax error at or near "selec"$'):
        sql_shell.statements("selec 1")


def test_formats(con):
    out = io.StringIO()
    assert sql_shell.run_script(con, "FROM papers ORDER BY n LIMIT 2; SET threads = 2; SELECT 42 AS x", out, "json") == 3
    first, second = json_results(out.getvalue())
    assert first == [{"paper_id": "p0", "n": 0, "tags": ["a", "b"], "note": None},
                     {"paper_id": "p1", "n": 1, "tags": ["a", "b"], "note": None}] and second == [{"x": 42}]
    out = io.StringIO()
    sql_shell.run_script(con, "FROM few ORDER BY n", out, "csv")
    assert out.getvalue().splitlines() == ["paper_id,n,tags,note", 'p0,0,"[""a"", ""b""]",', 'p1,1,"[""a"", ""b""]",',
                                           'p2,2,"[""a"", ""b""]",']
    for width in (80, 120):  # DuckDB's renderer cuts long cells and drops columns to fit (it goes no narrower than 80)
        out = io.StringIO()
        sql_shell.run_script(con, "SELECT *, repeat('x', 200) AS wide FROM papers", out, "table", width=width, max_rows=10)
        assert max(len(x) for x in out.getvalue().splitlines()) <= width and "100 rows (10 shown)" in out.getvalue()


def test_an_error_names_the_statement_and_keeps_what_ran_before(con):
    out = io.StringIO()
    with pytest.raises(sql_shell.SqlError) as err:
        sql_shell.run_script(con, "SELECT 1 AS one; SELECT * FROM nope", out, "csv")
    assert str(err.value).startswith("statement 2: Catalog Error: Table with name nope does not exist!")
    assert "\n" not in str(err.value) and out.getvalue() == "one\n1\n"


def test_shell_reads_statements_until_quit(con):
    lines = iter(["", "SELECT n", "FROM few", "ORDER BY n;", ".tables", ".schema few", "SELECT * FROM nope;",
                  ".schema nope", ".bogus", "SELECT count(*) AS c FROM papers;", ".quit", "SELECT 'never';"])
    prompts: list[str] = []

    def read(prompt: str) -> str:
        prompts.append(prompt)
        return next(lines)

    out, err, remembered = io.StringIO(), io.StringIO(), []
    sql_shell.shell(con, fmt="csv", read=read, out=out, err=err, remember=remembered.append)
    assert remembered[:3] == ["SELECT n FROM few ORDER BY n;", ".tables", ".schema few"]
    assert prompts[:4] == [sql_shell.PROMPT, sql_shell.PROMPT, sql_shell.MORE, sql_shell.MORE]
    text = out.getvalue()
    assert "n\n0\n1\n2\n" in text and "few" in text and "papers" in text and "few (view)\n  paper_id  VARCHAR\n  n         BIGINT\n" in text
    assert "c\n100\n" in text and "never" not in text
    errors = err.getvalue().splitlines()
    assert len(errors) == 3 and all(e.startswith("Error: ") for e in errors)
    assert "nope does not exist" in errors[0] and "no table or view named 'nope'" in errors[1] and ".bogus" in errors[2]


def test_schema_lists_columns_and_types(con):
    assert sql_shell.schema(con, "PAPERS") == (
        "papers (table)\n  paper_id  VARCHAR\n  n         BIGINT\n  tags      VARCHAR[]\n  note      VARCHAR")
    every = sql_shell.schema(con)
    assert every.startswith("few (view)\n") and "\n\npapers (table)\n" in every
    with pytest.raises(sql_shell.SqlError, match="no table or view named 'nope'"):
        sql_shell.schema(con, "nope")


def test_shell_ends_at_end_of_input(con):
    out = io.StringIO()

    def read(prompt: str) -> str:
        raise EOFError

    sql_shell.shell(con, read=read, out=out, err=io.StringIO())
    assert out.getvalue() == "\n"


# ---- the command, on a real snapshot ---------------------------------------------------------------------
def test_query_formats_and_errors(cacm_snapshot, tmp_path):
    wh = cacm_snapshot.warehouse
    res = _sql(wh, "SELECT paper_id, title FROM papers WHERE paper_id = 'cacm:1785'", "--format", "json")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert json_results(res.stdout) == [[{"paper_id": "cacm:1785", "title": "Scatter Storage Techniques"}]]

    table = _sql(wh, "FROM papers")
    assert table.returncode == 0 and "3204 rows (40 shown)" in table.stdout
    assert max(len(x) for x in table.stdout.splitlines()) <= 80

    bad = _sql(wh, "SELECT * FROM nope")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == ['paperkb: error: Catalog Error: Table with name nope does not exist! '
                                       'Did you mean "papers"?']

    script = "SELECT count(*) AS n FROM citations;\nSELECT count(*) AS n FROM related WHERE paper_id = 'cacm:1785';\n"
    piped = _sql(wh, "--format", "csv", stdin=script)
    assert piped.returncode == 0 and piped.stdout.splitlines() == ["n", "2720", "n", "44"], piped.stderr
    f = tmp_path / "q.sql"
    f.write_text(script, encoding="utf-8")
    assert _sql(wh, "-f", str(f), "--format", "csv").stdout == piped.stdout

    # read-only: the catalog refuses writes; a temporary table is fine
    ro = _sql(wh, "CREATE TABLE x AS SELECT 1")
    assert ro.returncode == 2 and "read-only" in ro.stderr.lower() and len(ro.stderr.splitlines()) == 1
    assert _sql(wh, "CREATE TEMP TABLE x AS SELECT 1 AS a; FROM x", "--format", "csv").stdout == "a\n1\n"

    run_log = _sql(wh, "--warehouse-db", "SELECT DISTINCT step FROM run_log ORDER BY step", "--format", "csv")
    assert run_log.returncode == 0 and {"graph", "embed", "publish"} <= set(run_log.stdout.split()), run_log.stderr
    for args, msg in ((("--snapshot", "nope", "SELECT 1"), "nope"), (("--format", "xml", "SELECT 1"), "--format"),
                      (("SELECT 1", "-f", str(f)), "either"), (("-f", str(tmp_path / "missing.sql")), "no SQL file"),
                      (("--warehouse-db", "--snapshot", "x", "SELECT 1"), "either"), (("  ",), "no SQL given")):
        res = _sql(wh, *args)
        assert res.returncode == 2 and len(res.stderr.splitlines()) == 1 and msg in res.stderr, (args, res.stderr)


def test_sql_reads_the_database_and_nothing_else(cacm_snapshot, tmp_path):
    """Issue 64: `paperkb sql` refused CREATE and INSERT, but COPY ... TO, EXPORT DATABASE, read_csv('/etc/passwd'),
    glob and ATTACH ... (READ_WRITE) worked, and through an ATTACH of the warehouse a DELETE FROM run_log sidestepped
    the writer lock. Each is refused now, in one line that says why; a temporary table still works."""
    wh = cacm_snapshot.warehouse
    other = tmp_path / "warehouse.duckdb"
    shutil.copy(wh / "warehouse.duckdb", other)  # what the ATTACHes name: the shared warehouse is never at risk
    with duckdb.connect(str(other), read_only=True) as con:
        logged = con.execute("SELECT count(*) FROM run_log").fetchall()[0][0]
    assert logged > 0
    for args in (("SELECT * FROM read_csv('/etc/passwd')",), ("SELECT * FROM glob('/etc/*')",),
                 (f"COPY (SELECT 1 AS a) TO '{tmp_path}/out.csv'",), (f"EXPORT DATABASE '{tmp_path}/export'",),
                 (f"ATTACH '{other}' AS w (READ_WRITE); DELETE FROM w.run_log",), ("INSTALL httpfs",),
                 ("SET enable_external_access = true",),
                 ("--warehouse-db", f"ATTACH '{other}' AS w (READ_WRITE); DELETE FROM w.run_log"),
                 ("--warehouse-db", "SELECT * FROM read_csv('/etc/passwd')")):
        res = _sql(wh, *args)
        assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, (args, res.stdout, res.stderr)
        assert res.stderr.rstrip().endswith(f"({sql_shell.CONFINED})") and "root:" not in res.stdout, res.stderr
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "export").exists()
    with duckdb.connect(str(other), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM run_log").fetchall()[0][0] == logged
    temp = _sql(wh, "--warehouse-db", "CREATE TEMP TABLE x AS SELECT count(*) AS n FROM run_log; FROM x", "--format", "csv")
    assert temp.returncode == 0 and temp.stdout.splitlines()[1].isdigit(), temp.stderr


def test_the_shells_dot_commands_run_from_the_command_line(cacm_snapshot):
    """``paperkb sql --help`` names .tables and .schema NAME; given as the query they were a DuckDB parser error."""
    wh = cacm_snapshot.warehouse
    tables = _sql(wh, ".tables")
    assert tables.returncode == 0 and tables.stderr == "", tables.stderr
    assert {"papers", "related", "related_now", "passages"} <= set(tables.stdout.split())
    # .schema NAME: the columns and types (DESCRIBE), not the CREATE VIEW over read_parquet(...)
    papers = _sql(wh, ".schema papers")
    assert papers.returncode == 0 and papers.stdout.startswith("papers (view)\n"), papers.stdout
    columns = dict(line.split()[:2] for line in papers.stdout.splitlines()[1:] if line.strip())
    assert columns["paper_id"] == "VARCHAR" and columns["year"] == "INTEGER" and columns["categories"] == "VARCHAR[]"
    assert "read_parquet" not in papers.stdout and "CREATE" not in papers.stdout
    # the analysts' first view reads well: the title beside the id, no graph run id
    central = _sql(wh, ".schema most_central_papers")
    names = [line.split()[0] for line in central.stdout.splitlines()[1:]]
    assert names[:4] == ["centrality_rank", "paper_id", "title", "year"] and "run_id" not in names, central.stdout
    top = _sql(wh, "SELECT centrality_rank, paper_id, title, year FROM most_central_papers LIMIT 10")  # the README's
    assert top.returncode == 0 and "10 rows" in top.stdout and "…" not in top.stdout.splitlines()[1], top.stdout
    run_log = _sql(wh, "--warehouse-db", ".schema RUN_LOG")
    assert run_log.returncode == 0 and run_log.stdout.startswith("run_log (table)\n") and "  counts" in run_log.stdout
    for query, msg in ((".frob", "unknown command .frob (.help lists them)"),
                       (".schema nope", "no table or view named 'nope' (.tables lists them)")):
        bad = _sql(wh, query)
        assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.splitlines() == [f"paperkb: error: {msg}"]


def _pins_of(pins, pid):
    """The leases a process holds on the warehouse's snapshots."""
    leases = []
    for path in pins.glob("*") if pins.is_dir() else []:
        try:
            lease = json.loads(path.read_text() or "{}")
        except (OSError, ValueError):  # removed or half-written by another test's process
            continue
        if lease.get("pid") == pid:
            leases.append(lease)
    return leases


def test_the_shell_on_a_terminal_pins_the_snapshot(cacm_snapshot, tmp_path):
    """On a terminal ``paperkb sql`` is a shell; the snapshot it reads is pinned until it ends; its history
    is kept in ~/.paperkb_sql_history."""
    wh = cacm_snapshot.warehouse
    pins = wh / "snapshots" / ".pins"
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "--warehouse", str(wh), "sql", "--format", "csv"],
                            stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(HOME=str(tmp_path)))
    os.close(slave)
    try:
        os.write(master, b"SELECT title FROM papers\nWHERE paper_id = 'cacm:1785';\nSELECT * FROM nope;\n")
        # The snapshot is shared with other test workers, whose processes pin it too: look for this one's pin.
        deadline = time.monotonic() + 120
        while not _pins_of(pins, proc.pid) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        leases = _pins_of(pins, proc.pid)
        assert [x.get("who") for x in leases] == ["paperkb sql"], leases
        os.write(master, b".tables\n.quit\n")
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Scatter Storage Techniques" in out and "most_central_papers" in out
    assert [x for x in err.splitlines() if x.startswith("Error: ")] == [
        'Error: Catalog Error: Table with name nope does not exist! Did you mean "papers"?']
    assert _pins_of(pins, proc.pid) == []  # unpinned at exit
    assert "SELECT title FROM papers WHERE paper_id = 'cacm:1785';" in (tmp_path / ".paperkb_sql_history").read_text()
