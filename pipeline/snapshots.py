"""Published snapshots: find, list, read and verify them (standard library only, safe for any reader).

Layout (the contract for downstream apps)::

    warehouse/snapshots/
        CURRENT                 one line: the id of the snapshot readers should open
        <id>/manifest.json      snapshot_id, created_at, schema_version, counts, model, weights,
                                watermarks, files {relative path: sha256}
        <id>/catalog.duckdb     the analyst/app tables (papers, authors, citations, chunks, metrics...) as views:
                                one per table over <id>/catalog/<table>/*.parquet (paths relative to the
                                snapshot folder), and the warehouse's own views; open it with
                                :func:`open_catalog` (or run DuckDB with the snapshot folder as working
                                directory), never by its path alone
        <id>/catalog/<table>/<fingerprint>.parquet
                                the table's rows in deterministic partitions, each named by a fingerprint of
                                its content (pipeline.steps.catalog): a partition a night did not change is
                                a hard link to the previous snapshot's file
        <id>/lancedb/           LanceDB tables chunks, papers, figures (vectors + BM25 index)
        <id>/query_encoder/     the query model exported for ONNX Runtime / OpenVINO, its tokenizer.json and
                                query_encoder.json (pooling, length): queries encoded without torch
                                (pipeline.embedding.query_encoder; absent in older snapshots)
        <id>/bm25/chunks.npz    BM25 statistics of the passages, counted at publish (pipeline.query.bm25_stats)
        <id>.tmp/               a publish in progress (never opened by readers, removed if abandoned)
        .pins/<id>@...json      readers' leases: retention never deletes a pinned snapshot (pipeline.pins)

Every part of a snapshot grows with the change: LanceDB files, catalog partitions and the query encoder a night
did not change are hard links to the previous snapshot's (the vectors' rows hold no value a night moves for
many papers: citation counts, PageRank and weights are in the catalog's ``paper_ranks``, see
:mod:`pipeline.query.ranks`). Schema 1 snapshots (one self-contained ``catalog.duckdb``; rank values in the
LanceDB ``papers`` rows) are still read.

A snapshot folder never changes once its name is final. ``CURRENT`` is replaced atomically
(``os.replace``), so a reader sees either the old id or the new one, and a reader that resolved a
snapshot keeps reading the same files while a newer one is published.

:func:`check` is the cheap test every reader runs when it opens a snapshot (``stat`` only: the manifest's
shape, each listed file and its size, the indexes search needs); :func:`verify` re-hashes everything.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any, Sequence

from pipeline.errors import DamagedSnapshot, UserError

SCHEMA_VERSION = 2  # 2: the catalog as Parquet partitions + views; ranks out of the LanceDB rows
CURRENT = "CURRENT"
MANIFEST = "manifest.json"
TMP_SUFFIX = ".tmp"
DELETING_SUFFIX = ".deleting"


def snapshots_root(settings_or_root: Any) -> Path:
    """``settings.snapshots_dir``, a warehouse folder, or the snapshots folder itself."""
    if hasattr(settings_or_root, "snapshots_dir"):
        return Path(settings_or_root.snapshots_dir)
    p = Path(settings_or_root)
    if (p / "snapshots").is_dir() and not (p / CURRENT).exists():
        return p / "snapshots"
    return p


def is_snapshot_name(name: str) -> bool:
    return not name.startswith(".") and not name.endswith((TMP_SUFFIX, DELETING_SUFFIX)) and name != CURRENT


def current_id(settings_or_root: Any) -> str | None:
    f = snapshots_root(settings_or_root) / CURRENT
    try:
        value = f.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return value or None


def resolve(settings_or_root: Any, snapshot_id: str | None = None) -> Path:
    """The folder of snapshot ``snapshot_id``, or of ``CURRENT`` when None. ``settings_or_root`` is a
    Settings, a warehouse or snapshots folder, or a snapshot folder itself (one holding ``manifest.json``,
    which resolves to itself when no id is given). UserError if missing."""
    if snapshot_id is None and not hasattr(settings_or_root, "snapshots_dir") \
            and (Path(settings_or_root) / MANIFEST).is_file():
        return Path(settings_or_root)
    root = snapshots_root(settings_or_root)
    if snapshot_id is None:
        snapshot_id = current_id(root)
        if snapshot_id is None:
            raise UserError(f"no published snapshot in {root}: run `paperkb publish` first")
    if not is_snapshot_name(snapshot_id) or "/" in snapshot_id or "\\" in snapshot_id:
        raise UserError(f"not a snapshot id: {snapshot_id!r}")
    path = root / snapshot_id
    if not (path / MANIFEST).is_file():
        known = ", ".join(s["snapshot_id"] for s in list_snapshots(root, check_files=False, with_pins=False)[-5:]) or "none"
        raise UserError(f"snapshot {snapshot_id} not found in {root} (latest: {known})")
    return path


def read_manifest(path: Path | str) -> dict:
    """The manifest of a snapshot folder (or of the manifest file itself): a JSON object, else
    DamagedSnapshot (a UserError)."""
    p = Path(path)
    if p.is_dir():
        p = p / MANIFEST
    sid = p.parent.name
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"no manifest at {p}") from None
    except UnicodeDecodeError:
        raise DamagedSnapshot(sid, [f"{MANIFEST} is not valid JSON (not UTF-8 text)"]) from None
    except json.JSONDecodeError as exc:
        raise DamagedSnapshot(sid, [f"{MANIFEST} is not valid JSON (truncated?): {exc}"]) from None
    if not isinstance(m, dict):
        raise DamagedSnapshot(sid, [f"{MANIFEST} holds a JSON {_json_kind(m)}, not an object"])
    return m


def _json_kind(v: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean",
            type(None): "null"}.get(type(v), type(v).__name__)


def list_snapshots(settings_or_root: Any, *, check_files: bool = True, with_pins: bool = True) -> list[dict]:
    """Every published snapshot, oldest first: id, path, created_at, current, counts, model, bytes, bytes_new (what
    it added beside the snapshot before it), status, problems, pinned_by.

    ``status`` is ``ok`` or ``damaged`` (``problems`` says why: see :func:`check`; with ``check_files=False``
    only the manifest is read). A folder with a damaged manifest is listed too (created_at None), a
    folder holding neither manifest nor data (or ``*.tmp``, ``*.deleting``) is not a snapshot."""
    from pipeline import pins

    root = snapshots_root(settings_or_root)
    if not root.is_dir():
        return []
    cur = current_id(root)
    out = []
    for d in root.iterdir():
        if not d.is_dir() or not is_snapshot_name(d.name):
            continue
        if not (d / MANIFEST).is_file():
            if not ((d / "catalog.duckdb").exists() or (d / "lancedb").exists()):
                continue
            m, problems = {}, [f"no {MANIFEST}"]
        else:
            try:
                m = read_manifest(d)
                problems = check(d, m) if check_files else _shape_problems(m)
            except UserError as exc:
                m, problems = {}, list(getattr(exc, "problems", None) or [str(exc)])
        counts = m.get("counts") if isinstance(m.get("counts"), dict) else {}
        model = m.get("model") if isinstance(m.get("model"), dict) else None
        sizes = m.get("sizes") if isinstance(m.get("sizes"), dict) else {}
        created = m.get("created_at") if isinstance(m.get("created_at"), str) else None
        out.append({"snapshot_id": d.name, "path": str(d), "created_at": created,
                    "current": d.name == cur, "counts": counts, "model": model.get("name") if model else None,
                    "bytes": sum(v for v in sizes.values() if isinstance(v, int)) if sizes else None,
                    # what it added to the disk beside the snapshot before it (None: published by an older paperkb)
                    "bytes_new": m.get("bytes_new") if isinstance(m.get("bytes_new"), int) else None,
                    "status": "damaged" if problems else "ok", "problems": problems,
                    "pinned_by": pins.holders(root, d.name) if with_pins else []})
    out.sort(key=lambda s: (s["created_at"] or "", s["snapshot_id"]))
    return out


# ---- the open check: cheap (stat only) ------------------------------------------------------------------
def check(folder: Path | str, manifest: dict | None = None, *, need_fts: bool = True) -> list[str]:
    """What would stop a reader, found without reading any data (``stat`` only; :func:`verify` re-hashes):

    - the manifest is a JSON object whose ``files`` maps relative paths to checksums (and ``sizes``,
      ``counts``, ``model``, ``indexes``, when present, have their published shapes);
    - every listed file exists, with its listed size;
    - the catalog and each LanceDB table of ``layout`` are listed, and the indexes the search needs are:
      the full-text (BM25) index of ``chunks.text`` (every search draws BM25 candidates; ``need_fts``)
      and every index recorded under ``indexes``.

    Returns the problems, most telling first; empty = fit to open."""
    folder = Path(folder)
    if manifest is None:
        try:
            manifest = read_manifest(folder)
        except UserError as exc:
            return list(getattr(exc, "problems", None) or [str(exc)])
    problems = _shape_problems(manifest)
    if problems:
        return problems
    files: dict[str, str] = manifest["files"]
    sizes: dict[str, int] = manifest.get("sizes") or {}
    missing, resized = [], []
    for rel in files:
        try:
            st = os.stat(folder / rel)
        except FileNotFoundError:
            missing.append(rel)
            continue
        except NotADirectoryError:
            missing.append(rel)
            continue
        want = sizes.get(rel)
        if want is not None and st.st_size != want:
            resized.append((rel, st.st_size, want))
    # a missing index or data file says more than a missing scalar index: sort by what it is
    missing.sort(key=lambda r: (_RANK.get(_kind(r)[0], 9), r))
    problems += [f"missing file {rel} ({_describe(rel)})" for rel in missing]
    problems += [f"file {rel} ({_describe(rel)}) is {got} bytes, the manifest says {want}" for rel, got, want in resized]
    problems += _index_problems(manifest, need_fts)
    return problems


def _shape_problems(m: dict) -> list[str]:
    files = m.get("files")
    if not isinstance(files, dict) or not files:
        return [f"{MANIFEST} lists no files" if files in (None, {}, []) else f"{MANIFEST}: 'files' is not an object"]
    for rel, digest in files.items():
        # (split, not Path(rel).parts: a Path per file cost ~8 ms a manifest at 3,000 files, and retention reads each kept one)
        if not isinstance(digest, str) or rel.startswith("/") or ".." in rel.replace("\\", "/").split("/") or rel == MANIFEST:
            return [f"{MANIFEST}: bad entry in 'files': {rel!r}"]
    for key, kind in (("sizes", dict), ("counts", dict), ("model", dict), ("indexes", dict), ("layout", dict)):
        if key in m and m[key] is not None and not isinstance(m[key], kind):
            return [f"{MANIFEST}: {key!r} is a JSON {_json_kind(m[key])}, not an object"]
    if any(not isinstance(v, int) for v in (m.get("sizes") or {}).values()):
        return [f"{MANIFEST}: 'sizes' holds a size that is not a whole number"]
    return []


_RANK = {"fts": 0, "data": 1, "versions": 2, "catalog": 3, "vector": 4, "scalar": 5}


def _kind(rel: str) -> tuple[str, str | None]:
    """(what kind of file, which LanceDB table) for a snapshot-relative path."""
    parts = rel.split("/")
    if rel == CATALOG or parts[0] == "catalog":
        return "catalog", None
    if len(parts) >= 3 and parts[0] == "lancedb" and parts[1].endswith(".lance"):
        table, sub, name = parts[1][: -len(".lance")], parts[2], parts[-1]
        if sub == "_indices":
            if name.endswith(".idx"):
                return "vector", table
            if name.startswith("page_"):
                return "scalar", table
            return "fts", table
        if sub == "data":
            return "data", table
        if sub == "_versions":
            return "versions", table
        return "lance", table
    return "file", None


def _describe(rel: str) -> str:
    kind, table = _kind(rel)
    return {"catalog": "the DuckDB catalog" if rel == CATALOG else "a Parquet file of the catalog", "fts": f"the full-text (BM25) index of {table}",
            "vector": f"a vector index of {table}", "scalar": f"a scalar index of {table}",
            "data": f"a data file of LanceDB table {table}", "versions": f"the version manifest of LanceDB table {table}",
            "lance": f"LanceDB table {table}"}.get(kind, "a snapshot file")


def _index_problems(m: dict, need_fts: bool) -> list[str]:
    files = m["files"]
    layout = m.get("layout") or {}
    problems = []
    if layout:  # a snapshot written by `paperkb publish`: its catalog and tables must be listed
        if layout.get("catalog") and layout["catalog"] not in files:
            problems.append(f"the manifest lists no {layout['catalog']}")
        for t in layout.get("lancedb_tables") or []:
            if not any(r.startswith(f"lancedb/{t}.lance/_versions/") for r in files):
                problems.append(f"the manifest lists no LanceDB table {t}")
    indexes = m.get("indexes")
    for table, ixs in (indexes or {}).items():
        for ix in ixs if isinstance(ixs, list) else []:
            if not isinstance(ix, dict) or not ix.get("uuid"):
                continue
            if not any(r.startswith(f"lancedb/{table}.lance/_indices/{ix['uuid']}/") for r in files):
                problems.append(f"the manifest lists no files of the {ix.get('type') or ''} index "
                                f"{ix.get('name') or ix['uuid']} of {table}")
    n_chunks = (m.get("counts") or {}).get("lancedb.chunks")
    if need_fts and isinstance(n_chunks, int) and n_chunks > 0:
        if isinstance(indexes, dict) and "chunks" in indexes:
            fts = any(isinstance(ix, dict) and str(ix.get("type", "")).upper() in ("FTS", "INVERTED")
                      and "text" in (ix.get("columns") or []) for ix in indexes.get("chunks") or [])
        else:  # published before indexes were recorded: recognise the index by its files
            fts = any(_kind(r) == ("fts", "chunks") for r in files)
        if not fts:
            problems.append("no full-text (BM25) index on chunks.text, which every search needs: publish again "
                            "after `paperkb embed`")
    return problems


def check_or_raise(folder: Path | str, manifest: dict | None = None, *, need_fts: bool = True) -> None:
    """:func:`check`, raising DamagedSnapshot (one line, exit code 2) on the first problems."""
    problems = check(folder, manifest, need_fts=need_fts)
    if problems:
        raise DamagedSnapshot(Path(folder).name, problems)


# ---- the catalog -----------------------------------------------------------------------------------
CATALOG = "catalog.duckdb"


#: DuckDB settings every catalog connection opens with: no extension is installed or loaded behind the caller's back
#: (those paperkb needs, parquet, json and icu, are built into the duckdb wheel)
CONNECT_CONFIG: dict[str, str | bool | int | float | list[str]] = {"autoinstall_known_extensions": False,
                                                               "autoload_known_extensions": False}


_OPENING = threading.Lock()


def open_catalog(folder: Path | str):
    """The one way to open a snapshot's catalog: a read-only DuckDB connection to ``<folder>/catalog.duckdb``
    whose relative Parquet paths resolve inside ``folder`` (DuckDB resolves them against its
    ``file_search_path``, else the process's working directory). The caller closes it. UserError when the
    snapshot has no catalog. Works for schema 1 catalogs (tables in the file itself) too.

    The connection reads the snapshot's own files and nothing else (:func:`lock_down`), because the catalog's
    views are whatever its file says, and a snapshot may come from a store (``pipeline.store``): a view over
    ``read_csv('/etc/passwd')`` is refused, as are ``COPY ... TO``, ``EXPORT DATABASE``, ``ATTACH``, ``INSTALL`` and
    ``LOAD``, and changing any of these settings. Open it from the working directory the process keeps: DuckDB
    checks a view's relative path (``catalog/papers/*.parquet``) against the working directory of the moment."""
    import duckdb

    folder = Path(folder).resolve()
    path = folder / CATALOG
    if not path.is_file():
        raise UserError(f"snapshot {folder.name} has no {CATALOG}")
    # One opening at a time in a process: DuckDB gives every connection to the same file one database, and a second
    # opening must not find it half configured (nor try to configure it once the first has locked it)
    with _OPENING:
        con = duckdb.connect(str(path), read_only=True, config=CONNECT_CONFIG)
        try:
            if not locked(con):  # else a connection of this process has it open, configured (DuckDB shares it)
                # GLOBAL: cursors (what serve and mcp hand each request) are new connections and would not see a session
                # setting
                con.execute(f"SET GLOBAL file_search_path = '{sql_quote(str(folder))}'")
                # each query of a view reads the footers of its table's ~60 partition files again without it (13 ms for
                # a count of papers at 100,000 papers, 1.4 ms with it; a paper page's requests ~20% faster: BENCHMARKS.md).
                # A snapshot's files never change; DuckDB reads a file's footer again when its modification time changes
                con.execute("SET GLOBAL parquet_metadata_cache = true")
                lock_down(con, [folder], view_globs(folder))
        except BaseException:
            con.close()
            raise
    return con


def view_globs(folder: Path) -> list[str]:
    """The relative paths the views of a catalog written by ``pipeline.steps.catalog`` read: ``catalog/<table>/*.parquet``
    for each table folder the snapshot has (none for a schema 1 catalog)."""
    files = folder / "catalog"
    return sorted(f"catalog/{d.name}/*.parquet" for d in files.iterdir() if d.is_dir()) if files.is_dir() else []


def locked(con) -> bool:
    """Whether the DuckDB database of ``con`` runs locked down already (:func:`lock_down`)."""
    return bool(con.execute("SELECT current_setting('lock_configuration')").fetchall()[0][0])


def lock_down(con, directories: Sequence[Path], paths: Sequence[str] = ()) -> None:
    """Limit the DuckDB database of ``con`` (every connection and cursor on it) to reading the files under
    ``directories`` and the relative ``paths`` (DuckDB makes them absolute against the working directory; its own
    database file is allowed anyway): external access off (no other file, no URL, no ATTACH, no COPY ... TO, no
    EXPORT, no INSTALL or LOAD of extensions), and the configuration locked, so no statement turns it back on."""
    listed = ", ".join(f"'{sql_quote(str(d).rstrip('/') + '/')}'" for d in directories)
    con.execute(f"SET GLOBAL allowed_directories = [{listed}]")
    if paths:
        con.execute("SET GLOBAL allowed_paths = [" + ", ".join(f"'{sql_quote(p)}'" for p in paths) + "]")
    con.execute("SET GLOBAL enable_external_access = false")
    con.execute("SET GLOBAL lock_configuration = true")


def sql_quote(text: str) -> str:
    """``text`` for a single-quoted SQL string literal."""
    return text.replace("'", "''")


# ---- checksums ------------------------------------------------------------------------------------
def sha256_file(path: Path | str, bufsize: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(bufsize):
            h.update(chunk)
    return h.hexdigest()


def sha256_files(paths: list[Path] | list[str]) -> list[str]:
    """:func:`sha256_file` of each of ``paths``, in that order, in threads (hashlib and file reads release the GIL: a
    night's new files hash on every core)."""
    if len(paths) < 2:
        return [sha256_file(p) for p in paths]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="sha256") as pool:
        return list(pool.map(sha256_file, paths))


def same_inode(st: os.stat_result, other: Path | str) -> bool:
    """Whether ``other`` is the file ``st`` describes (a hard link of it): what a snapshot shares with the one before."""
    try:
        o = os.stat(other)
    except OSError:
        return False
    return (o.st_ino, o.st_dev) == (st.st_ino, st.st_dev)


def snapshot_files(folder: Path) -> list[str]:
    """Relative paths (POSIX) of every file in a snapshot except the manifest, sorted."""
    files: list[str] = []
    top = str(folder)
    for dirpath, _dirs, names in os.walk(top):  # (strings: a Path per file cost 20 ms a publish at 1,000 files)
        rel_dir = os.path.relpath(dirpath, top).replace(os.sep, "/")
        prefix = "" if rel_dir == "." else rel_dir + "/"
        files.extend(prefix + n for n in names)
    return sorted(f for f in files if f != MANIFEST)


def verify(settings_or_root: Any, snapshot_id: str | None = None, *, path: Path | None = None,
           trusted: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Problems found by re-hashing every file against the manifest, plus the open check's (the manifest's
    shape, the indexes search needs: see :func:`check`); empty list = intact. Files in ``trusted`` (shared
    hard links whose checksum publish took from the previous snapshot) are only checked for presence and
    size; `paperkb snapshots verify` passes none, so it re-hashes everything."""
    folder = Path(path) if path is not None else resolve(settings_or_root, snapshot_id)
    m = read_manifest(folder)
    problems = _shape_problems(m)
    if problems:
        return problems
    expected: dict[str, str] = m["files"]
    sizes = m.get("sizes") or {}
    present = set(snapshot_files(folder))
    top = str(folder)
    to_hash = []
    for rel, _digest in sorted(expected.items()):
        if rel not in present:
            problems.append(f"missing file {rel}")
        elif rel in trusted:
            size = os.stat(os.path.join(top, rel)).st_size
            if size != sizes.get(rel, size):
                problems.append(f"size mismatch {rel}")
        else:
            to_hash.append(rel)
    for rel, got in zip(to_hash, sha256_files([os.path.join(top, rel) for rel in to_hash])):
        if got != expected[rel]:
            problems.append(f"checksum mismatch {rel}")
    for rel in sorted(present - set(expected)):
        problems.append(f"unexpected file {rel}")
    return problems + _index_problems(m, need_fts=True)  # what the open check asks of a manifest, too


# ---- CURRENT ----------------------------------------------------------------------------------------
def write_current(settings_or_root: Any, snapshot_id: str) -> None:
    """Point CURRENT at ``snapshot_id`` atomically (write a temp file, fsync, ``os.replace``)."""
    root = snapshots_root(settings_or_root)
    resolve(root, snapshot_id)  # must exist and be complete
    tmp = root / f".{CURRENT}.{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(snapshot_id + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, root / CURRENT)
    fsync_dir(root)


def rollback(settings_or_root: Any, snapshot_id: str) -> dict:
    """Make an older (or any complete, intact) snapshot CURRENT again. Given the ``Settings``, it holds the
    warehouse's writer lock, so a publish running meanwhile cannot swap CURRENT over it (one line instead)."""
    if hasattr(settings_or_root, "warehouse"):
        from pipeline import writer_lock

        with writer_lock.hold(settings_or_root.warehouse, "rollback"):
            return _rollback(snapshots_root(settings_or_root), snapshot_id)
    return _rollback(snapshots_root(settings_or_root), snapshot_id)


def _rollback(root: Path, snapshot_id: str) -> dict:
    folder = resolve(root, snapshot_id)
    problems = verify(root, path=folder)
    if problems:
        raise UserError(f"snapshot {snapshot_id} failed verification ({problems[0]}); not rolling back to it")
    previous = current_id(root)
    write_current(root, snapshot_id)
    return {"snapshot_id": snapshot_id, "previous": previous, "path": str(folder)}


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
