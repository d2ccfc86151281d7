"""Property-based run (schemathesis + hypothesis) over the published OpenAPI schema: for every
operation, generated inputs (valid and invalid) never produce a 5xx."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings as hsettings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402

from pipeline.serve import create_app  # noqa: E402


def test_no_server_errors(cisi_snapshot):
    # schemathesis' own pytest plugin does not run under pytest 9, so its strategies are driven here.
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(cisi_snapshot))
    operations = [r.ok() for r in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/api/search", "/api/papers/{paper_id}", "/api/health"}
    failures: list[str] = []
    for op in operations:
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            strategy = op.as_strategy(generation_mode=mode)

            @given(case=strategy)
            @hsettings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            def check(case):
                response = case.call(timeout=300)
                if response.status_code >= 500:
                    failures.append(f"{case.method} {case.formatted_path} {case.query} -> {response.status_code}: {response.text[:200]}")

            try:
                check()
            except Unsatisfiable:  # no invalid input exists for an operation without parameters
                assert mode == schemathesis.GenerationMode.NEGATIVE
    assert not failures, "\n".join(failures[:10])
