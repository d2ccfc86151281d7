"""Issue 28, defect 1: a feed never blocks a publish.

A saved interest that every new paper matches (threshold -1), then a night with new papers of an imported
collection (real CISI documents: no arXiv id, DOI or URL), one of them with control characters in its
title and abstract: the publish succeeds, CURRENT moves, and every feed item has a link. A feed that still
fails (a writer that raises, a name saved before the name rules) is logged as a warning and named in the
snapshot's manifest, while the snapshot publishes and its other feeds are written.
"""

from __future__ import annotations

import json
import logging

import pytest

from embed_helpers import clone_settings, import_cisi_subset, make_settings

pytestmark = pytest.mark.slow
BAD_TITLE = "Sets\x08 of <b>documents</b>\x00 and\x0b retrieval\x1f"


@pytest.fixture(scope="module")
def first_night(shared_data, tmp_path_factory):
    """5 CISI documents embedded and published with one saved interest (the baseline snapshot)."""
    from pipeline.feeds.interests import add_interest
    from pipeline.steps.embed import run_embed
    from pipeline.steps.publish import run_publish

    s = make_settings(tmp_path_factory.mktemp("nightfeeds"), snapshot_min_age_h=0)
    import_cisi_subset(s, shared_data, 5)
    run_embed(s)
    add_interest(s, "everything", query="information retrieval", threshold=-1.0)
    run_publish(s)
    return s


def _second_night(s, shared_data, **overrides):
    """Three new CISI papers (cisi:6..8), the last with control characters and HTML in title and abstract."""
    from pipeline.steps.embed import run_embed
    from pipeline.warehouse import Warehouse

    import_cisi_subset(s, shared_data, 8)
    with Warehouse(s) as wh:
        wh.con.execute("UPDATE papers SET title = ?, abstract = abstract || ? WHERE paper_id = 'cisi:8'",
                       [BAD_TITLE, " \x00\x08 end"])
    run_embed(s)
    return s.model_copy(update=overrides) if overrides else s


def test_a_paper_without_link_and_with_control_characters_publishes(first_night, shared_data, tmp_path):
    import feedparser

    from pipeline import snapshots
    from pipeline.steps.publish import run_publish

    s = _second_night(clone_settings(first_night, tmp_path), shared_data)
    before = snapshots.current_id(s.snapshots_dir)
    out = run_publish(s)
    assert snapshots.current_id(s.snapshots_dir) == out["snapshot_id"] != before
    manifest = snapshots.read_manifest(s.snapshots_dir / out["snapshot_id"])
    assert "feeds_failed" not in manifest and manifest["feeds"] == {"everything": 3}
    folder = s.snapshots_dir / out["snapshot_id"] / "feeds"
    feed = json.loads((folder / "everything.json").read_text(encoding="utf-8"))
    assert sorted(it["_paperkb"]["paper_id"] for it in feed["items"]) == ["cisi:6", "cisi:7", "cisi:8"]
    assert all(it["url"] == it["id"] and it["id"].startswith("tag:paperkb,") for it in feed["items"])
    bad = next(it for it in feed["items"] if it["_paperkb"]["paper_id"] == "cisi:8")
    assert bad["title"] == "Sets of <b>documents</b> and retrieval"
    atom = feedparser.parse((folder / "everything.atom").read_text(encoding="utf-8"))
    assert not atom.bozo and len(atom.entries) == 3 and all(e.link.startswith("tag:") for e in atom.entries)
    md = (folder / "everything.md").read_text(encoding="utf-8")
    assert "Sets of &lt;b&gt;documents&lt;/b&gt; and retrieval" in md and "<b>" not in md
    assert snapshots.verify(s.snapshots_dir, out["snapshot_id"]) == []


def test_with_a_base_url_items_link_to_their_page_on_the_served_site(first_night, shared_data, tmp_path):
    from pipeline.steps.publish import run_publish

    s = _second_night(clone_settings(first_night, tmp_path), shared_data, feed_base_url="https://kb.example.org/")
    sid = run_publish(s)["snapshot_id"]
    feed = json.loads((s.snapshots_dir / sid / "feeds" / "everything.json").read_text(encoding="utf-8"))
    assert {it["url"] for it in feed["items"]} == {f"https://kb.example.org/paper?id=cisi%3A{n}" for n in (6, 7, 8)}


@pytest.fixture
def failing_feeds(first_night, shared_data, tmp_path, monkeypatch, caplog):
    """A publish where one feed's Atom writer raises and one interest has a name saved before the name
    rules ('index'); returns (settings, publish summary)."""
    from pipeline import snapshots
    from pipeline.feeds import formats
    from pipeline.feeds.interests import add_interest
    from pipeline.steps.publish import run_publish
    from pipeline.warehouse import Warehouse

    s = _second_night(clone_settings(first_night, tmp_path), shared_data)
    add_interest(s, "second", query="library catalogues", threshold=-1.0)
    with Warehouse(s) as wh:  # a name saved before the name rules: it would overwrite feeds/index.json
        wh.con.execute("INSERT INTO interests SELECT 'index', kind, query, filters, seeds, threshold, source, "
                       "unmatched, created_at FROM interests WHERE name = 'second'")
    real = formats.render

    def render(fmt, feed, settings=None):
        if feed.name == "everything" and fmt == "atom":
            raise ValueError("the Atom writer broke")
        return real(fmt, feed, settings)

    before = snapshots.current_id(s.snapshots_dir)
    with monkeypatch.context() as mp, caplog.at_level(logging.WARNING):
        mp.setattr(formats, "render", render)
        out = run_publish(s)
    assert snapshots.current_id(s.snapshots_dir) == out["snapshot_id"] != before
    return s, out


def test_a_feed_that_still_fails_is_named_in_the_manifest_and_the_snapshot_publishes(failing_feeds, caplog, capsys):
    from pipeline import snapshots

    s, out = failing_feeds
    sid = out["snapshot_id"]
    manifest = snapshots.read_manifest(s.snapshots_dir / sid)
    assert manifest["feeds_failed"]["everything"] == {"atom": "ValueError: the Atom writer broke"}
    assert "interest name 'index'" in manifest["feeds_failed"]["index"]["name"]
    assert set(manifest["feeds_failed"]) == {"everything", "index"} and out["feeds_failed"] == ["everything", "index"]
    assert any("feed everything failed" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.get_records("setup"))
    folder = s.snapshots_dir / sid / "feeds"
    index = json.loads((folder / "index.json").read_text(encoding="utf-8"))  # not overwritten by the feed 'index'
    assert index["snapshot_id"] == sid and set(index["feeds"]) == {"everything", "second", "index"}
    assert not (folder / "everything.atom").exists() and (folder / "everything.json").is_file()
    assert set(index["feeds"]["everything"]["files"]) == {"json", "md", "html"}
    assert index["feeds"]["second"]["matched"] == 3 and "failed" not in index["feeds"]["second"]
    assert snapshots.verify(s.snapshots_dir, sid) == []
    from pipeline.errors import UserError
    from pipeline.feeds.write import feed_file

    with pytest.raises(UserError, match="has no atom file .* it failed"):
        feed_file(s.snapshots_dir / sid, "everything", "atom")
    from pipeline.cli import main

    assert main(["--warehouse", str(s.warehouse), "feeds", "--snapshot", sid]) == 0
    listed = " ".join(capsys.readouterr().out.split())  # lines wrapped at 80 columns, read as one text
    assert "FAILED atom: ValueError: the Atom writer broke" in listed and "FAILED name: interest name 'index'" in listed
    from fastapi.testclient import TestClient

    from pipeline.serve.app import create_app

    with TestClient(create_app(s, sid)) as c:
        assert set(c.get("/api/feeds").json()["feeds"]) == {"everything", "second", "index"}
        assert c.get("/api/feeds/everything").status_code == 200
        r = c.get("/api/feeds/everything", params={"format": "atom"})
        assert r.status_code == 400 and "it failed" in r.json()["detail"]
        assert c.get("/api/feeds/index").status_code == 400


@pytest.mark.browser
def test_the_feeds_page_shows_the_feeds_that_load_when_one_fails(failing_feeds):
    from live_server import NEEDS_CHROMIUM, chromium_page, served

    if NEEDS_CHROMIUM.args[0]:
        pytest.skip(NEEDS_CHROMIUM.kwargs["reason"])
    s, out = failing_feeds
    errors: list[str] = []
    with served(s) as url, chromium_page() as page:
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}/feeds")
        page.wait_for_selector("section.feed li.feeditem")
        for name in ("everything", "second"):
            assert page.locator(f'section[data-feed="{name}"] li.feeditem').count() == 3
        failed = page.locator('section.failed[data-feed="index"]')
        assert failed.count() == 1 and "could not be loaded" in failed.inner_text()
        assert "reserved" in failed.inner_text()
    assert errors == []


def test_feeds_that_cannot_be_written_at_all_leave_the_snapshot_publishing(first_night, shared_data, tmp_path,
                                                                           monkeypatch):
    from pipeline import snapshots
    from pipeline.feeds import write
    from pipeline.steps.publish import run_publish

    s = _second_night(clone_settings(first_night, tmp_path), shared_data)

    def broken(folder, manifest, previous, settings):
        (folder / "feeds").mkdir()
        (folder / "feeds" / "half.json").write_text("{")
        raise OSError("disk full")

    monkeypatch.setattr(write, "write_feeds", broken)
    out = run_publish(s)
    sid = out["snapshot_id"]
    assert snapshots.current_id(s.snapshots_dir) == sid and out["feeds_failed"] == ["(every feed)"]
    manifest = snapshots.read_manifest(s.snapshots_dir / sid)
    assert manifest["feeds_failed"] == {"(every feed)": {"feeds": "OSError: disk full"}}
    assert "feeds" not in manifest["layout"] and not (s.snapshots_dir / sid / "feeds").exists()
    assert snapshots.verify(s.snapshots_dir, sid) == []
