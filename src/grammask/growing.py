"""Append-only arrays that readers on other threads may keep using while they grow.

A :class:`Growing` array keeps spare room and doubles it when full, copying into a new NumPy
array: whoever holds the old array (a kernel running without the GIL, say) still reads valid
data for every index it was given, since entries are never changed once appended.
"""

from __future__ import annotations

import numpy as np


class Growing:
    """An append-only NumPy array (rows of ``shape`` cells each) with spare room at the end."""

    def __init__(self, dtype, shape: tuple[int, ...] = (), capacity: int = 16):
        self._data = np.zeros((max(capacity, 1), *shape), dtype=dtype)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def data(self) -> np.ndarray:
        """The backing array (the appended entries, then spare room): index it only below ``len(self)``."""
        return self._data

    @property
    def values(self) -> np.ndarray:
        """The appended entries (a view of the backing array)."""
        return self._data[: self._n]

    def extend(self, values) -> int:
        """Append ``values`` (entries, rows for a 2-D array); the index of the first one."""
        values = np.asarray(values, dtype=self._data.dtype)
        start, need = self._n, self._n + len(values)
        if need > len(self._data):
            bigger = np.zeros((max(need, 2 * len(self._data)), *self._data.shape[1:]), dtype=self._data.dtype)
            bigger[:start] = self._data[:start]
            self._data = bigger
        self._data[start:need] = values
        self._n = need
        return start

    def append(self, value) -> int:
        """Append one entry (a row for a 2-D array); its index."""
        return self.extend(np.asarray(value, dtype=self._data.dtype)[None])

    @classmethod
    def of(cls, values: np.ndarray) -> Growing:
        """A growing array holding ``values``."""
        out = cls(values.dtype, values.shape[1:], capacity=len(values))
        out.extend(values)
        return out
