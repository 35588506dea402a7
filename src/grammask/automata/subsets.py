"""The subset construction of byte NFAs, in Numba.

:func:`determinize` takes the union of several NFAs (NFA ``i``'s final state carrying tag ``i``) and returns the
transitions of its subsets and each subset's tags, subset 0 the start. It works over the byte intervals that no
edge of any NFA splits, and after each subset only at the intervals where some member's edge starts or ends.

With ``minimal`` set, every NFA is a trimmed minimal DFA in disguise (:func:`deterministic`, as
:func:`~grammask.automata.patterns.terminal_nfa` makes a lexer's terminals): a subset then holds at most one state of
each, its successor on a byte is the set of its members' successors, and two distinct subsets differ in some NFA's
state and so in that NFA's residual language: the subsets are the minimal DFA of the union already, the accepting
states stand for their tags, and a state that is not final and has no moves (the empty language) is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numba as nb
import numpy as np

from grammask.automata.regex import ByteNFA
from grammask.errors import Deadline

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


def determinize(nfas: Sequence[ByteNFA], deadline: Deadline, minimal: bool = False
                ) -> tuple[np.ndarray, np.ndarray, list[frozenset[int]]]:
    """The subsets of the union of ``nfas`` reachable from the start: the transition table over byte classes
    (-1: none), the byte class of each byte 0..255, and each subset's tags. With ``minimal`` (see the module), the
    subsets are also the union's minimal DFA.

    Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed.
    """
    sizes = np.array([nfa.n_states for nfa in nfas], dtype=np.int64)
    offset = np.concatenate([[0], np.cumsum(sizes)])
    n_states = int(offset[-1])
    state_offset = np.repeat(offset[:-1], sizes)
    n_edges = np.fromiter(map(len, chain.from_iterable(nfa.edges for nfa in nfas)), dtype=np.int64, count=n_states)
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(chain.from_iterable(nfa.edges for nfa in nfas))),
                       dtype=np.int64, count=3 * int(n_edges.sum())).reshape(-1, 3)
    edge_ptr = np.concatenate([[0], np.cumsum(n_edges)])
    points = np.unique(np.concatenate([[0, 256], flat[:, 0], flat[:, 1] + 1]))  # class k: bytes points[k]..[k+1]-1
    first_class = np.searchsorted(points, flat[:, 0]).astype(np.int32)
    end_class = np.searchsorted(points, flat[:, 1] + 1).astype(np.int32)
    target = (flat[:, 2] + np.repeat(state_offset, n_edges)).astype(np.int32)
    finals = offset[:-1] + np.array([nfa.final for nfa in nfas], dtype=np.int64)  # (int64 also with no NFAs)
    starts = offset[:-1] + np.array([nfa.start for nfa in nfas], dtype=np.int64)
    tag = np.full(n_states, -1, dtype=np.int32)
    if minimal:
        accepting = np.fromiter(map(bool, chain.from_iterable(nfa.eps for nfa in nfas)), dtype=bool, count=n_states)
        accepting[finals] = True
        tag[accepting] = np.repeat(np.arange(len(nfas), dtype=np.int32), sizes)[accepting]
        starts = starts[accepting[starts] | (n_edges[starts] > 0)]  # a start without moves that does not accept
        closure_ptr, closure = np.arange(n_states + 1, dtype=np.int64), np.arange(n_states, dtype=np.int32)
    else:
        tag[finals] = np.arange(len(nfas), dtype=np.int32)
        n_eps = np.fromiter(map(len, chain.from_iterable(nfa.eps for nfa in nfas)), dtype=np.int64, count=n_states)
        eps = np.fromiter(chain.from_iterable(chain.from_iterable(nfa.eps for nfa in nfas)), dtype=np.int64,
                          count=int(n_eps.sum())) + np.repeat(state_offset, n_eps)
        closure_ptr, closure = _closures(np.concatenate([[0], np.cumsum(n_eps)]), eps.astype(np.int32))
    state = _start(_closed(closure_ptr, closure, starts.astype(np.int32)), len(points) - 1, n_states)
    while state[5] < state[4]:
        deadline.check("the lexer DFA's subset construction")
        state = _expand(edge_ptr, first_class, end_class, target, closure_ptr, closure, *state, _CHUNK)
    members, bounds, _, trans, count, _ = state
    byte_class = np.repeat(np.arange(len(points) - 1), np.diff(points))
    return trans[:count], byte_class, _accepts(tag[members[: bounds[count]]], bounds[: count + 1])


def _accepts(tags: np.ndarray, bounds: np.ndarray) -> list[frozenset[int]]:
    """The tags each subset accepts (``tags[bounds[k]:bounds[k + 1]]``: its members' tags, -1 for none)."""
    owner = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    hit = tags >= 0
    accepted: list[frozenset[int]] = [frozenset()] * (len(bounds) - 1)
    if not hit.any():
        return accepted
    owners, cuts = np.unique(owner[hit], return_index=True)
    for k, group in zip(owners.tolist(), np.split(tags[hit], cuts[1:]), strict=True):
        accepted[k] = frozenset(group.tolist())
    return accepted


@nb.njit(cache=True)
def _closures(eps_ptr, eps):
    """Each state's epsilon closure (itself included), as CSR."""
    n = len(eps_ptr) - 1
    seen = np.full(n, -1, dtype=np.int64)
    todo = np.empty(n, dtype=np.int32)
    ptr = np.zeros(n + 1, dtype=np.int64)
    out = np.empty(max(n, 16), dtype=np.int32)
    for s in range(n):
        seen[s] = s
        todo[0] = s
        top = 1
        size = ptr[s]
        while top > 0:
            top -= 1
            u = todo[top]
            if size == len(out):
                grown = np.empty(2 * len(out), dtype=np.int32)
                grown[:size] = out[:size]
                out = grown
            out[size] = u
            size += 1
            for k in range(eps_ptr[u], eps_ptr[u + 1]):
                v = eps[k]
                if seen[v] != s:
                    seen[v] = s
                    todo[top] = v
                    top += 1
        ptr[s + 1] = size
    return ptr, out[: ptr[n]]


@nb.njit(cache=True)
def _closed(closure_ptr, closure, states):
    """The sorted union of the closures of ``states``."""
    seen = np.zeros(len(closure_ptr) - 1, dtype=np.bool_)
    for s in states:
        for k in range(closure_ptr[s], closure_ptr[s + 1]):
            seen[closure[k]] = True
    return np.flatnonzero(seen).astype(np.int32)


@nb.njit(cache=True)
def _start(start, n_classes, n_states):
    """The construction's arrays holding only the start subset: members, bounds, hash slots, transitions per byte
    class, the number of subsets and of those expanded."""
    members = np.empty(max(1024, 2 * len(start)), dtype=np.int32)
    members[: len(start)] = start
    bounds = np.zeros(1024, dtype=np.int64)
    bounds[1] = len(start)
    slots = np.full(4096, -1, dtype=np.int64)
    slots[_hash(start) & (len(slots) - 1)] = 0
    return members, bounds, slots, np.full((1024, n_classes), -1, dtype=np.int32), 1, 0


@nb.njit(cache=True, inline="always")
def _hash(values):
    h = np.uint64(14695981039346656037)
    for v in values:
        h = (h ^ np.uint64(v)) * np.uint64(1099511628211)
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
def _expand(edge_ptr, first_class, end_class, target, closure_ptr, closure, members, bounds, slots, trans, count,
            done, chunk):
    """Expand up to ``chunk`` subsets (their successor per byte class, new subsets appended); the arrays, grown."""
    n_classes = trans.shape[1]
    n_states = len(closure_ptr) - 1
    cut = np.full(n_classes + 1, -1, dtype=np.int64)  # cut[c] == done: some member's edge starts or ends at class c
    seen = np.full(n_states, -1, dtype=np.int64)  # seen[s] == stamp: s is in the successor being gathered
    subset = np.empty(n_states, dtype=np.int32)
    stamp = 0
    stop = done + chunk
    while done < count and done < stop:
        lo, hi = bounds[done], bounds[done + 1]
        for k in range(lo, hi):
            s = members[k]
            for e in range(edge_ptr[s], edge_ptr[s + 1]):
                cut[first_class[e]] = done
                cut[end_class[e]] = done
        previous = -1
        for c in range(n_classes):
            if c > 0 and cut[c] != done:  # no member's edge starts or ends here: the class before's successor
                trans[done, c] = previous
                continue
            stamp += 1
            m = 0
            for k in range(lo, hi):
                s = members[k]
                for e in range(edge_ptr[s], edge_ptr[s + 1]):
                    if first_class[e] <= c < end_class[e]:
                        t = target[e]
                        for j in range(closure_ptr[t], closure_ptr[t + 1]):
                            u = closure[j]
                            if seen[u] != stamp:
                                seen[u] = stamp
                                subset[m] = u
                                m += 1
            previous = -1
            if m == 0:
                continue
            found = subset[:m]
            found.sort()
            h = _hash(found)
            slot = _find(members, bounds, slots, found, h)
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
                members[bounds[count] : bounds[count] + m] = found
                bounds[count + 1] = bounds[count] + m
                slots[slot] = count
                count += 1
                if 2 * count > len(slots):
                    slots = np.full(2 * len(slots), -1, dtype=np.int64)
                    for k in range(count):
                        known = members[bounds[k] : bounds[k + 1]]
                        slots[_find(members, bounds, slots, known, _hash(known))] = k
                    slot = _find(members, bounds, slots, found, h)
            previous = slots[slot]
            trans[done, c] = previous
        done += 1
    return members, bounds, slots, trans, count, done


@nb.njit(cache=True)
def breadth_first(trans):
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
