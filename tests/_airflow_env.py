"""Airflow for the tests: a throwaway AIRFLOW_HOME with a SQLite metadata DB, no example DAGs.

Imported by tests/test_dags*.py and tests/test_airflow*.py BEFORE anything imports airflow (Airflow
reads its configuration once per process). ``migrated()`` runs ``airflow db migrate`` and imports the
pools from dags/pools.json once per test session -- the same commands ``make run`` uses.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DAGS = REPO_ROOT / "dags"
POOLS_FILE = DAGS / "pools.json"

if "airflow" in sys.modules and not os.environ.get("_PAPERKB_TEST_AIRFLOW_HOME"):
    raise RuntimeError("airflow was imported before tests/_airflow_env.py set AIRFLOW_HOME")

if not os.environ.get("_PAPERKB_TEST_AIRFLOW_HOME"):
    _home = Path(tempfile.mkdtemp(prefix="paperkb-airflow-test-"))
    # The process that made it removes it (subprocesses inherit the variable and leave it alone).
    atexit.register(shutil.rmtree, _home, ignore_errors=True)
    os.environ["_PAPERKB_TEST_AIRFLOW_HOME"] = str(_home)
    os.environ.update({
        "AIRFLOW_HOME": str(_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_home}/airflow.db",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    })

AIRFLOW_HOME = Path(os.environ["_PAPERKB_TEST_AIRFLOW_HOME"])
AIRFLOW_BIN = Path(sys.executable).with_name("airflow")
_migrated = False


def airflow_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the ``airflow`` command of this venv with the test AIRFLOW_HOME."""
    return subprocess.run([str(AIRFLOW_BIN), *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ), check=True)


def migrated() -> Path:
    """``airflow db migrate`` + ``airflow pools import dags/pools.json``, once per session."""
    global _migrated
    if not _migrated:
        airflow_cli("db", "migrate")
        airflow_cli("pools", "import", str(POOLS_FILE))
        _migrated = True
    return AIRFLOW_HOME


def dagbag():
    """Parse the dags/ folder the way the dag-processor does."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS), bundle_path=DAGS, bundle_name="dags-folder")
