"""Lengths of string languages: whether a length bound can be counted beside the lexer state, and which lengths
a language has (for the algebra of :class:`~grammask.grammar.json_schema.strings.StringSet` s with a bound)."""

from __future__ import annotations

import numpy as np

from grammask.automata.counted import is_free
from grammask.errors import NO_DEADLINE, Deadline, UnsupportedSchemaError
from grammask.grammar.json_schema.automaton import PHASE, CharDFA

UNROLL_ABOVE = 64
"""The most character automaton states a bound is unrolled into where it cannot be counted (larger: refused)."""
_MAX_PERIOD_STEPS = 1 << 16


def dense(dfa: CharDFA) -> tuple[np.ndarray, np.ndarray]:
    """A :class:`~grammask.grammar.json_schema.automaton.CharDFA` as a dense table over its character segments
    (runs of code points every state treats alike), and its accepting states as a bool row."""
    points = sorted({lo for row in dfa.rows for lo, _, _ in row} | {hi + 1 for row in dfa.rows for _, hi, _ in row})
    trans = np.full((dfa.n_states, max(len(points), 1)), -1, dtype=np.int64)
    where = {p: i for i, p in enumerate(points)}
    for q, row in enumerate(dfa.rows):
        for lo, hi, t in row:
            trans[q, where[lo] : where[hi + 1]] = t
    return trans, _accepting(dfa)


def _accepting(dfa: CharDFA) -> np.ndarray:
    """The automaton's accepting states as a bool row."""
    accepting = np.zeros(dfa.n_states, dtype=bool)
    accepting[list(dfa.accepting)] = True
    return accepting


def char_free(dfa: CharDFA) -> bool:
    """Whether a string language's length can be counted beside the lexer state (every character one unit; see
    :func:`grammask.automata.counted.is_free`)."""
    trans, accepting = dense(dfa)
    return is_free(trans, (trans >= 0).astype(np.int64), accepting)


def has_length(dfa: CharDFA, lo: int, hi: int | None, deadline: Deadline = NO_DEADLINE) -> bool:
    """Whether the language has a string of ``lo`` to ``hi`` (None: any larger) characters.

    The sets of states reachable in ``k`` steps repeat with some period; found by stepping until a set
    comes back (raises :class:`~grammask.errors.UnsupportedSchemaError` after 65,536 steps without, which a
    language of a few hundred states does not reach in practice, and
    :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed, checked every 256 steps).
    """
    deadline.check(PHASE)
    n = dfa.n_states
    sources = np.fromiter((q for q, row in enumerate(dfa.rows) for _ in row), dtype=np.int64)
    targets = np.fromiter((t for row in dfa.rows for _, _, t in row), dtype=np.int64)
    accepting = _accepting(dfa)
    reach = np.zeros(n, dtype=bool)
    reach[0] = True
    seen: dict[bytes, int] = {}
    hits: list[bool] = []
    for k in range(_MAX_PERIOD_STEPS):
        if k % 256 == 255:
            deadline.check(PHASE)
        key = reach.tobytes()
        if key in seen:
            first, period = seen[key], k - seen[key]
            top = hi if hi is not None else lo + period
            return any(hits[j] and _meets(j, first, period, lo, top) for j in range(first, k))
        hit = bool((reach & accepting).any())
        if hit and k >= lo and (hi is None or k <= hi):
            return True
        if hi is not None and k >= hi:
            return False
        seen[key] = k
        hits.append(hit)
        step = targets[reach[sources]]
        reach = np.zeros(n, dtype=bool)
        reach[step] = True
    raise UnsupportedSchemaError("a string language's lengths are too irregular to compare with a length bound")


def _meets(j: int, first: int, period: int, lo: int, hi: int) -> bool:
    """Whether some length ``j + m * period`` (m >= 0) lies in ``lo..hi`` (``j >= first``)."""
    start = max(lo, j)
    m = -(-(start - j) // period)
    return j + m * period <= hi
