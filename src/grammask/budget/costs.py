"""Token counts with an infinity: costs saturate at :data:`INF` instead of overflowing int32 arrays."""

from __future__ import annotations

import numba as nb

INF = 1 << 29
"""A cost meaning "no completion known"; sums of costs saturate there."""


@nb.njit(cache=True)
def add(a, b):
    """``a + b``, saturating at :data:`INF` (usable from Python and from compiled code)."""
    s = a + b
    return min(INF, s)
