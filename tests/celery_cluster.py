"""A real Airflow deployment on this machine, without Docker, by the deployment guide's own commands: what
tests/test_deployment.py and bench/deployment.py run.

The deployment guide (docs/deployment.md, "Celery deployment on several hosts") is the script (``tests/readme_deploy.py`` reads
its ``bash deploy=NAME`` blocks and runs them as one root bash session); this module only chooses the
values of the variables its ``deploy=variables`` block reads -- free loopback ports, temporary folders,
secrets -- and keeps handles on what the blocks started:

- PostgreSQL (Debian's ``postgresql``: ``initdb`` + ``pg_ctl`` as the ``postgres`` user) and Redis
  (``redis-server``) in temporary folders on free ports; stopped at the end.
- A fresh virtualenv with the built paperkb wheel and the ``[airflow]`` profile (``deploy=install``:
  the same ``pip install`` a user runs; torch is the pinned CPU build, installed first).
- CeleryExecutor with the Postgres metadata database and Redis as the broker, and Airflow's own
  processes as plain processes: ``api-server``, ``scheduler``, ``dag-processor``, ``triggerer`` and the
  guide's two ``celery worker``s. Each worker runs in its own UTS namespace (``unshare --uts``) with its
  own host name, as workers on separate hosts would, so task instances record which worker ran them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import readme_deploy

REPO_ROOT = Path(__file__).resolve().parents[1]
TORCH_PIN = "torch==2.13.0"  # the CPU build (Makefile); installed before the wheel so nothing pulls CUDA


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(step: int = 2) -> tuple[int, int]:
    """A free port p with p + step free too (the guide's second worker logs on WORKER_LOG_PORT + 2)."""
    while True:
        p = free_port()
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p + step))
            return p, p + step
        except OSError:
            continue


def missing_tools() -> list[str]:
    """What this machine lacks for the guide's commands (its ``deploy=packages`` block installs them)."""
    need = {"initdb": "postgresql", "redis-server": "redis-server", "unshare": "util-linux", "runuser": "util-linux",
            "curl": "curl"}
    out = [f"{tool} ({pkg})" for tool, pkg in need.items()
           if shutil.which(tool) is None and not (tool == "initdb" and list(Path("/usr/lib/postgresql").glob("*/bin/initdb")))]
    if os.geteuid() != 0:
        out.append("root (the guide's commands run as root: runuser, unshare --uts)")
    return out


def _wait(check, what: str, timeout_s: float, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = check()
            if result:
                return result
        except Exception:  # noqa: BLE001 - not up yet
            pass
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}" + (f"; see {log}" if log else ""))
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s" + (f"; see {log}" if log else ""))
        time.sleep(0.5)


# ---- PostgreSQL and Redis: where the guide's deploy=postgres and deploy=redis blocks put them ------------------
class Postgres:
    """The cluster the guide's ``deploy=postgres`` block creates in ``root/pgdata``: role and database
    ``airflow`` with a password, on a free port."""

    def __init__(self, root: Path):
        self.root = root
        self.data = root / "pgdata"
        self.port = free_port()
        self.password = "pg" + secrets.token_hex(8)

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://airflow:{self.password}@127.0.0.1:{self.port}/airflow"

    def connect(self):
        import psycopg2

        return psycopg2.connect(host="127.0.0.1", port=self.port, user="airflow", password=self.password,
                                dbname="airflow")

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        con = self.connect()
        try:
            with con.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        finally:
            con.close()

    def stop(self) -> None:
        pg_ctl = shutil.which("pg_ctl") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))), None)
        if self.data.exists() and pg_ctl:
            subprocess.run(["runuser", "-u", "postgres", "--", str(pg_ctl), "-D", str(self.data), "-m", "immediate",
                            "-w", "stop"], capture_output=True)


class Redis:
    """The server the guide's ``deploy=redis`` block starts in ``root`` (a daemon with a pid file)."""

    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.password = "redis" + secrets.token_hex(8)

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        pidfile = self.root / "redis.pid"
        try:
            os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass


# ---- the wheel and a fresh environment ------------------------------------------------------------------
def build_wheel(out: Path, python: str = sys.executable) -> Path:
    """``pip wheel --no-deps .``: the wheel a user installs (no editable checkout involved)."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([python, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(REPO_ROOT)], check=True, capture_output=True, text=True)
    wheels = sorted(out.glob("paperkb-*.whl"))
    assert wheels, f"no wheel in {out}"
    return wheels[-1]


def _env_without_checkout() -> dict[str, str]:
    """The environment without PYTHONPATH: with the checkout on it, pip would see the source tree's
    ``paperkb.egg-info`` (left by ``pip wheel .``) as an installed paperkb and skip the wheel."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def fresh_venv(root: Path, wheel: Path, profile: str | None, constraints: Path | None = None) -> Path:
    """A new virtualenv with ``torch==2.13.0`` and then ``paperkb[profile]`` from ``wheel``; with ``constraints`` (a
    pip constraints file), no torch first and the wheel installed under them (the base profile needs no torch:
    constraints that forbid it make any request for it fail)."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q"]
    target = f"{wheel}[{profile}]" if profile else str(wheel)
    steps = [[target, "-c", str(constraints)]] if constraints else [[TORCH_PIN], [target]]
    for args in steps:
        out = subprocess.run([*pip, *args], capture_output=True, text=True, env=_env_without_checkout())
        if out.returncode != 0:
            raise RuntimeError(f"pip install {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return root


def reinstall(venv: Path, wheel: Path) -> None:
    """Put this checkout's wheel into an existing environment (its dependencies stay)."""
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps",
                    str(wheel)], check=True, capture_output=True, text=True, env=_env_without_checkout())


# ---- Airflow --------------------------------------------------------------------------------------------------------
# What the test sets beyond the guide's variables: speed and observability, never a command. The guide
# gives each of these settings and the value the test uses (heartbeat timeout, retry delay, batch size).
TEST_SETTINGS = {
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
    # a killed worker's task is noticed within seconds, not the guide's 60 s (Airflow's default: 300 s)
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
    "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
}


@dataclass
class Cluster:
    """The deployment the guide's blocks built: the shell they ran in, and the processes they started."""

    root: Path
    venv: Path
    postgres: Postgres
    redis: Redis
    shell: readme_deploy.Shell
    api_port: int = field(default_factory=free_port)

    @property
    def procs(self) -> dict[str, subprocess.Popen]:
        return self.shell.procs

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def home(self) -> Path:
        return self.root / "airflow"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def dags_folder(self) -> str:
        return self.shell.env["AIRFLOW__CORE__DAGS_FOLDER"]

    def env(self) -> dict[str, str]:
        return dict(self.shell.env)

    def block(self, name: str, **variables: str) -> str:
        """Run the guide block ``deploy=NAME`` (after setting ``variables``, ones the block reads)."""
        self.shell.env.update(variables)
        return self.shell.run(name, wrap=self._wrap)

    def airflow(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        out = subprocess.run([str(self.bin / "airflow"), *args], env=self.env(), capture_output=True, text=True,
                             timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed ({out.returncode}):\n{out.stdout[-3000:]}\n"
                               f"{out.stderr[-3000:]}")
        return out

    def paperkb(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin / "paperkb"), *args], env=self.env(), capture_output=True, text=True,
                              timeout=timeout, check=True)

    @staticmethod
    def _wrap(name: str, command: str) -> list[str]:
        """A worker of the guide's ``deploy=workers`` block in its own UTS namespace, its host name the
        Celery name's (``-H worker-1@%h`` -> host ``worker-1``): task instances record which worker ran them."""
        if not name.startswith("worker-"):
            return ["bash", "-c", command]
        host = name[len("worker-"):]
        return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec bash -c "$1"', host, command]

    def start_services(self, workers: dict[str, str | None] | None = None) -> None:
        """The guide's ``deploy=control-host`` block (api-server, scheduler, dag-processor, triggerer), its
        ``deploy=login`` check once the api-server answers, then its ``deploy=workers`` block; or, with
        ``workers`` (``{name: cpu list or None}``, the benchmarks), one such worker per entry."""
        import json
        import urllib.request

        self.block("control-host")

        def healthy() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}/api/v2/monitor/health", timeout=2):
                return True

        _wait(healthy, "airflow api-server", 240, self.procs["api-server"], self.shell.log_dir / "api-server.log")
        token = json.loads(self.block("login"))
        assert token.get("access_token"), token
        if workers is None:
            self.block("workers")
            return
        for hostname, cpus in workers.items():
            self.start_worker(hostname, cpus)

    def start_worker(self, hostname: str, cpus: str | None = None) -> subprocess.Popen:
        """One more worker as the guide starts them (its own Celery name and log-server port)."""
        command = (f"AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT={free_port()} airflow celery worker --concurrency 1 "
                   f"-H {hostname}@%h")
        if cpus:
            command = f"taskset -c {cpus} env {command}"
        return self.shell.start(command, wrap=lambda name, cmd: self._wrap(f"worker-{hostname}", cmd))

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal process ``name`` and everything it started (task processes may start their own
        sessions): with SIGKILL, what a host that dies looks like to the rest of the deployment."""
        import psutil

        proc = self.procs[name]
        try:
            family = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
        except psutil.NoSuchProcess:
            family = [proc.pid]
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        for pid in family:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)

    def wait_for_dag(self, dag_id: str, timeout_s: float = 300) -> None:
        """Until the dag-processor has serialized ``dag_id`` into the metadata database."""
        _wait(lambda: self.postgres.query("SELECT 1 FROM serialized_dag WHERE dag_id = %s", (dag_id,)),
              f"DAG {dag_id} in the metadata DB", timeout_s, self.procs.get("dag-processor"),
              self.shell.log_dir / "dag-processor.log")

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + 30
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@contextmanager
def deployment(root: Path, wheel: Path, extra_env: dict[str, str] | None = None, venv: Path | None = None,
               recorded_data: Path | None = None) -> Iterator[Cluster]:
    """The guide's blocks up to a migrated metadata DB (no Airflow process yet): ``variables``, ``postgres``,
    ``redis``, ``install`` (skipped when ``venv`` is an existing environment: it is activated instead),
    ``settings``, then TEST_SETTINGS and ``extra_env`` (the caller's settings), ``recorded-data`` when
    ``recorded_data`` is given, and ``migrate``. ``root`` (warehouse, Airflow home, logs) starts empty."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "logs").mkdir(parents=True)
    pg_root = Path(tempfile.mkdtemp(prefix="paperkb-pg-"))
    os.chmod(pg_root, 0o755)  # the postgres user reaches PGDATA inside it
    pg, redis = Postgres(pg_root), Redis(root / "redis")
    api_port = free_port()
    log_port, _ = free_ports(2)
    variables = {
        "DB_HOST": "127.0.0.1", "PGPORT": str(pg.port), "PGDATA": str(pg.data),
        "REDIS_HOST": "127.0.0.1", "REDIS_PORT": str(redis.port), "REDIS_DIR": str(redis.root),
        "API_HOST": "127.0.0.1", "API_PORT": str(api_port), "WORKER_LOG_PORT": str(log_port),
        "AIRFLOW_CLIENTS": "127.0.0.1/32",
        "AIRFLOW_HOME": str(root / "airflow"), "PAPERKB_WAREHOUSE": str(root / "warehouse"),
        "PAPERKB_VENV": str(venv or root / "venv"), "PAPERKB_WHEEL": str(wheel),
        "AIRFLOW_DB_PASSWORD": pg.password, "REDIS_PASSWORD": redis.password,
        "JWT_SECRET": "jwt" + secrets.token_hex(16), "AIRFLOW_ADMIN_PASSWORD": "admin" + secrets.token_hex(8),
        # the triggerer's log server: off its default 8794, which another deployment on this machine may hold
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
    }
    # no PYTHONPATH and no settings of the caller: the processes import paperkb from the installed wheel
    base = {k: v for k, v in _env_without_checkout().items() if not k.startswith(("AIRFLOW", "PAPERKB_", "_PAPERKB"))}
    shell = readme_deploy.Shell(env={**base, **variables}, log_dir=root / "logs")
    cluster = Cluster(root=root, venv=Path(variables["PAPERKB_VENV"]), postgres=pg, redis=redis, shell=shell,
                      api_port=api_port)
    try:
        cluster.block("variables")
        cluster.block("postgres")
        cluster.block("redis")
        if venv is None:
            cluster.block("install")
        else:  # a prepared environment (the benchmarks): what the block's `. activate` and mkdir do
            shell.env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{shell.env.get('PATH', '')}")
            for d in (variables["AIRFLOW_HOME"], variables["PAPERKB_WAREHOUSE"]):
                Path(d).mkdir(parents=True, exist_ok=True)
        cluster.block("settings")
        shell.env.update({**TEST_SETTINGS, **(extra_env or {})})
        if recorded_data is not None:
            cluster.block("recorded-data", PAPERKB_DATA=str(recorded_data), REPLAY_PORT=str(free_port()))
        cluster.block("migrate")
        yield cluster
    finally:
        cluster.stop()
        redis.stop()
        pg.stop()
        shutil.rmtree(pg.root, ignore_errors=True)
