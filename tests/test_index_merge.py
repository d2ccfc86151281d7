"""Tiered merging of LanceDB index deltas (issue 31, item 1: a night never rewrites the base index).

The plan is a pure function (``pipeline.embedding.index_merge``); the embed applies it to real LanceDB
tables, checked here on real CISI passages over several small nights."""

from __future__ import annotations

import pytest

from pipeline.embedding.index_merge import TOLERANCE, MergePlan, plan_merge
from embed_helpers import import_cisi_subset, make_settings


def test_a_new_delta_until_fan_in_deltas_of_a_nights_size_have_gathered():
    assert plan_merge([], 100, max_deltas=20, fan_in=4) == MergePlan(full=False, merge_newest=0)
    assert plan_merge([100, 100], 100, max_deltas=20, fan_in=4).merge_newest == 0
    # the night's rows and the three newest deltas become one delta: four nights of index, the base untouched
    assert plan_merge([100, 100, 100], 100, max_deltas=20, fan_in=4) == MergePlan(full=False, merge_newest=3)
    # nights a little smaller than the ones before still merge them; much smaller ones wait
    assert plan_merge([100, 110, 120], 100, max_deltas=20, fan_in=4).merge_newest == 3
    assert plan_merge([100, 100, 100], 50, max_deltas=20, fan_in=4).merge_newest == 0


def test_a_merged_delta_is_not_merged_again_and_a_night_writes_at_most_its_budget():
    blob = 400  # four earlier nights, merged before
    assert plan_merge([blob, 100, 100], 100, max_deltas=20, fan_in=4).merge_newest == 0
    assert plan_merge([blob, 100, 100, 100], 100, max_deltas=20, fan_in=4).merge_newest == 3
    for deltas, new in [([blob, blob, 90, 95, 99], 100), ([5, 900, 10, 10, 10], 12), ([300] * 6, 1000)]:
        n = plan_merge(deltas, new, max_deltas=20, fan_in=4).merge_newest
        assert new + sum(deltas[len(deltas) - n:]) <= TOLERANCE * 4 * new


def test_the_full_merge_comes_only_past_max_deltas_and_fan_in_below_two_never_tiers():
    assert plan_merge([100] * 19, 100, max_deltas=20, fan_in=0) == MergePlan(full=False, merge_newest=0)
    assert plan_merge([100] * 20, 100, max_deltas=20, fan_in=4) == MergePlan(full=True, merge_newest=0)
    assert plan_merge([], 100, max_deltas=0, fan_in=4).full  # 0: merge after every embed
    assert plan_merge([100] * 5, 100, max_deltas=20, fan_in=1).merge_newest == 0


def _segments(settings) -> dict[str, list[str]]:
    import lancedb

    ds = lancedb.connect(str(settings.lancedb_dir)).open_table("chunks").to_lance()
    return {ix.name: [seg.uuid for seg in ix.segments] for ix in ds.describe_indices()}


@pytest.mark.parametrize("fan_in", [2, 0])
def test_nights_of_real_passages_merge_deltas_in_tiers_and_keep_the_base_index(shared_data, tmp_path, fan_in):
    import lancedb

    from pipeline.steps.embed import index_deltas, run_embed

    s = make_settings(tmp_path, embed_index_max_deltas=20, embed_index_merge_fan_in=fan_in)
    import_cisi_subset(s, shared_data, 30)
    run_embed(s)
    base = {name: segs[0] for name, segs in _segments(s).items()}
    assert set(base) >= {"text_idx", "paper_id_idx"} and all(len(v) == 1 for v in _segments(s).values())
    done = []
    for night, n in enumerate(range(32, 42, 2), start=1):
        import_cisi_subset(s, shared_data, n)  # two new real papers a night
        done.append(run_embed(s)["indexes_built"]["chunks"])
        segs = _segments(s)
        assert {name: v[0] for name, v in segs.items()} == base, f"night {night} rewrote a base index"
        t = lancedb.connect(str(s.lancedb_dir)).open_table("chunks")
        deltas = index_deltas(t.to_lance())
        assert all(new == 0 for _, new in deltas.values())  # every row is indexed
        assert sum(deltas["text_idx"][0]) == t.count_rows() - sum(  # the deltas hold exactly the nights' rows
            f.metadata.physical_rows for f in t.to_lance().get_fragments()[:1])
        # a new paper's passage is found by the full-text index at once
        row = next(r for r in t.to_arrow().to_pylist() if r["paper_id"] == f"cisi:{n}")
        word = max(row["text"].split(), key=len).strip(".,;:()")
        assert row["chunk_id"] in [h["chunk_id"] for h in t.search(word, query_type="fts").limit(10).to_list()]
    deltas = len(_segments(s)["text_idx"]) - 1
    if fan_in:
        assert any("merged with the" in " ".join(d) for d in done), done
        assert deltas < 5
    else:
        assert deltas == 5 and not any("merged" in " ".join(d) for d in done), done
