"""``paperkb replay-server``: the recorded-data path from an installed paperkb (the server ships in the
wheel as ``pipeline.replay_server``; ``devtools.replay_server`` is the same code from a checkout)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from conftest import REPO_ROOT


def test_paperkb_replay_server_prints_the_exports_and_answers_with_the_recordings(shared_data, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "replay-server", str(shared_data), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        assert proc.stdout is not None
        exports = dict(proc.stdout.readline().removeprefix("export ").strip().split("=", 1) for _ in range(4))
        assert set(exports) == {"PAPERKB_ARXIV_OAI_URL", "PAPERKB_ARXIV_API_URL", "PAPERKB_ARXIV_PDF_URL",
                                "PAPERKB_S2_API_URL"}
        with urllib.request.urlopen(exports["PAPERKB_ARXIV_OAI_URL"] + "?verb=ListRecords&metadataPrefix=arXivRaw",
                                    timeout=30) as resp:
            assert b"<ListRecords>" in resp.read()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "replaying the recorded arXiv/S2 data" in err


def test_a_folder_without_recordings_is_one_line_and_exit_2(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "replay-server", str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("paperkb: error: no recorded data at")


@pytest.mark.parametrize("module", ["devtools.replay_server", "pipeline.replay_server"])
def test_both_import_paths_are_the_same_server(module):
    import importlib

    from pipeline.replay_server import ReplayServer

    assert importlib.import_module(module).ReplayServer is ReplayServer
