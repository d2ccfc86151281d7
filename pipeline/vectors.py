"""Vector math shared by the embed step and the readers (pure NumPy)."""

from __future__ import annotations

import numpy as np


def l2_normalise(m: np.ndarray, dtype: type = np.float32) -> np.ndarray:
    """Rows scaled to unit length, computed in ``dtype``; all-zero rows (missing vectors) stay zero. A 1-d
    vector comes back as one row."""
    m = np.asarray(m, dtype=dtype)
    if m.ndim == 1:
        m = m[None, :]
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)
