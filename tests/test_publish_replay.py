"""bench.publish_replay: one night's publish replayed stage by stage (issue 31, item 1) on the synthetic papers the
publish benchmark times: every round publishes the same night against the same previous snapshot, and the
warehouse's snapshots and CURRENT are as they were after."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_each_round_publishes_the_same_night_and_current_is_put_back(tmp_path):
    import pipeline.steps.catalog.build as catalog  # where build_catalog looks write_table up
    import pipeline.steps.publish as publish
    from bench.publish_replay import build, prepare, replay, settings_of, summary
    from pipeline import snapshots as snap

    build(tmp_path, 400)
    root = settings_of(tmp_path).snapshots_dir
    before = sorted(p.name for p in root.iterdir())
    night = prepare(tmp_path, 0.05)
    assert night["papers_before"] == 400 and night["papers_added"] == 20 and night["current"] == snap.current_id(root)
    originals = (publish.build_catalog, catalog.write_table, snap.verify)
    rows = replay(tmp_path, night["current"], rounds=2, floor=1)
    assert [r["kind"] for r in rows] == ["night", "night", "night, kept", "nothing new"]
    nights = [r for r in rows if r["kind"].startswith("night")]
    assert len({r["bytes_new"] for r in nights}) == 1  # the same night each time, against the same snapshot
    assert 0 < rows[-1]["bytes_new"] < nights[0]["bytes_new"]  # nothing new: far less than the night
    for r in nights:
        assert {"build_catalog", "_lancedb_side", "write_manifest", "verify"} <= set(r["stages"])
        assert {"related", "chunks", "papers", "paper_metrics"} <= set(r["tables"])
        assert r["seconds"] > 0 and r["cpu_s"] > 0
    assert summary(rows)["night"]["rounds"] == 2 and summary(rows)["nothing new"]["rounds"] == 1
    # the snapshots and CURRENT as they were, and the publish's functions its own again
    assert sorted(p.name for p in root.iterdir()) == before and snap.current_id(root) == night["current"]
    assert (publish.build_catalog, catalog.write_table, snap.verify) == originals
