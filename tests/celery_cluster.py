"""A real Airflow deployment on this machine, without Docker: what tests/test_deployment.py and
bench/deployment.py run.

- PostgreSQL (Debian's ``postgresql``: initdb + pg_ctl) and Redis (``redis-server``) in a temporary
  folder on free loopback ports; stopped at the end.
- A fresh virtualenv with the built paperkb wheel installed with the ``[airflow]`` profile (the same
  ``pip install`` a user runs; torch is the pinned CPU build, installed first).
- CeleryExecutor with the Postgres metadata database and Redis as the broker, and Airflow's own
  processes as plain processes: ``api-server``, ``scheduler``, ``dag-processor``, ``triggerer`` and
  ``celery worker``s. Each worker runs in its own UTS namespace (``unshare --uts``) with its own host
  name, as workers on separate hosts would, so task instances record which worker ran them.

The environment the processes share is exactly what the README's "Celery deployment on several hosts"
section sets; :func:`airflow_env` is the single place it is written down for the tests.
"""

from __future__ import annotations

import functools
import os
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

REPO_ROOT = Path(__file__).resolve().parents[1]
TORCH_PIN = "torch==2.13.0"  # the CPU build (Makefile); installed before the wheel so nothing pulls CUDA


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing_tools() -> list[str]:
    """What this machine lacks for a deployment (the Debian packages ``.ci/run`` installs)."""
    need = {"initdb": "postgresql", "pg_ctl": "postgresql", "redis-server": "redis-server", "unshare": "util-linux"}
    return [f"{tool} ({pkg})" for tool, pkg in need.items() if shutil.which(tool) is None]


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


# ---- PostgreSQL and Redis ---------------------------------------------------------------------------------
class Postgres:
    """A throwaway PostgreSQL cluster; superuser ``airflow``, trust auth on loopback, database ``airflow``."""

    def __init__(self, root: Path):
        self.root = root
        self.data = root / "pgdata"
        self.port = free_port()
        self.log = root / "postgres.log"
        # initdb refuses to run as root: run the server as Debian's `postgres` user then
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://airflow@127.0.0.1:{self.port}/airflow"

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self._as, *cmd], check=True, capture_output=True, text=True)

    def start(self) -> "Postgres":
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o777)
        if self._as:
            self.log.touch()
            shutil.chown(self.log, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "airflow", "-A", "trust", "-E", "UTF8", "--no-sync")
        opts = (f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300")
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.log), "-w", "-t", "60", "start")
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "airflow", "airflow")
        return self

    def connect(self):
        import psycopg2

        return psycopg2.connect(host="127.0.0.1", port=self.port, user="airflow", dbname="airflow")

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        con = self.connect()
        try:
            with con.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        finally:
            con.close()

    def stop(self) -> None:
        if self.data.exists():
            subprocess.run([*self._as, "pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                           capture_output=True)


class Redis:
    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _ping(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")

    def start(self) -> "Redis":
        self.root.mkdir(parents=True, exist_ok=True)
        log = self.root / "redis.log"
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.root), "--logfile", str(log)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        _wait(self._ping, "redis-server", 30, self.proc, log)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


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


def fresh_venv(root: Path, wheel: Path, profile: str | None) -> Path:
    """A new virtualenv with ``torch==2.13.0`` and then ``paperkb[profile]`` from ``wheel``."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q"]
    target = f"{wheel}[{profile}]" if profile else str(wheel)
    for args in ([TORCH_PIN], [target]):
        out = subprocess.run([*pip, *args], capture_output=True, text=True, env=_env_without_checkout())
        if out.returncode != 0:
            raise RuntimeError(f"pip install {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return root


def reinstall(venv: Path, wheel: Path) -> None:
    """Put this checkout's wheel into an existing environment (its dependencies stay)."""
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps",
                    str(wheel)], check=True, capture_output=True, text=True, env=_env_without_checkout())


# ---- Airflow -----------------------------------------------------------------------------------------------
@dataclass
class Cluster:
    """The Airflow processes of one deployment, sharing one environment."""

    root: Path
    venv: Path
    postgres: Postgres
    redis: Redis
    extra_env: dict[str, str] = field(default_factory=dict)
    api_port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def home(self) -> Path:
        return self.root / "airflow"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @functools.cached_property
    def dags_folder(self) -> str:
        """Where the installed wheel keeps the DAG files (asked once: ``paperkb dags-folder``)."""
        return subprocess.run([str(self.bin / "paperkb"), "dags-folder"], check=True, capture_output=True,
                              text=True).stdout.strip()

    def env(self) -> dict[str, str]:
        # no PYTHONPATH: the processes import paperkb from the installed wheel, never from a checkout
        env = {k: v for k, v in _env_without_checkout().items() if not k.startswith(("AIRFLOW", "PAPERKB_", "_PAPERKB"))}
        env.update(airflow_env(home=self.home, dags_folder=self.dags_folder, db_url=self.postgres.url,
                               broker_url=self.redis.url, api_url=f"http://127.0.0.1:{self.api_port}"))
        env.update({
            "PATH": f"{self.bin}{os.pathsep}{env.get('PATH', '')}",
            "PAPERKB_WAREHOUSE": str(self.warehouse),
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
            # a killed worker's task is noticed within seconds, not the default 5 minutes
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        })
        env.update(self.extra_env)
        return env

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

    def prepare(self) -> None:
        """``airflow db migrate`` and the politeness pools shipped with the DAGs."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.airflow("db", "migrate", timeout=600)
        self.airflow("pools", "import", str(Path(self.dags_folder) / "pools.json"))

    def start(self, name: str, *args: str, hostname: str | None = None, cpus: str | None = None) -> subprocess.Popen:
        """Start ``airflow ARGS`` as process ``name`` in its own session (killable as a group)."""
        log = self.root / f"{name}.log"
        cmd = [str(self.bin / "airflow"), *args]
        if cpus:
            cmd = ["taskset", "-c", cpus, *cmd]
        if hostname:
            # its own host name, as a worker on another host has (UTS namespace; needs root)
            cmd = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname, *cmd]
        proc = subprocess.Popen(cmd, env=self.env(), stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs[name] = proc
        return proc

    def start_services(self, workers: dict[str, str | None]) -> None:
        """api-server, scheduler, dag-processor, triggerer, then one Celery worker per entry
        (``{hostname: cpu list or None}``); returns when the api-server answers."""
        self.start("api-server", "api-server", "--host", "127.0.0.1", "--port", str(self.api_port))
        self.start("scheduler", "scheduler")
        self.start("dag-processor", "dag-processor")
        self.start("triggerer", "triggerer")
        for hostname, cpus in workers.items():
            self.start_worker(hostname, cpus)
        import urllib.request

        def healthy() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}/api/v2/monitor/health", timeout=2):
                return True

        _wait(healthy, "airflow api-server", 240, self.procs["api-server"], self.root / "api-server.log")

    def start_worker(self, hostname: str, cpus: str | None = None) -> subprocess.Popen:
        return self.start(f"worker-{hostname}", "celery", "worker", "--concurrency", "1",
                          "--celery-hostname", f"{hostname}@%h", hostname=hostname, cpus=cpus)

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
              self.root / "dag-processor.log")

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


def airflow_env(*, home: Path, dags_folder: str, db_url: str, broker_url: str, api_url: str,
                jwt_secret: str = "paperkb-deployment-test") -> dict[str, str]:
    """The Airflow settings every host of a Celery deployment shares (README: "Celery deployment")."""
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CORE__DAGS_FOLDER": dags_folder,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
        "AIRFLOW__CELERY__BROKER_URL": broker_url,
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + db_url.replace("+psycopg2", ""),
        "AIRFLOW__API__BASE_URL": api_url + "/",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": api_url + "/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
    }


@contextmanager
def deployment(root: Path, wheel: Path, extra_env: dict[str, str] | None = None,
               venv: Path | None = None) -> Iterator[Cluster]:
    """Postgres + Redis + a fresh ``paperkb[airflow]`` venv + a migrated metadata DB (no processes yet);
    ``root`` (warehouse, Airflow home, logs) starts empty."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    pg = Postgres(Path(tempfile.mkdtemp(prefix="paperkb-pg-"))).start()
    redis = Redis(root / "redis").start()
    try:
        venv = venv or fresh_venv(root / "venv", wheel, "airflow")
        cluster = Cluster(root=root, venv=venv, postgres=pg, redis=redis, extra_env=dict(extra_env or {}))
        cluster.prepare()
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        redis.stop()
        pg.stop()
        shutil.rmtree(pg.root, ignore_errors=True)
