"""Optional cross-encoder rerank of the top candidates (sentence-transformers ``CrossEncoder``).

The model is a setting (``query_rerank_model``). When it cannot be loaded (not installed, no
network for a hub name) rerank is switched off for that search and the response says why.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)

_MODELS: dict[str, object] = {}
_FAILED: dict[str, str] = {}
_LOCK = threading.Lock()


def load_cross_encoder(name_or_path: str | None):
    """``(model, None)`` or ``(None, reason)``; loads once per process, remembers failures too."""
    if not name_or_path:
        return None, "no cross-encoder model is configured (set PAPERKB_QUERY_RERANK_MODEL)"
    with _LOCK:
        if name_or_path in _MODELS:
            return _MODELS[name_or_path], None
        if name_or_path in _FAILED:
            return None, _FAILED[name_or_path]
        try:
            from sentence_transformers import CrossEncoder

            model = CrossEncoder(name_or_path, device="cpu")
        except ModuleNotFoundError as exc:  # a base install: the encoders are an extra
            reason = f"the cross-encoder needs {exc.name!r}: install paperkb[encoders]"
            _FAILED[name_or_path] = reason
            return None, reason
        except Exception as exc:  # missing files, offline hub, bad config: all mean "rerank off"
            reason = f"cross-encoder {name_or_path!r} could not be loaded ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
            _FAILED[name_or_path] = reason
            return None, reason
        _MODELS[name_or_path] = model
        return model, None


def cross_scores(model, query: str, passages: list[str], batch_size: int = 32):
    """Relevance logits for (query, passage) pairs as a numpy array."""
    import numpy as np

    if not passages:
        return np.zeros(0)
    return np.asarray(model.predict([(query, p) for p in passages], batch_size=batch_size, show_progress_bar=False), dtype=float)
