"""``grammask.atomics``: atomic adds, loads, stores and compare-and-swaps on int64 cells from nogil kernels, and the
CPU yield of a spinning thread."""

from __future__ import annotations

import threading

import numba as nb
import numpy as np
import pytest

from grammask.atomics import (
    atomic_add,
    atomic_cas,
    atomic_load,
    atomic_store,
    yield_cpu,
)


@nb.njit(nogil=True)
def _count(cells, n, threads):
    """Once ``threads`` threads are here (cell 2), add 1 to cell 0 ``n`` times, and take ``n`` tickets from cell 1
    by compare-and-swap; the tickets' sum."""
    atomic_add(cells, 2, 1)
    while atomic_load(cells, 2) < threads:
        pass
    total = 0
    for _ in range(n):
        atomic_add(cells, 0, 1)
    taken = 0
    while taken < n:
        seen = atomic_load(cells, 1)
        if atomic_cas(cells, 1, seen, seen + 1) == seen:
            total += seen
            taken += 1
    return total


def test_threads_lose_no_update():
    _count(np.zeros(3, dtype=np.int64), 1, 1)  # compiled before the threads start
    cells = np.zeros(3, dtype=np.int64)
    n, out = 1_000_000, []
    threads = [threading.Thread(target=lambda: out.append(_count(cells, n, 3))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cells[0] == 3 * n
    assert sum(out) == sum(range(3 * n))  # every ticket taken exactly once


@nb.njit
def _steps(cells):
    return (atomic_store(cells, 0, 5), atomic_cas(cells, 0, 4, 9), atomic_cas(cells, 0, 5, 9), atomic_load(cells, 0),
            atomic_add(cells, 1, -3), cells[1])


def test_single_steps_return_the_value_before():
    assert _steps(np.array([1, 2], dtype=np.int64)) == (1, 5, 5, 9, 2, -1)


def test_other_arrays_refused():
    @nb.njit
    def load(a):
        return atomic_load(a, 0)

    with pytest.raises(nb.errors.TypingError):
        load(np.zeros(2, dtype=np.int32))


@nb.njit(nogil=True)
def _wait_for(cells, target):
    """Spin until cell 0 reaches ``target``, yielding the CPU between polls; the polls it took."""
    polls = 0
    while atomic_load(cells, 0) < target:
        polls += 1
        yield_cpu()
    return polls


def test_a_yielding_spinner_sees_another_threads_store():
    cells = np.zeros(1, dtype=np.int64)
    _wait_for(np.ones(1, dtype=np.int64), 1)  # compiled before the thread starts
    writer = threading.Timer(0.01, lambda: _steps(cells))
    writer.start()
    assert _wait_for(cells, 5) > 0
    writer.join()
