"""What newlines of each width cost in tokens, for token budgets under an indenter (Lark's ``Indenter``).

The parser sees the indenter's NEWLINE, INDENT and DEDENT; what they cost depends on the width of
the newline's last line, which the completion chooses: the width of an open level (same level, or
dedents to it) or one deeper (an indent). Widths count as :mod:`grammask.indentation` counts them
(spaces 1, tabs ``tab_len``, a line break back to 0).

:func:`build_newline_costs` finds, over the vocabulary's tokens, the fewest tokens that
take a newline lexeme pending in lexer state ``q`` with its line ``w0`` wide to a complete newline
whose last line is ``w1`` wide (``move``), and from no lexeme at all (``fresh``; under a contextual lexer
the costliest over the modes' starts, where the newline's lexeme may begin). Budgets keep
indentation levels at most ``width_cap`` wide (a newline that would open a deeper level is masked):
``term`` is then the most a newline of a completion costs, separator included, at any width up
to one level deeper than the cap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from grammask.automata.lexer import LexerAutomaton
from grammask.budget.costs import INF
from grammask.budget.lexical import completes, starts_of
from grammask.errors import BudgetUnsupportedError

_MAX_CAP = 126  # the widest level a budget tracks
_MIN_CAP = 32  # the cap always covers this, whatever a newline of that width costs
_MAX_STEPS = 8  # whitespace tokens one newline may take


@dataclass(frozen=True)
class NewlineCosts:
    """Token costs of newlines by width. Width index ``w + 1`` is width ``w`` (0 is "no line break yet", the
    last index "wider than ``width_cap + 1``").

    ``states``: the lexer states a pending newline lexeme may be in (``row[q]`` their row, -1 elsewhere);
    ``move[row[q], w0, w1]``: tokens from (``q``, width index ``w0``) to a complete newline ``w1`` wide (INF if
    none); ``term``: the cost a completion counts per newline (see the module docstring).
    """

    width_cap: int
    term: int
    row: np.ndarray
    move: np.ndarray

    def width_index(self, width: int) -> int:
        """The width index of a pending newline's line ``width`` wide (-1: no line break yet)."""
        return min(width + 1, self.move.shape[1] - 1)


def build_newline_costs(lexer: LexerAutomaton, newline: int, widths: np.ndarray, tokens, trail: np.ndarray,
                        ) -> NewlineCosts:
    """The newline costs of lexer terminal ``newline`` over the ``tokens`` (bytes or None) of a vocabulary, with
    indentation counted by ``widths`` (:func:`~grammask.indentation.byte_widths`);
    ``trail[s]``: the separator a lexeme ending in state ``s`` needs (see :mod:`.lexical`).

    Raises :class:`~grammask.errors.BudgetUnsupportedError` where the vocabulary cannot write newlines of
    the widths a budget needs, or where a terminal of the grammar could run on from a complete newline.
    """
    trans, accept = lexer.trans, lexer.accept
    starts = starts_of(lexer)
    starts = starts[lexer.produce[starts, newline]]  # the lexemes' starts (one per mode) where a newline may begin
    pending = np.flatnonzero(lexer.produce[:, newline])
    pending = pending[~np.isin(pending, starts_of(lexer))]
    nodes = [*starts.tolist(), *pending.tolist()]
    moves = _token_moves(trans, nodes, widths.tolist(), [t for t in tokens if t])
    starts_other = np.zeros(256, dtype=bool)  # bytes that begin another terminal in some mode
    for q0 in starts.tolist():
        for b in range(256):
            q = trans[q0, b]
            if q >= 0 and (lexer.produce[q] & ~lexer.ignored).any() and not lexer.produce[q, newline]:
                starts_other[b] = True
    others = np.flatnonzero(starts_other)
    # where a completion's newline may end: no other terminal runs on from there
    complete = completes(lexer)  # not a fallback state whose earlier match is a newline
    ends = sorted({s for found in moves for s, _, _ in found
                   if complete[s] and accept[s] == newline and not (trans[s, others] >= 0).any()})
    if not ends:
        raise BudgetUnsupportedError(
            f"token budgets need the indenter's newline {lexer.terminals[newline]} written in whitespace tokens to "
            "end where another terminal begins; here it cannot be written so"
        )
    widths = _MAX_CAP + 4  # no break, 0 .. cap + 1, wider
    index = {q: i for i, q in enumerate(nodes)}
    dist = _distances(nodes, moves, widths, [index[s] for s in ends])
    # reach[i, w1]: from node i (state, width index) to a complete newline of width index w1 (a completion's
    # newline is followed by a terminal, so a pending one needs no separator; a counted one may: trail)
    reach = np.full((len(nodes) * widths, widths), INF, dtype=np.int64)
    fresh = np.full((len(starts), widths), INF, dtype=np.int64)
    for k, s in enumerate(ends):
        part = dist[:, k * widths: (k + 1) * widths]
        reach = np.minimum(reach, part)
        # from no lexeme (no break yet), in each mode's start
        fresh = np.minimum(fresh, part[np.arange(len(starts)) * widths] + int(trail[s]))
    fresh = fresh.max(axis=0)  # whichever mode a completion meets a newline in
    needed = int(fresh[1: _MIN_CAP + 3].max())
    if needed >= INF:
        raise BudgetUnsupportedError("token budgets need newlines of every width up to "
                                     f"{_MIN_CAP + 1}, and this vocabulary cannot write some of them")
    cap = _MIN_CAP
    while cap < _MAX_CAP and fresh[cap + 3] <= needed:
        cap += 1
    row = np.full(lexer.n_states, -1, dtype=np.int32)
    row[pending] = np.arange(len(pending), dtype=np.int32)
    table = reach.reshape(len(nodes), widths, widths)[len(starts):]
    move = table[:, : cap + 4, : cap + 4].copy()
    move[:, cap + 3] = table[:, widths - 1, : cap + 4]  # any width past cap + 1 moves alike
    move[:, :, cap + 3] = INF  # no completion writes a newline wider than cap + 1
    return NewlineCosts(width_cap=cap, term=needed, row=row, move=np.minimum(move, INF).astype(np.int32))


def _token_moves(trans: np.ndarray, nodes: list[int], widths: list[int], tokens: list[bytes]) -> list[set[tuple]]:
    """Per node state: the distinct (end state, line break?, width) of the tokens that stay inside the lexeme
    (width: of the last line after a break, else what the token adds)."""
    out = []
    for q in nodes:
        found = set()
        for t in tokens:
            s, broke, width = q, False, 0
            for b in t:
                s = int(trans[s, b])
                if s < 0:
                    break
                if widths[b] < 0:
                    broke, width = True, 0
                else:
                    width += widths[b]
            else:
                found.add((s, broke, width))
        out.append(found)
    return out


def _distances(nodes: list[int], moves: list[set[tuple]], widths: int, targets: list[int]) -> np.ndarray:
    """Token distances from every (state, width index) node to those of the nodes ``targets`` (indices into
    ``nodes``; column ``k * widths + w`` is target ``k`` at width index ``w``), INF where unreachable in
    ``_MAX_STEPS`` tokens."""
    index = {q: i for i, q in enumerate(nodes)}
    src, dst = [], []
    w0 = np.arange(widths)
    inner = (w0 > 0) & (w0 < widths - 1)
    for i, found in enumerate(moves):
        for s, broke, width in found:
            if s not in index:
                continue
            if broke:
                w1 = np.full(widths, min(width + 1, widths - 1))
            else:
                w1 = np.where(inner, np.minimum(w0 + width, widths - 1), w0)
            src.append(i * widths + w0)
            dst.append(index[s] * widths + w1)
    n = len(nodes) * widths
    src = np.concatenate(src) if src else np.zeros(0, dtype=np.int64)
    dst = np.concatenate(dst) if dst else np.zeros(0, dtype=np.int64)
    order = np.argsort(dst, kind="stable")  # the reverse graph, as CSR: per node, the nodes one token before it
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=ptr[1:])
    goals = (np.array(targets, dtype=np.int64)[:, None] * widths + w0[None, :]).ravel()
    return _reverse_bfs(ptr, src[order].astype(np.int64), goals, n, _MAX_STEPS)


@nb.njit(cache=True)
def _reverse_bfs(ptr, before, goals, n, steps):
    """``out[x, k]``: the fewest edges from node ``x`` to ``goals[k]`` over the graph whose edges into ``y`` come
    from ``before[ptr[y]:ptr[y+1]]`` (INF beyond ``steps``)."""
    out = np.full((n, len(goals)), INF, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    for k in range(len(goals)):
        out[goals[k], k] = 0
        queue[0] = goals[k]
        head, tail = 0, 1
        while head < tail:
            y = queue[head]
            head += 1
            d = out[y, k]
            if d >= steps:
                continue
            for e in range(ptr[y], ptr[y + 1]):
                x = before[e]
                if out[x, k] >= INF:
                    out[x, k] = d + 1
                    queue[tail] = x
                    tail += 1
    return out
