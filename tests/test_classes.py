"""Grouping a walk's tokens into classes (``grammask.classes.group_walk``) against a dictionary."""

from __future__ import annotations

import numpy as np
import pytest

from grammask.classes import GroupScratch, group_walk


@pytest.mark.parametrize("n_follow", [1, 7, 1 << 20])
def test_group_walk_numbers_keys_as_met(n_follow):
    """Tokens with the same (sequence, follow set of the state left) share a class, numbered in the order met, with
    each class's key and size; the states left are reported once, the first time; the scratch table is left empty
    and grows for a longer walk (keys that differ only in high bits included: ``n_follow`` a power of two)."""
    rng = np.random.default_rng(n_follow)
    scratch = GroupScratch()
    n_states = 300
    seen = np.zeros(n_states, dtype=bool)
    state_follow = rng.integers(0, n_follow, n_states).astype(np.int32)
    for n in (50, 5_000, 40_000):
        seq = rng.integers(0, 400, n).astype(np.int32)
        ends = rng.integers(0, n_states, n).astype(np.int32)
        was_seen = seen.copy()
        walk, fresh = group_walk(np.arange(n, dtype=np.int32), np.zeros(n, dtype=np.uint8), seq, ends, state_follow,
                                 n_follow, scratch, seen)
        numbers: dict[int, int] = {}
        expected = [numbers.setdefault(int(s) * n_follow + int(state_follow[e]), len(numbers)) for s, e in zip(seq, ends)]
        assert walk.token_class.tolist() == expected
        assert walk.classes.tolist() == list(numbers)
        assert walk.sizes.tolist() == np.bincount(expected, minlength=len(numbers)).tolist()
        assert fresh.tolist() == list(dict.fromkeys(e for e in ends.tolist() if not was_seen[e]))
        assert seen[ends].all() and (scratch.keys == -1).all()
    assert len(scratch.keys) >= 2 * 40_000
