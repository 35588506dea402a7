"""Regexes with lazy quantifiers or lookarounds, matched as Python's ``re`` matches them.

Python's ``re`` is a backtracking matcher: of all the ways a regex can match from a position, it
returns the first in priority order (each alternative before the next, a greedy repeat's
iteration before its exit, a lazy repeat's exit before its iteration). The lexemes of such a
terminal are the strings ``re.match`` can return for it: ``w`` is one iff ``re.match(p, w + rest)``
matches exactly ``w`` for some ``rest``. A regex without lookarounds does not look at ``rest``, so
these are the ``w`` that ``re.match(p, w)`` matches whole.

The DFA is built like RE2's leftmost-first DFA: a state is the list of NFA threads still alive, in
priority order, and when a thread matches unconditionally every thread after it is dropped (it
could never win). Like ``re``, a repeat whose last iteration matched the empty string does not
iterate again but goes on after the repeat (sre's rule against empty loops): within one closure,
a thread remembers which repeats began an iteration there. Only regexes with a lazy quantifier
get the cut; a regex with lookarounds but
no lazy quantifier keeps every thread, so its lexemes are all the strings it matches whole, the
meaning every other terminal has.

Lookarounds must have a regular language and no lookaround inside:

* a lookahead ``(?=X)`` / ``(?!X)`` becomes an obligation carried by the thread: the DFA of ``X``
  reads the following bytes alongside, and the thread dies as soon as the obligation fails. An
  obligation still open when the thread matches looks past the end of the lexeme: it must be
  decided by the one next byte (or the end of the input); the lexeme is then a match only before
  some bytes, recorded in :class:`~grammask.automata.regex.TrailingContext` for the lexer to check.
  A lookahead that needs more than one byte after the lexeme raises.
* a lookbehind ``(?<=X)`` / ``(?<!X)`` is decided by a DFA of ``.*X`` run over the lexeme from its
  start. It must never reach before the lexeme's start (there it would see the previous lexeme):
  the regex must have consumed at least ``X``'s width before it, else it raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from grammask.automata.dfa import ByteDFA, build_dfa
from grammask.automata.regex import (
    Alt,
    ByteNFA,
    Chars,
    Concat,
    Look,
    Node,
    Repeat,
    TrailingContext,
    has_lazy,
    has_lookaround,
    nfa_from_ast,
)
from grammask.automata.utf8 import EXIT, SCALARS, utf8_trie
from grammask.errors import UnsupportedRegexError

# A DFA with more states than this is refused rather than built (a regex whose priorities blow up).
MAX_STATES = 50_000
END_OF_INPUT = 256

# A thread: its NFA state and its open lookahead obligations (lookaround index, state of X's DFA).
_Thread = tuple[int, frozenset[tuple[int, int]]]


@dataclass(frozen=True)
class _Lookaround:
    ahead: bool
    negative: bool
    dfa: ByteDFA  # X's DFA (lookahead) or the DFA of .*X (lookbehind)


def prioritized_nfa(node: Node, name: str, pattern: str) -> ByteNFA:
    """The byte NFA (deterministic, with :attr:`ByteNFA.trailing` where needed) of a regex with
    lazy quantifiers or lookarounds, under Python's matching semantics (see the module docstring).

    Raises :class:`UnsupportedRegexError` naming the terminal for a lookaround inside a lookaround,
    a lookbehind that could reach before the lexeme's start, a lookahead that needs more than one
    byte after the lexeme, or a DFA over :data:`MAX_STATES` states.
    """
    return _Machine(node, name, pattern).nfa()


def _min_width(node: Node) -> int:
    """The fewest characters ``node`` matches."""
    if isinstance(node, Chars):
        return 1
    if isinstance(node, Concat):
        return sum(_min_width(p) for p in node.parts)
    if isinstance(node, Alt):
        return min(_min_width(o) for o in node.options)
    if isinstance(node, Repeat):
        return node.min * _min_width(node.node)
    return 0


def _max_width(node: Node) -> float:
    """The most characters ``node`` matches (infinity if unbounded)."""
    if isinstance(node, Chars):
        return 1
    if isinstance(node, Concat):
        return sum(_max_width(p) for p in node.parts)
    if isinstance(node, Alt):
        return max(_max_width(o) for o in node.options)
    if isinstance(node, Repeat):
        body = _max_width(node.node)
        return float("inf") if node.max is None and body else (node.max or 0) * body
    return 0


class _Machine:
    """A priority-ordered NFA (every choice an ordered epsilon split) and its DFA of thread lists."""

    def __init__(self, node: Node, name: str, pattern: str) -> None:
        self.name, self.pattern = name, pattern
        self.lazy = has_lazy(node)
        self.edges: list[list[tuple[int, int, int]]] = []
        self.eps: list[list[int]] = []
        self.look_at: dict[int, tuple[int, int]] = {}  # assertion state -> (lookaround, next state)
        self.iteration_start: dict[int, int] = {}  # state that begins an iteration -> its repeat
        self.iterate_or_exit: dict[int, tuple[int, int]] = {}  # repeat's choice state -> (repeat, exit)
        self.n_repeats = 0
        self.looks: list[_Lookaround] = []
        self.start = self._new()
        self.final = self._new()
        self.eps[self._build(node, self.start, 0)].append(self.final)
        self.behind = [i for i, look in enumerate(self.looks) if not look.ahead]

    def _error(self, why: str) -> UnsupportedRegexError:
        return UnsupportedRegexError(f"terminal {self.name}: regex {self.pattern!r} {why}")

    # --- the prioritized NFA ---------------------------------------------------------------

    def _new(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def _enter(self, src: int) -> int:
        state = self._new()
        self.eps[src].append(state)
        return state

    def _build(self, node: Node, src: int, before: int) -> int:
        """Add ``node`` after ``src`` (``before``: the fewest characters read up to here); return its end."""
        if isinstance(node, Chars):
            trie = utf8_trie(node.ranges)
            ids = [self._enter(src)] + [self._new() for _ in trie[1:]]
            end = self._new()
            for node_id, node_edges in zip(ids, trie):
                self.edges[node_id].extend((lo, hi, end if t == EXIT else ids[t]) for lo, hi, t in node_edges)
            return end
        if isinstance(node, Concat):
            for part in node.parts:
                src = self._build(part, src, before)
                before += _min_width(part)
            return src
        if isinstance(node, Alt):
            split, join = self._enter(src), self._new()
            for option in node.options:
                self.eps[self._build(option, self._enter(split), before)].append(join)
            return join
        if isinstance(node, Repeat):
            return self._repeat(node, src, before)
        return self._look(node, src, before)

    def _repeat(self, node: Repeat, src: int, before: int) -> int:
        repeat = self.n_repeats
        self.n_repeats += 1
        for _ in range(node.min):
            entry = self._enter(src)
            self.iteration_start[entry] = repeat
            src = self._build(node.node, entry, before)
        exit_state = self._new()
        optional = 1 if node.max is None else node.max - node.min
        for _ in range(optional):
            choice, body = self._enter(src), self._new()
            self.iteration_start[body] = repeat
            self.iterate_or_exit[choice] = (repeat, exit_state)
            self.eps[choice] = [exit_state, body] if node.lazy else [body, exit_state]
            src = self._build(node.node, body, before)
            if node.max is None:
                self.eps[src].append(choice)
        if node.max is not None:
            self.eps[src].append(exit_state)
        return exit_state

    def _look(self, node: Look, src: int, before: int) -> int:
        if has_lookaround(node.node):
            raise self._error("has a lookaround inside a lookaround, which grammask does not support")
        if node.ahead:
            dfa = build_dfa([nfa_from_ast(node.node, self.name)])
        else:
            if _max_width(node.node) > before:
                raise self._error(
                    "has a lookbehind that can look before the start of the lexeme (into the previous "
                    "lexeme); grammask needs every lookbehind to see only the lexeme's own text"
                )
            dfa = build_dfa([nfa_from_ast(Concat((Repeat(Chars(SCALARS), 0, None), node.node)), self.name)])
        self.looks.append(_Lookaround(node.ahead, node.negative, dfa))
        state, after = self._enter(src), self._new()
        self.look_at[state] = (len(self.looks) - 1, after)
        return after

    # --- threads ---------------------------------------------------------------------------

    def _advance(self, obligations: frozenset[tuple[int, int]], byte: int) -> frozenset[tuple[int, int]] | None:
        """Open obligations after one more byte, or None if one fails."""
        still_open = set()
        for index, state in obligations:
            look = self.looks[index]
            nxt = int(look.dfa.trans[state, byte])
            if nxt >= 0 and not look.dfa.accepts[nxt]:
                still_open.add((index, nxt))
            elif (nxt >= 0) == look.negative:  # X matched under (?!X), or can no longer match under (?=X)
                return None
        return frozenset(still_open)

    def _add(
        self, state: int, obligations: frozenset[tuple[int, int]], trackers: tuple[int, ...], out: list[_Thread], seen: set
    ) -> bool:
        """Append the threads reached from ``state`` without reading, in priority order.

        Returns True when an unconditional match cuts the threads after it (lazy regexes only).
        ``seen`` (shared by one step's closures) holds the closure entries visited and the threads listed.
        """
        # Each entry also holds the repeats that began an iteration in this closure (no byte read since).
        stack = [(state, obligations, frozenset())]
        while stack:
            entry = stack.pop()
            if entry in seen:
                continue
            seen.add(entry)
            s, obligations, began = entry
            if s in self.look_at:
                index, after = self.look_at[s]
                look = self.looks[index]
                if look.ahead:
                    if not look.dfa.accepts[0]:
                        stack.append((after, obligations | {(index, 0)}, began))
                    elif not look.negative:
                        stack.append((after, obligations, began))
                    continue
                tracked = trackers[self.behind.index(index)]
                if (tracked >= 0 and bool(look.dfa.accepts[tracked])) != look.negative:
                    stack.append((after, obligations, began))
                continue
            if (s == self.final or self.edges[s]) and (s, obligations) not in seen:
                seen.add((s, obligations))  # a thread once: a later copy has the same future
                out.append((s, obligations))
                if s == self.final and self.lazy and not obligations:
                    return True
            if s == self.final:
                continue
            if s in self.iteration_start:
                began = began | {self.iteration_start[s]}
            targets = self.eps[s]
            if s in self.iterate_or_exit:
                repeat, exit_state = self.iterate_or_exit[s]
                if repeat in began:  # the last iteration matched the empty string
                    targets = [exit_state]
            stack.extend((t, obligations, began) for t in reversed(targets))
        return False

    def _step(
        self, threads: tuple[_Thread, ...], trackers: tuple[int, ...], byte: int
    ) -> tuple[tuple[_Thread, ...], tuple[int, ...]]:
        """The thread list and lookbehind trackers after reading ``byte``."""
        trackers = tuple(
            int(self.looks[i].dfa.trans[t, byte]) if t >= 0 else -1 for i, t in zip(self.behind, trackers)
        )
        out: list[_Thread] = []
        seen: set = set()
        for s, obligations in threads:
            if s == self.final:
                if self._match_holds(obligations, byte) and self.lazy:
                    break  # a match that holds before this byte wins over every later thread
                continue
            for lo, hi, target in self.edges[s]:
                if lo <= byte <= hi:
                    advanced = self._advance(obligations, byte)
                    if advanced is not None and self._add(target, advanced, trackers, out, seen):
                        return tuple(out), trackers
        return tuple(out), trackers

    def _match_holds(self, obligations: frozenset[tuple[int, int]], byte: int) -> bool:
        """Whether a match with these open obligations holds when ``byte`` (or the end) follows it."""
        if byte == END_OF_INPUT:
            return all(self.looks[index].negative for index, _ in obligations)
        advanced = self._advance(obligations, byte)
        if advanced:
            raise self._error(
                "has a lookahead that looks more than one byte past the end of a lexeme; grammask's "
                "lexer decides where a lexeme ends from one byte of lookahead"
            )
        return advanced is not None

    # --- the DFA ---------------------------------------------------------------------------

    def _byte_classes(self) -> list[tuple[int, int]]:
        """Byte ranges no edge, lookahead or lookbehind DFA tells apart."""
        cuts = {0, 256}
        for state_edges in self.edges:
            for lo, hi, _ in state_edges:
                cuts.update((lo, hi + 1))
        for look in self.looks:
            trans = look.dfa.trans
            cuts.update((np.flatnonzero((trans[:, 1:] != trans[:, :-1]).any(axis=0)) + 1).tolist())
        points = sorted(cuts)
        return [(lo, hi - 1) for lo, hi in pairwise(points)]

    def nfa(self) -> ByteNFA:
        classes = self._byte_classes()
        out: list[_Thread] = []
        self._add(self.start, frozenset(), tuple(0 for _ in self.behind), out, set())
        first = (tuple(out), tuple(0 for _ in self.behind))
        ids = {first: 0}
        keys = [first]
        rows: list[list[tuple[int, int, int]]] = []
        allowed: list[np.ndarray] = []
        while len(rows) < len(keys):
            threads, trackers = keys[len(rows)]
            row, context = [], np.zeros(257, dtype=bool)
            matches = [obligations for s, obligations in threads if s == self.final]
            context[END_OF_INPUT] = any(self._match_holds(m, END_OF_INPUT) for m in matches)
            for lo, hi in classes:
                context[lo : hi + 1] = any(self._match_holds(m, lo) for m in matches)
                nxt = self._step(threads, trackers, lo)
                if not nxt[0]:
                    continue
                target = ids.get(nxt)
                if target is None:
                    if len(keys) >= MAX_STATES:
                        raise self._error(f"needs a DFA of more than {MAX_STATES} states under Python's match order")
                    target = ids[nxt] = len(keys)
                    keys.append(nxt)
                row.append((lo, hi, target))
            rows.append(row)
            allowed.append(context)
        final = len(rows)
        accepting = [bool(c.any()) for c in allowed]
        trailing = None
        if any(a and not c.all() for a, c in zip(accepting, allowed)):
            trans = np.full((len(rows), 256), -1, dtype=np.int32)
            for s, row in enumerate(rows):
                for lo, hi, t in row:
                    trans[s, lo : hi + 1] = t
            trailing = TrailingContext(trans, np.array(allowed))
        return ByteNFA(
            edges=tuple(tuple(row) for row in rows) + ((),),
            eps=tuple((final,) if a else () for a in accepting) + ((),),
            start=0,
            final=final,
            name=self.name,
            trailing=trailing,
        )
