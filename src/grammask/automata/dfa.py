"""Byte NFAs to one trimmed, minimal, deterministically numbered byte DFA.

:func:`build_dfa` takes the union of several NFAs, NFA ``i`` carrying tag ``i``, determinizes it
(subset construction over byte ranges, :mod:`grammask.automata.subsets`), trims it so that a transition exists exactly when the
byte keeps a viable prefix of some tag's language, minimizes it (Moore partition refinement,
starting from the partition by accepted tag set) and numbers the states in breadth-first order
from the start over bytes 0..255. :func:`union_dfa` does the same for a lexer's terminals, whose
subsets are minimal already.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba as nb
import numpy as np

from grammask.automata.regex import ByteNFA
from grammask.automata.subsets import breadth_first, deterministic, determinize
from grammask.errors import NO_DEADLINE, Deadline


@dataclass(frozen=True, eq=False)
class ByteDFA:
    """A deterministic automaton over bytes.

    ``trans[s, b]`` is the state reached from ``s`` on byte ``b``, or ``-1`` when no string of any
    tag's language continues that way (the array is read-only). ``accepts[s]`` holds the tags whose
    language contains the bytes read to reach ``s``. ``start`` is always 0.
    """

    trans: np.ndarray
    accepts: tuple[frozenset[int], ...]
    start: int = 0

    def __post_init__(self) -> None:
        self.trans.setflags(write=False)

    @property
    def n_states(self) -> int:
        return len(self.accepts)

    def walk(self, data: bytes, state: int = 0) -> int:
        """The state reached from ``state`` after reading ``data``, or -1 if it dies on the way."""
        for byte in data:
            state = int(self.trans[state, byte])
            if state < 0:
                return -1
        return state


def build_dfa(nfas: Sequence[ByteNFA], deadline: Deadline | None = None) -> ByteDFA:
    """The trimmed minimal DFA of the union of ``nfas``, where NFA ``i`` carries tag ``i``.

    If no tag's language has a string, the result is a single start state with no transitions
    and no accepts. Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` (None:
    no limit) has passed.
    """
    deadline = deadline or NO_DEADLINE
    class_trans, byte_class, accepts = determinize(nfas, deadline)
    phase = "the lexer DFA's minimization"  # each step below is checked: the subsets come fast, big ones too
    deadline.check(phase)
    columns, merged = _byte_classes(class_trans)
    byte_class = merged[byte_class]
    deadline.check(phase)
    live = _live_states(columns, accepts)
    if not live[0]:
        return ByteDFA(np.full((1, 256), -1, dtype=np.int32), (frozenset(),))
    deadline.check(phase)
    columns, accepts = _restrict(columns, accepts, live)
    block, block_columns = _minimize(columns, accepts, deadline)
    deadline.check(phase)
    order = _bfs_order(block_columns, int(block[0]))
    deadline.check(phase)
    renumber = np.full(len(block_columns) + 1, -1, dtype=np.int32)  # index -1 (no transition) stays -1
    renumber[order] = np.arange(len(order), dtype=np.int32)
    representative = np.empty(len(block_columns), dtype=np.int64)
    representative[block] = np.arange(len(block))
    trans = renumber[block_columns[order]][:, byte_class]
    return ByteDFA(np.ascontiguousarray(trans), tuple(accepts[representative[b]] for b in order))


def union_dfa(nfas: Sequence[ByteNFA], deadline: Deadline | None = None) -> ByteDFA:
    """``build_dfa(nfas, deadline)`` for NFAs that are each, as a DFA, trimmed and minimal (a state that is not final
    and has no moves standing for the empty language), as :func:`~grammask.automata.patterns.terminal_nfa` makes a
    lexer's terminals: where every NFA has a DFA's shape (:func:`~grammask.automata.subsets.deterministic`), their
    subsets are the minimal DFA already and are only numbered (see :mod:`grammask.automata.subsets`).

    Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` (None: no limit) has passed.
    """
    if len(nfas) < 2 or not all(deterministic(nfa) for nfa in nfas):
        return build_dfa(nfas, deadline)
    trans, byte_class, accepts = determinize(nfas, deadline or NO_DEADLINE, minimal=True)
    order, renumber = breadth_first(trans)
    return ByteDFA(np.ascontiguousarray(renumber[trans[order]][:, byte_class]), tuple(accepts[k] for k in order.tolist()))


def _byte_classes(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge bytes whose columns are identical: ``trans == columns[:, byte_class]``.

    Classes are numbered in the order of their smallest byte, so scanning a row's classes in
    order visits its targets in the order bytes 0..255 first reach them.
    """
    _, first_byte, inverse = np.unique(trans, axis=1, return_index=True, return_inverse=True)
    by_first_byte = np.argsort(first_byte)
    rank = np.empty_like(by_first_byte)
    rank[by_first_byte] = np.arange(len(by_first_byte))
    return trans[:, first_byte[by_first_byte]], rank[inverse.reshape(-1)]


def _successors(columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each state's distinct targets (no -1) in the order its classes first reach them, as CSR."""
    order = np.argsort(columns, axis=1, kind="stable")
    targets = np.take_along_axis(columns, order, axis=1)
    first = np.ones(targets.shape, dtype=bool)
    first[:, 1:] = targets[:, 1:] != targets[:, :-1]
    first &= targets >= 0
    rows, slots = np.nonzero(first)
    by_row_then_class = np.lexsort((order[rows, slots], rows))
    rows, targets = rows[by_row_then_class], targets[rows, slots][by_row_then_class]
    return np.searchsorted(rows, np.arange(len(columns) + 1)), targets


def _live_states(columns: np.ndarray, accepts: list[frozenset[int]]) -> np.ndarray:
    """Which states can reach an accepting state."""
    indptr, targets = _successors(columns)
    sources = np.repeat(np.arange(len(columns)), np.diff(indptr))
    by_target = np.argsort(targets, kind="stable")
    pred_ptr = np.searchsorted(targets[by_target], np.arange(len(columns) + 1)).tolist()
    preds = sources[by_target].tolist()
    live = [bool(a) for a in accepts]
    todo = [s for s, is_live in enumerate(live) if is_live]
    while todo:
        s = todo.pop()
        for p in preds[pred_ptr[s] : pred_ptr[s + 1]]:
            if not live[p]:
                live[p] = True
                todo.append(p)
    return np.array(live)


def _restrict(
    columns: np.ndarray, accepts: list[frozenset[int]], keep: np.ndarray
) -> tuple[np.ndarray, list[frozenset[int]]]:
    """Keep only the states in ``keep``, renumbered in order; transitions to the others become -1."""
    new_id = np.full(len(columns) + 1, -1, dtype=np.int32)  # index -1 (no transition) stays -1
    new_id[np.flatnonzero(keep)] = np.arange(int(keep.sum()), dtype=np.int32)
    return new_id[columns[keep]], [a for a, k in zip(accepts, keep) if k]


def _minimize(columns: np.ndarray, accepts: list[frozenset[int]], deadline: Deadline) -> tuple[np.ndarray, np.ndarray]:
    """Merge equivalent states: each state's block, and the block transition table (-1: none)."""
    sink = len(accepts)  # stands for "no transition"; every trimmed state differs from it
    table = np.vstack([np.where(columns < 0, sink, columns), np.full((1, columns.shape[1]), sink)])
    shortest, longest = _remaining_lengths(columns, accepts)
    deadline.check("the lexer DFA's minimization")
    initial: dict[tuple | None, int] = {}
    keys = [*zip(accepts, shortest, longest), None]
    block = _coarsest_stable_partition(
        np.array([initial.setdefault(k, len(initial)) for k in keys], dtype=np.int64), table, deadline
    )
    # The sink is alone in its block: renumber the others 0.. and let the sink's block read -1.
    sink_block = block[sink]
    block = np.where(block > sink_block, block - 1, block)
    block[sink] = -1
    n_blocks = int(block.max()) + 1
    representative = np.empty(n_blocks, dtype=np.int64)
    representative[block[:sink]] = np.arange(sink)
    return block[:sink], block[table[representative]]


def coarsest_partition(columns: np.ndarray, labels: np.ndarray, deadline: Deadline | None = None) -> np.ndarray:
    """Each state's block in the coarsest partition that refines ``labels`` and agrees on the blocks every
    column leads to (``columns[s, c]``: a state, or -1 for none); blocks are numbered from 0.

    Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` (None: no limit) has passed.
    """
    sink = len(columns)
    table = np.vstack([np.where(columns < 0, sink, columns), np.full((1, columns.shape[1]), sink)])
    initial = np.unique(labels, return_inverse=True)[1].reshape(-1)
    initial = np.append(initial, initial.max(initial=-1) + 1)  # the sink alone
    block = _coarsest_stable_partition(initial.astype(np.int64), table, deadline or NO_DEADLINE)
    return np.unique(block[:sink], return_inverse=True)[1].reshape(-1)


def _remaining_lengths(columns: np.ndarray, accepts: list[frozenset[int]]) -> tuple[list[int], list[int]]:
    """Each (trimmed) state's shortest and longest accepted continuation, in bytes (-1: unbounded).

    Both depend only on the state's residual language, so equivalent states agree on them:
    minimization may start from the partition they refine. On a counted repeat, a chain of
    states, this saves one refinement round per state of the chain.
    """
    indptr, targets = _successors(columns)
    indptr, targets = indptr.tolist(), targets.tolist()
    n = len(accepts)
    preds: list[list[int]] = [[] for _ in range(n)]
    for s in range(n):
        for t in targets[indptr[s] : indptr[s + 1]]:
            preds[t].append(s)
    shortest = [0 if a else -1 for a in accepts]
    frontier = [s for s in range(n) if accepts[s]]
    while frontier:  # breadth-first backwards from the accepting states
        following = []
        for t in frontier:
            for s in preds[t]:
                if shortest[s] < 0:
                    shortest[s] = shortest[t] + 1
                    following.append(s)
        frontier = following
    longest = [0 if a else -1 for a in accepts]
    waiting = [indptr[s + 1] - indptr[s] for s in range(n)]  # successors not yet settled
    settled = [s for s in range(n) if waiting[s] == 0]
    for t in settled:  # peel from the states without successors; states left over reach a cycle
        for s in preds[t]:
            longest[s] = max(longest[s], longest[t] + 1)
            waiting[s] -= 1
            if waiting[s] == 0:
                settled.append(s)
    unbounded = set(range(n)).difference(settled)
    return shortest, [-1 if s in unbounded else length for s, length in enumerate(longest)]


def _bfs_order(columns: np.ndarray, start: int) -> list[int]:
    """The states reachable from ``start``, breadth first, each state's targets in byte order."""
    indptr, targets = _successors(columns)
    indptr, targets = indptr.tolist(), targets.tolist()
    order = [start]
    seen = {start}
    for s in order:
        for t in targets[indptr[s] : indptr[s + 1]]:
            if t not in seen:
                seen.add(t)
                order.append(t)
    return order


# Fixed weights for hashing a state's successor blocks: the result does not depend on them.
def _weights(n: int) -> np.ndarray:
    """``n`` fixed odd weights (the first ones the same for every ``n``)."""
    return np.random.default_rng(20240601).integers(1, 2**63, size=n, dtype=np.uint64) | np.uint64(1)


_WEIGHTS = _weights(258)


def _coarsest_stable_partition(initial: np.ndarray, columns: np.ndarray, deadline: Deadline) -> np.ndarray:
    """Moore refinement of ``initial`` until every block's states agree on the blocks they move to.

    Rounds first split by a 64-bit hash of each state's successor blocks (one vectorised pass per
    round). A hash collision can only merge states, never split equivalent ones, so the result is
    then checked for stability and, if a collision slipped through, refined further with exact
    row comparisons. Both phases converge to the same (unique) coarsest stable partition.
    """
    weights = _WEIGHTS[: columns.shape[1] + 1] if columns.shape[1] < len(_WEIGHTS) else _weights(columns.shape[1] + 1)
    block = initial
    n_blocks = int(block.max()) + 1
    while True:
        deadline.check("the lexer DFA's minimization")
        hashes = block[columns].astype(np.uint64) @ weights[1:] + block.astype(np.uint64) * weights[0]
        refined = np.unique(hashes, return_inverse=True)[1].reshape(-1)
        n_refined = int(refined.max()) + 1
        if n_refined <= n_blocks:
            break
        block, n_blocks = refined, n_refined
    while True:
        deadline.check("the lexer DFA's minimization")
        signature = np.column_stack([initial, block, block[columns]])
        representative = np.empty(n_blocks, dtype=np.int64)
        representative[block] = np.arange(len(block))
        if np.array_equal(signature, signature[representative[block]]):
            return block
        block = np.unique(signature, axis=0, return_inverse=True)[1].reshape(-1)
        n_blocks = int(block.max()) + 1


def successors(trans: np.ndarray, deadline: Deadline = NO_DEADLINE) -> list[list[int]]:
    """Per state of a transition table (-1: none), its distinct successor states (``deadline`` as in
    :func:`_successors_checked`)."""
    indptr, targets = _successors_checked(trans, deadline)
    return [targets[a:b].tolist() for a, b in zip(indptr[:-1].tolist(), indptr[1:].tolist())]


def _successors_checked(trans: np.ndarray, deadline: Deadline) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_successors` made 4,096 states at a time, ``deadline`` checked before each block (a lexer's table can
    have 10^5 states and thousands of classes)."""
    ptrs, parts, done = [np.zeros(1, dtype=np.int64)], [], 0
    for lo in range(0, len(trans), 4096):
        deadline.check("the automaton's cycles")
        indptr, targets = _successors(trans[lo : lo + 4096])
        ptrs.append(indptr[1:] + done)
        parts.append(targets)
        done += len(targets)
    return np.concatenate(ptrs), np.concatenate(parts) if parts else np.zeros(0, dtype=trans.dtype)


def components(trans: np.ndarray, deadline: Deadline = NO_DEADLINE) -> np.ndarray:
    """The strongly connected component of every state of a transition table (-1: none), by Tarjan's algorithm
    over each state's distinct successors in :func:`successors` order, numbered in the order found: an edge never
    leads to a component of a higher number.

    Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed.
    """
    indptr, targets = _successors_checked(trans, deadline)
    deadline.check("the automaton's cycles")
    return _tarjan(indptr.astype(np.int64), targets.astype(np.int64))


@nb.njit(cache=True)
def _tarjan(indptr, targets):  # pragma: no cover - compiled
    """Tarjan's algorithm, iterative, over successor lists in CSR form."""
    n = indptr.shape[0] - 1
    index = np.full(n, -1, dtype=np.int64)
    low = np.zeros(n, dtype=np.int64)
    on_stack = np.zeros(n, dtype=np.bool_)
    comp = np.full(n, -1, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    work_state = np.empty(n + 1, dtype=np.int64)  # the depth-first path: a state and its next edge
    work_edge = np.empty(n + 1, dtype=np.int64)
    sp = 0
    counter = 0
    found = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work_state[0] = root
        work_edge[0] = 0
        depth = 1
        while depth:
            depth -= 1
            v = work_state[depth]
            i = work_edge[depth]
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack[sp] = v
                sp += 1
                on_stack[v] = True
            descended = False
            while i < indptr[v + 1] - indptr[v]:
                w = targets[indptr[v] + i]
                i += 1
                if index[w] < 0:
                    work_state[depth] = v
                    work_edge[depth] = i
                    work_state[depth + 1] = w
                    work_edge[depth + 1] = 0
                    depth += 2
                    descended = True
                    break
                if on_stack[w]:
                    low[v] = min(low[v], index[w])
            if descended:
                continue
            if low[v] == index[v]:
                while True:
                    sp -= 1
                    w = stack[sp]
                    on_stack[w] = False
                    comp[w] = found
                    if w == v:
                        break
                found += 1
            if depth:
                parent = work_state[depth - 1]
                low[parent] = min(low[parent], low[v])
    return comp
