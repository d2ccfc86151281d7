"""Shared fixtures: the real data beside the checkout, isolated settings, offline models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("PAPERKB_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``: the recorded responses, PDFs and test collections."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real test data not found at {SHARED_DATA} (expected ../shared/data beside the checkout)")
    return SHARED_DATA


@pytest.fixture
def settings(tmp_path, monkeypatch):
    """Settings with a fresh warehouse under tmp_path and no politeness delays (tests only)."""
    for key in list(os.environ):
        if key.startswith("PAPERKB_") and key != "PAPERKB_SHARED_DATA":
            monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("S2_API_KEY", raising=False)
    from pipeline.settings import Settings

    return Settings.load(warehouse=tmp_path / "warehouse", arxiv_delay_s=0.0, s2_delay_s=0.0, retry_max_backoff_s=0.05)
