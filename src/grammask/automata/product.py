"""The minimal DFA of a union of minimal DFAs: a lexer's terminals, in Numba.

A lexer is built from one small NFA per terminal, each a trimmed minimal DFA in disguise
(:func:`~grammask.automata.patterns.terminal_nfa`: the DFA's states plus one final state its accepting states reach
by an epsilon move, or the chain of a literal's bytes). A subset of their union then holds at most one state of each
terminal's DFA, and its successor on a byte is the set of its members' successors. Two distinct subsets differ in
some terminal's state, and so in that terminal's residual language (its DFA is minimal and trimmed): the subsets
reachable from the start are the minimal DFA already, and only their numbering is left to do.
:func:`product_dfa` builds them in compiled code over the byte intervals no edge of any terminal splits, without
the subset construction, trimming and minimization of :func:`~grammask.automata.dfa.build_dfa` in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numba as nb
import numpy as np

from grammask.automata.dfa import ByteDFA, build_dfa
from grammask.automata.regex import ByteNFA
from grammask.errors import NO_DEADLINE, Deadline

_CHUNK = 2048  # subsets expanded between deadline checks


def deterministic(nfa: ByteNFA) -> bool:
    """Whether ``nfa`` has the shape of a DFA with one final state: its edges out of a state are disjoint byte
    ranges in order, and its only epsilon moves go to the final state, which has no moves of its own."""
    final = nfa.final
    if nfa.edges[final] or nfa.eps[final]:
        return False
    for state, eps in zip(nfa.edges, nfa.eps, strict=True):
        if eps and eps != (final,):
            return False
        for k in range(1, len(state)):
            if state[k][0] <= state[k - 1][1]:
                return False
    return True


def union_dfa(nfas: Sequence[ByteNFA], deadline: Deadline | None = None) -> ByteDFA:
    """``build_dfa(nfas, deadline)`` for NFAs each of which is, as a DFA, trimmed and minimal (a state that is not
    final and has no moves standing for the empty language), as :func:`~grammask.automata.patterns.terminal_nfa`
    makes them: through :func:`product_dfa` where every NFA is :func:`deterministic`, else through ``build_dfa``.

    Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` (None: no limit) has passed.
    """
    if len(nfas) > 1 and all(deterministic(nfa) for nfa in nfas):
        return product_dfa(nfas, deadline or NO_DEADLINE)
    return build_dfa(nfas, deadline)


def product_dfa(nfas: Sequence[ByteNFA], deadline: Deadline) -> ByteDFA:
    """The trimmed minimal DFA of the union of ``nfas`` (NFA ``i`` carrying tag ``i``), each :func:`deterministic`
    and, as a DFA, trimmed and minimal, numbered as :func:`~grammask.automata.dfa.build_dfa` numbers states
    (breadth first from the start over bytes 0..255).

    Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed.
    """
    sizes = np.array([nfa.n_states for nfa in nfas], dtype=np.int64)
    offset = np.concatenate([[0], np.cumsum(sizes)])
    n_edges = np.fromiter(map(len, chain.from_iterable(nfa.edges for nfa in nfas)), dtype=np.int64,
                          count=int(offset[-1]))
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(chain.from_iterable(nfa.edges for nfa in nfas))),
                       dtype=np.int64, count=3 * int(n_edges.sum())).reshape(-1, 3)
    edge_ptr = np.concatenate([[0], np.cumsum(n_edges)])
    points = np.unique(np.concatenate([[0, 256], flat[:, 0], flat[:, 1] + 1]))  # class k: bytes points[k]..[k+1]-1
    first_class = np.searchsorted(points, flat[:, 0]).astype(np.int32)
    end_class = np.searchsorted(points, flat[:, 1] + 1).astype(np.int32)
    target = (flat[:, 2] + np.repeat(np.repeat(offset[:-1], sizes), n_edges)).astype(np.int32)
    accepting = np.fromiter(map(bool, chain.from_iterable(nfa.eps for nfa in nfas)), dtype=bool, count=int(offset[-1]))
    accepting[offset[:-1] + [nfa.final for nfa in nfas]] = True
    tag = np.where(accepting, np.repeat(np.arange(len(nfas), dtype=np.int32), sizes), -1)
    starts = offset[:-1] + [nfa.start for nfa in nfas]
    live = accepting[starts] | (n_edges[starts] > 0)  # a start without moves that does not accept: no strings
    if not live.any():
        return ByteDFA(np.full((1, 256), -1, dtype=np.int32), (frozenset(),))
    state = _start(starts[live].astype(np.int32), len(points) - 1)
    while state[5] < state[4]:
        deadline.check("the lexer DFA's subset construction")
        state = _expand(edge_ptr, first_class, end_class, target, len(nfas), *state, _CHUNK)
    members, bounds, _, trans, count, _ = state
    order, renumber = _bfs(trans[:count])
    byte_class = np.repeat(np.arange(len(points) - 1), np.diff(points))
    return ByteDFA(np.ascontiguousarray(renumber[trans[order]][:, byte_class]),
                   _accepts(tag[members[: bounds[count]]], bounds[: count + 1], order))


def _accepts(tags: np.ndarray, bounds: np.ndarray, order: np.ndarray) -> tuple[frozenset[int], ...]:
    """The tags each subset accepts (``tags[bounds[k]:bounds[k + 1]]``: its members' tags, -1 for none), subsets in
    ``order``."""
    owner = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    hit = tags >= 0
    accepted: list[frozenset[int]] = [frozenset()] * (len(bounds) - 1)
    owners, cuts = np.unique(owner[hit], return_index=True)
    for k, group in zip(owners.tolist(), np.split(tags[hit], cuts[1:]), strict=True):
        accepted[k] = frozenset(group.tolist())
    return tuple(accepted[k] for k in order.tolist())


@nb.njit(cache=True)
def _start(starts, n_classes):
    """The construction's arrays holding only the start subset: members, bounds, hash slots, transitions per byte
    class, the number of subsets and of those expanded."""
    members = np.empty(max(1024, 2 * len(starts)), dtype=np.int32)
    members[: len(starts)] = starts
    bounds = np.zeros(1024, dtype=np.int64)
    bounds[1] = len(starts)
    slots = np.full(4096, -1, dtype=np.int64)
    slots[_hash(starts, 0, len(starts)) & (len(slots) - 1)] = 0
    return members, bounds, slots, np.full((1024, n_classes), -1, dtype=np.int32), 1, 0


@nb.njit(cache=True, inline="always")
def _hash(values, lo, hi):
    h = np.uint64(14695981039346656037)
    for k in range(lo, hi):
        h = (h ^ np.uint64(values[k])) * np.uint64(1099511628211)
    return np.int64(h >> np.uint64(1))


@nb.njit(cache=True)
def _find(members, bounds, slots, subset, h):
    """The slot of ``subset`` (sorted, hash ``h``): where it is, or the empty slot it goes in."""
    mask = len(slots) - 1
    s = h & mask
    m = len(subset)
    while slots[s] >= 0:
        k = slots[s]
        if bounds[k + 1] - bounds[k] == m:
            same = True
            for j in range(m):
                if members[bounds[k] + j] != subset[j]:
                    same = False
                    break
            if same:
                return s
        s = (s + 1) & mask
    return s


@nb.njit(cache=True)
def _expand(edge_ptr, first_class, end_class, target, n_nfas, members, bounds, slots, trans, count, done, chunk):
    """Expand up to ``chunk`` subsets (their successor per byte class, new subsets appended); the arrays, grown."""
    n_classes = trans.shape[1]
    bucket = np.empty((n_classes, n_nfas), dtype=np.int32)  # per class, the members' successors
    filled = np.zeros(n_classes, dtype=np.int64)
    cut = np.full(n_classes + 1, -1, dtype=np.int64)  # cut[c] == done: some member's edge starts or ends at class c
    stop = done + chunk
    while done < count and done < stop:
        lo, hi = bounds[done], bounds[done + 1]
        filled[:] = 0
        for k in range(lo, hi):
            s = members[k]
            for e in range(edge_ptr[s], edge_ptr[s + 1]):
                cut[first_class[e]] = done
                cut[end_class[e]] = done
                for c in range(first_class[e], end_class[e]):
                    bucket[c, filled[c]] = target[e]
                    filled[c] += 1
        for c in range(n_classes):
            m = filled[c]
            if m == 0:
                continue
            if c > 0 and cut[c] != done:  # no member's edge starts or ends here: the class before's successor
                trans[done, c] = trans[done, c - 1]
                continue
            subset = bucket[c, :m]  # sorted: members are in order, each of another terminal, whose states follow
            h = _hash(subset, 0, m)
            slot = _find(members, bounds, slots, subset, h)
            if slots[slot] < 0:
                if bounds[count] + m > len(members):
                    grown = np.empty(2 * (bounds[count] + m), dtype=np.int32)
                    grown[: bounds[count]] = members[: bounds[count]]
                    members = grown
                if count + 2 > len(bounds):
                    grown_bounds = np.zeros(2 * len(bounds), dtype=np.int64)
                    grown_bounds[: count + 1] = bounds[: count + 1]
                    bounds = grown_bounds
                    grown_trans = np.full((2 * len(trans), n_classes), -1, dtype=np.int32)
                    grown_trans[:count] = trans[:count]
                    trans = grown_trans
                members[bounds[count] : bounds[count] + m] = subset
                bounds[count + 1] = bounds[count] + m
                slots[slot] = count
                count += 1
                if 2 * count > len(slots):
                    slots = np.full(2 * len(slots), -1, dtype=np.int64)
                    for k in range(count):
                        known = members[bounds[k] : bounds[k + 1]]
                        slots[_find(members, bounds, slots, known, _hash(known, 0, len(known)))] = k
                    slot = _find(members, bounds, slots, subset, h)
            trans[done, c] = slots[slot]
        done += 1
    return members, bounds, slots, trans, count, done


@nb.njit(cache=True)
def _bfs(trans):
    """The states in breadth-first order from state 0 (each state's targets in class order), and the new number of
    each old one at index old (-1 at index -1: no transition)."""
    n = len(trans)
    renumber = np.full(n + 1, -1, dtype=np.int32)
    order = np.empty(n, dtype=np.int64)
    order[0] = 0
    renumber[0] = 0
    size = 1
    for i in range(n):
        if i >= size:
            break
        row = trans[order[i]]
        for c in range(len(row)):
            t = row[c]
            if t >= 0 and renumber[t] < 0:
                renumber[t] = size
                order[size] = t
                size += 1
    return order[:size], renumber
