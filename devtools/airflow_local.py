"""Run the nightly DAG through Airflow on this machine: what ``make run`` does.

    python -m devtools.airflow_local                       # real arXiv + Semantic Scholar
    python -m devtools.airflow_local --replay ../shared/data   # the recorded data, no network

Steps: an embedded Airflow under ``warehouse/airflow`` (AIRFLOW_HOME, SQLite metadata DB, no example
DAGs), ``airflow db migrate``, ``airflow pools import dags/pools.json`` (arxiv_pool, s2_pool), then
``airflow dags test paperkb_nightly <day>`` -- the real DAG, its real tasks and dependencies, run by
Airflow in this process (no scheduler or webserver needed). With ``--replay`` a local replay server
(``devtools.replay_server``) answers for arXiv and S2 and the ``PAPERKB_*`` URLs point at it, and the
real PDFs in ``DATA_DIR/arxiv/pdf`` are imported first (``pipeline.library.pdf_folder.import_pdfs``, what
``paperkb import-pdfs`` does), so the run extracts, embeds and publishes their full text and figure
legends. It ends with one line on the published snapshot, a sample search, and the command to type next.

The output of ``airflow dags test`` (Airflow's own logging and the task logs, tracebacks included) goes to
``<airflow home>/logs/dags-test-<date>-<time>.log``; the console gets one line per finished task and,
when the run fails, one line that says why (a service that cannot be reached: its URL, the setting and
``--replay``) and where the log is. Exit status: 0 when the run published, else non-zero.

The helpers (``airflow_env``, ``prepare``, ``ApiServer``) are also used by the Airflow tests and by
``bench/airflow.py``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

from pipeline.settings import DAGS_DIR, Settings

POOLS_FILE = DAGS_DIR / "pools.json"
DAG_ID = "paperkb_nightly"


def airflow_bin() -> str:
    """The ``airflow`` command beside this interpreter (the project venv), else the one on PATH."""
    here = Path(sys.executable).with_name("airflow")
    return str(here) if here.exists() else (shutil.which("airflow") or "airflow")


def airflow_env(home: Path, *, executor: str | None = None, parallelism: int | None = None,
                api_port: int | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for an embedded Airflow under ``home`` (SQLite, this repo's dags/, no examples)."""
    env = dict(os.environ if base is None else base)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_DIR),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
    })
    if executor:
        env["AIRFLOW__CORE__EXECUTOR"] = executor
    if parallelism:
        env["AIRFLOW__CORE__PARALLELISM"] = str(parallelism)
    if api_port:
        # the LocalExecutor's task processes report to the api-server's execution API
        env["AIRFLOW__API__BASE_URL"] = f"http://127.0.0.1:{api_port}/"
        env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"http://127.0.0.1:{api_port}/execution/"
        env.setdefault("AIRFLOW__API_AUTH__JWT_SECRET", "paperkb-local-" + str(home).replace("/", "-"))
    return env


def run_airflow(env: dict[str, str], *args: str, check: bool = True, capture: bool = True,
                timeout: float | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([airflow_bin(), *args], env=env, check=check, text=True, timeout=timeout,
                          capture_output=capture)


def prepare(env: dict[str, str]) -> None:
    """``airflow db migrate`` and the politeness pools (idempotent)."""
    Path(env["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)
    run_airflow(env, "db", "migrate")
    run_airflow(env, "pools", "import", str(POOLS_FILE))


@contextmanager
def api_server(env: dict[str, str], port: int, log_path: Path, timeout_s: float = 120) -> Iterator[subprocess.Popen]:
    """An ``airflow api-server`` on 127.0.0.1:port (the LocalExecutor needs its execution API)."""
    log_file = open(log_path, "wb")
    proc = subprocess.Popen([airflow_bin(), "api-server", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"airflow api-server did not come up; see {log_path}")
                time.sleep(0.5)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log_file.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- make run ---------------------------------------------------------------------------------------------
_TASK_START = re.compile(r"\[DAG TEST\] starting task_id=(\S+) map_index=(-?\d+)")
_TASK_END = re.compile(r"\[DAG TEST\] end task task_id=(\S+) map_index=(-?\d+)")
_NEW_STATE = re.compile(r"\bnew_state=(\w+)")
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Failed|Unreachable)): (.+)$")


def dags_test(env: dict[str, str], logical: str, log_path: Path, echo=print) -> int:
    """``airflow dags test DAG_ID logical`` with its output in ``log_path``; ``echo`` gets one line per
    finished task (``harvest: success (3.2s)``). Returns the exit status."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started: dict[tuple[str, str], float] = {}
    state = ""
    with open(log_path, "w", encoding="utf-8") as log_file:
        proc = subprocess.Popen([airflow_bin(), "dags", "test", DAG_ID, logical], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log_file.write(line)
                if m := _TASK_START.search(line):
                    started[(m[1], m[2])] = time.monotonic()
                    state = ""
                elif m := _NEW_STATE.search(line):
                    state = m.group(1)
                elif m := _TASK_END.search(line):
                    task_id, index = m.groups()
                    took = time.monotonic() - started.pop((task_id, index), time.monotonic())
                    name = task_id if index == "-1" else f"{task_id}[{index}]"
                    echo(f"paperkb:   {name}: {state or 'done'} ({took:.1f}s)")
            return proc.wait()
        except BaseException:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise


def failure_line(log_text: str) -> str:
    """Why a ``dags test`` run failed, in one line: the ServiceUnreachable message when the log holds
    one, else the last exception line of the log (its message only), else ''."""
    from pipeline.errors import find_unreachable

    unreachable = find_unreachable(log_text)
    if unreachable:
        return unreachable
    last = ""
    for line in log_text.splitlines():
        if m := _EXC_LINE.match(line.strip()):
            last = f"{m.group(1)}: {m.group(2)}"
    return last[:500]


def import_line(summary: dict, folder: Path) -> str:
    """The recorded PDFs' import in one short line (pure)."""
    papers = summary.get("upserts", {}).get("papers", {})
    return (f"imported {summary.get('files', 0)} PDFs from {folder}: {papers.get('inserted', 0)} new papers, "
            f"{papers.get('updated', 0)} updated, {papers.get('unchanged', 0)} unchanged, "
            f"{summary.get('rejected', 0)} rejected")


def shown_path(path: Path, cwd: Path | None = None) -> str:
    """``path`` relative to the working directory when it lies inside it (``warehouse/...``), else as given."""
    here = os.path.abspath(cwd or os.getcwd())
    full = os.path.abspath(path)
    return os.path.relpath(full, here) if full.startswith(here + os.sep) else str(path)


def snapshot_lines(manifest: dict, path: Path, cwd: Path | None = None) -> list[str]:
    """Two lines on the published snapshot: its id and folder; what it holds and its encoder (pure)."""
    counts, model = manifest.get("counts", {}), manifest.get("model", {})
    held = [f"{counts.get(key, 0):,} {noun}" for key, noun in
            (("papers", "papers"), ("lancedb.chunks", "passages"), ("figures", "figure legends"),
             ("citations", "citations"))]
    name = str(model.get("name") or "?").rsplit("/", 1)[-1]
    encoder = " ".join(str(model[k]) for k in ("backend", "precision") if model.get(k))
    return [f"paperkb: published snapshot {manifest.get('snapshot_id', path.name)} ({shown_path(path, cwd)}/)",
            f"paperkb:   {', '.join(held)}; encoder {name}{f' ({encoder})' if encoder else ''}"]


def next_step_line(paperkb: str, warehouse: Path, cwd: Path | None = None) -> str:
    """The last line of ``make run``: the command to type next (pure). ``paperkb`` is the command as this
    shell reaches it (``.venv/bin/paperkb``); ``--warehouse`` is named unless the warehouse is ./warehouse."""
    here = os.path.abspath(cwd or os.getcwd())
    where = ("" if os.path.abspath(warehouse) == os.path.join(here, "warehouse")
             else f" --warehouse {shown_path(warehouse, cwd)}")
    return f'next: {paperkb}{where} search "your own question"  (the README\'s "Ten-minute tour" goes on)'


def _print_result(settings: Settings, query: str) -> int:
    from pipeline import snapshots

    try:
        path = snapshots.resolve(settings.snapshots_dir)
    except Exception as exc:  # noqa: BLE001 - report, the DAG log above says why
        print(f"paperkb: no published snapshot ({exc})", file=sys.stderr)
        return 1
    print("\n".join(snapshot_lines(snapshots.read_manifest(path), path)), flush=True)
    paperkb = Path(sys.executable).with_name("paperkb")
    cmd = [str(paperkb)] if paperkb.exists() else [sys.executable, "-m", "pipeline.cli"]
    shown = shown_path(paperkb) if paperkb.exists() else "python -m pipeline.cli"
    print(f"\n$ {shown} search {query!r} -k 5", flush=True)
    rc = subprocess.run([*cmd, "--warehouse", str(settings.warehouse), "search", query, "-k", "5"]).returncode
    if rc == 0:
        print("\n" + next_step_line(shown, settings.warehouse))
    return rc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m devtools.airflow_local", description=__doc__.splitlines()[0])
    ap.add_argument("--replay", metavar="DATA_DIR", help="serve the recorded arXiv/S2 data from DATA_DIR locally")
    ap.add_argument("--date", help="logical date YYYY-MM-DD: the run harvests the day before it (default: today, UTC)")
    ap.add_argument("--query", help="sample search printed at the end")
    args = ap.parse_args(argv)

    settings = Settings.load()
    warehouse = settings.warehouse.resolve()
    home = warehouse / "airflow"
    env = airflow_env(home)
    env["PAPERKB_WAREHOUSE"] = str(warehouse)
    logical = args.date or datetime.now(timezone.utc).date().isoformat()
    print(f"paperkb: Airflow home {shown_path(home)} (SQLite): migrating its database, creating the pools", flush=True)
    prepare(env)

    server = None
    if args.replay:
        from pipeline.library.pdf_folder import import_pdfs
        from devtools.replay_server import ReplayServer, service_env

        pdf_dir = Path(args.replay) / "arxiv" / "pdf"
        if pdf_dir.is_dir():  # the recorded OAI page's papers have no recorded PDFs: bring the 10 real ones
            imported = import_pdfs(Settings.load(warehouse=warehouse), pdf_dir)
            print(f"paperkb: {import_line(imported, pdf_dir)}", flush=True)
        server = ReplayServer(args.replay).start()
        env.update(service_env(server.url))
        env.setdefault("PAPERKB_CATEGORIES", '["*"]')  # the recordings are not cs papers
        env.setdefault("PAPERKB_ARXIV_DELAY_S", "0")
        env.setdefault("PAPERKB_S2_DELAY_S", "0")
        print(f"paperkb: replaying recorded arXiv/S2 from {args.replay} at {server.url}", flush=True)
    log_path = home / "logs" / f"dags-test-{logical}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}.log"
    try:
        day = date.fromisoformat(logical) - timedelta(days=1)
        print(f"paperkb: airflow dags test {DAG_ID} {logical} (harvests {day})", flush=True)
        print(f"paperkb: its log: {shown_path(log_path)}", flush=True)
        rc = dags_test(env, logical, log_path, echo=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print(f"paperkb: interrupted; the log so far is {log_path}", file=sys.stderr)
        return 130
    finally:
        if server is not None:
            server.stop()
    if rc != 0:
        why = failure_line(log_path.read_text(encoding="utf-8", errors="replace"))
        print(f"paperkb: the DAG run failed{': ' + why if why else f' (exit {rc})'}", file=sys.stderr)
        print(f"paperkb: the full log, tracebacks included: {log_path} (task logs under {home / 'logs'})",
              file=sys.stderr)
        return rc or 1
    query = args.query or ("attention mechanism for neural machine translation" if args.replay else "large language models")
    return _print_result(Settings.load(warehouse=warehouse), query)


if __name__ == "__main__":
    raise SystemExit(main())
