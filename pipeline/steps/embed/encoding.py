"""Encoding: texts longest first, in checkpointed slices staged as they are done, with a reader thread ahead of the
encoder (:func:`prefetch`) and a writer thread behind it (:class:`StagingWriter`)."""

from __future__ import annotations

import logging
from typing import Callable, Iterable

import numpy as np

from pipeline.embedding.encoders import Encoder
from pipeline.settings import Settings
from pipeline.steps.embed.cache import VectorCache, _model_dim

log = logging.getLogger(__name__)


def prefetch(items: Iterable, depth: int = 1):
    """Iterate ``items`` in a background thread, at most ``depth`` items ahead of the caller; an error
    there is raised here. Leaving early stops the thread at its next item."""
    import queue
    import threading

    q: "queue.Queue" = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(msg) -> bool:
        while not stop.is_set():
            try:
                q.put(msg, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for it in items:
                if not put(("item", it)):
                    return
            put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            put(("error", exc))

    t = threading.Thread(target=run, name="paperkb-embed-reader", daemon=True)
    t.start()
    try:
        while True:
            kind, val = q.get()
            if kind == "end":
                return
            if kind == "error":
                raise val
            yield val
    finally:
        stop.set()


def length_order(inputs: list) -> np.ndarray:
    """Positions of ``inputs`` longest first (characters, a pair's parts added): batches of similar
    length pad little. Stable, so equal lengths keep their order."""
    lengths = np.array([len(x) if isinstance(x, str) else sum(len(p or "") for p in x) for x in inputs], dtype=np.int64)
    return np.argsort(-lengths, kind="stable")


def encode_in_length_order(encode, inputs: list) -> np.ndarray:
    """``encode(inputs)`` computed on the inputs sorted by length, rows returned in the original order."""
    if not inputs:
        return encode(inputs)
    order = length_order(inputs)
    vecs = encode([inputs[i] for i in order])
    out = np.empty_like(vecs)
    out[order] = vecs
    return out


def encode_checkpointed(settings: Settings, encoder: Encoder, cache: "VectorCache", part: str, hashes: list[str],
                        inputs: list, *, overlap: bool = True, advance: Callable[[int], None] | None = None) -> int:
    """Encode ``inputs`` in slices of ``embed_checkpoint_texts``, staging each slice's vectors as its own
    Parquet part as soon as it is done: a killed embed keeps every finished slice (the rerun's
    ``_shard_work`` skips staged hashes, and the merge absorbs the parts).

    The shard's texts are taken longest first (less padding per batch, the GPU's main waste); rows are
    staged by content hash, so the order does not matter downstream. With ``overlap`` a writer thread
    stages slice k (Arrow conversion, Parquet, rename) while the encoder works on slice k + 1, through a
    queue of at most 2 slices: the encoder never waits for the disk, and memory stays bounded."""
    dim = _model_dim(settings, encoder)
    step = max(1, int(settings.embed_checkpoint_texts))
    order = length_order(inputs)
    hashes = [hashes[i] for i in order]
    inputs = [inputs[i] for i in order]
    n_parts = (len(inputs) + step - 1) // step

    def stage(k: int, i: int, vecs: np.ndarray) -> None:
        name = part if n_parts == 1 else f"{part}-c{k:05d}"
        cache.write_staged(name, hashes[i:i + step], vecs, dim)
        if n_parts > 1:
            log.debug("embed: checkpoint %d/%d (%d texts) staged as %s", k + 1, n_parts, min(len(inputs), i + step), name)

    slices = [(k, i) for k, i in enumerate(range(0, len(inputs), step))]
    if not overlap or n_parts < 2:
        for k, i in slices:
            stage(k, i, encode_pieces(encoder, inputs[i:i + step], advance))
        return len(inputs)
    with StagingWriter(stage, depth=2) as writer:
        for k, i in slices:
            writer.put(k, i, encode_pieces(encoder, inputs[i:i + step], advance))
    return len(inputs)


PROGRESS_TEXTS = 256  # with a progress bar, texts are encoded in pieces of about this many (whole batches)


def encode_pieces(encoder: Encoder, inputs: list, advance: Callable[[int], None] | None = None) -> np.ndarray:
    """``encoder.encode_docs(inputs)``; with ``advance``, in pieces of whole batches (the same batches: the
    inputs come longest first), calling ``advance(n)`` after each, so a progress bar moves within a checkpoint."""
    if advance is None or not inputs:
        return encoder.encode_docs(inputs)
    batch = max(1, int(getattr(encoder, "batch_size", 64)))
    piece = batch * max(1, PROGRESS_TEXTS // batch)
    parts = []
    for j in range(0, len(inputs), piece):
        parts.append(encoder.encode_docs(inputs[j:j + piece]))
        advance(len(parts[-1]))
    return np.concatenate(parts)


class StagingWriter:
    """A writer thread fed through a bounded queue: ``put`` blocks while ``depth`` slices wait; leaving
    the ``with`` block waits for every write, and re-raises the first write error in the caller."""

    def __init__(self, write, depth: int = 2):
        import queue
        import threading

        self._write = write
        self._q: "queue.Queue" = queue.Queue(maxsize=max(1, depth))
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="paperkb-embed-writer", daemon=True)

    def __enter__(self) -> "StagingWriter":
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            if self._error is None:
                try:
                    self._write(*item)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    self._error = exc

    def put(self, *item) -> None:
        if self._error is not None:
            raise self._error
        self._q.put(item)

    def __exit__(self, *exc) -> None:
        self._q.put(None)
        self._thread.join()
        if self._error is not None and exc[0] is None:
            raise self._error
