"""Snapshots on an S3-compatible object store (``PAPERKB_SNAPSHOT_STORE=s3://bucket/prefix``).

Layout in the store (the contract for readers on other hosts)::

    <prefix>/objects/<sha256>               every file of every snapshot, named by its content (the sha256
                                            its manifest lists): a file shared by two snapshots is stored once
    <prefix>/snapshots/<id>/manifest.json   the snapshot's manifest (``files`` {relative path: sha256})
    <prefix>/CURRENT                        the id readers following the store open, on its first line
                                            (a second line, when and by whom, makes each write's ETag new)
    <prefix>/pins/<id>@<holder>.json        a reader's lease on snapshot <id> ({"expires_at": ...}): retention
                                            keeps a snapshot while an unexpired lease names it

A publish (:mod:`pipeline.store.push`) uploads the objects the store lacks, then the manifest, then moves
``CURRENT`` last with a conditional write (``If-None-Match: *`` for the first, ``If-Match: <etag>`` after),
so a snapshot is complete before any reader can find it and two publishers cannot both win.
Readers (:mod:`pipeline.store.materialise`) copy a snapshot into a local content-addressed cache and open
that folder with the local code; :mod:`pipeline.store.retention` keeps the newest ``snapshot_keep``
snapshots, CURRENT and the pinned ones, then deletes the objects no kept manifest lists.

Store URLs: ``s3://bucket/prefix`` (follows CURRENT) or ``s3://bucket/prefix@<snapshot id>`` (one snapshot).
"""

from pipeline.store.url import StoreURL, is_store_url, parse_store_url

__all__ = ["StoreURL", "is_store_url", "parse_store_url"]
