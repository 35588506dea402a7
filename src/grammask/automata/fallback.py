"""Lark's backtracking as lexer states: a lexeme that runs on past a complete match and dies falls back to it.

Lark lexes with Python's ``re``: at each position it takes the terminals' match, and a match does not have
to be where the lexeme stops growing. In SynCode's Python grammar ``_NL`` may run on into a docstring
(a newline, indentation, then ``f`` and a triple quote), so after ``\\n    f`` the lexeme is still a prefix of ``_NL``; on ``o`` it dies, and Lark
backs up to ``\\n    `` (an ``_NL``) and lexes ``for`` after it. The plain lexing rule (grow while some terminal
can still match, then emit) rejects there.

:func:`add_fallbacks` builds that rule into the lexer automaton. A *fallback state* is a non-accepting state of
the DFA reached after a complete lexeme, together with what Lark does if the lexeme dies before it is complete
again: emit the earlier match's terminal (its ``accept``) and go on lexing the bytes read since then, from the
state those bytes lead to (its ``restart``, a state in the middle of a lexeme, itself possibly a fallback
state). When the text that followed the earlier match already completed lexemes of its own, ``restart`` is a
*chain state*: no byte extends it, so on the next byte it emits its terminal and restarts in turn. The engine's
one rule (no transition: emit ``accept[q]``, go to ``restart[q]``, read the byte again, as often as needed)
then lexes as Lark does, with emission delayed to the byte where the long lexeme dies.

Only fallbacks that some text can take are kept (the long lexeme can die, or end with the input, at a point where
the text since the earlier match lexes on); a grammar without such a place gets its automaton back unchanged
and pays nothing. A fallback only the end of input could take becomes *late* states (see :class:`Fallbacks`) or is
not kept. Where the construction would not end (a fallback inside a fallback without bound, as for
terminals ``a`` and ``a+b`` on ``aaaa…``) it stops at :data:`MAX_NEW_STATES` and reports why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from grammask.automata.regex import TrailingContext

MAX_NEW_STATES = 20_000
"""Fallback and chain states one lexer may add."""

MAX_DEPTH = 5
"""The most fallback and chain states one restart may lead through: the lexemes Lark may still have to emit when a
long lexeme dies. Past it the fallback is dropped, which keeps the plain rule there; see ``cut``."""

END = 256
"""The end of input, as a byte column of ``allowed``."""

CHAIN = -2
"""``alt`` of a chain state."""

BRANCH = -2
"""``restart`` of a contextual lexer's state whose next mode the parser picks (as
:data:`grammask.automata.lexer.BRANCH`)."""

HEAD = -3
"""``origin`` of a *parting* state (see :class:`Fallbacks`)."""

LATE = -4
"""The restart key of a *late* state (see :class:`Fallbacks`) while it is built."""


Reading = frozenset[tuple[int, int]]
"""A dropped reading: pairs of lexer terminals it emits one right after the other."""

Joins = Callable[[int, int], bool]
"""Whether the parser may take lexer terminal ``y`` right after ``x`` (False: every reading emitting ``x`` then ``y``
fails to parse, so the lexer need not follow it)."""


@dataclass(frozen=True)
class Fallbacks:
    """A lexer DFA with fallback and chain states added after its own ``n_plain`` states (which keep their numbers).

    ``origin[q]`` is the plain state whose lexeme a state is growing (-1 for a chain state, -2 for a reading
    state), ``trans``, ``accept`` and ``restart`` as in :class:`~grammask.automata.lexer.LexerAutomaton`.
    ``alt[q]`` is, for a fallback state, its *reading state*: a state without transitions whose ``produce`` row
    ``first_after`` holds the terminals the text after the earlier match can become first while the long lexeme
    dies before it is complete (the follow set of the reading "the long lexeme dies here"); -2 for a chain state,
    -1 otherwise. ``windows`` lists the bytes a long
    lexeme reads while a fallback is pending (where the earlier match's terminal is emitted later), per fallback
    terminal. ``cut`` names the terminals of fallbacks dropped at :data:`MAX_DEPTH` (the plain rule stays there).
    ``cut`` and ``parted`` map each such terminal to its dropped readings, each as pairs ``(x, y)`` of lexer terminals
    it emits one right after the other: where the parser never takes ``y`` right after ``x``, Lark's parse of that
    reading fails too, and dropping it changes no verdict.

    Under a contextual lexer the text after an earlier match whose terminal branches (the next mode depends on the
    stack) may lex differently per mode. There the transition out of the match goes to a *parting* state (``origin``
    :data:`HEAD`, no transitions, never rested in): row ``part_row[q]`` of ``parts`` holds the terminal of the match,
    then per branch option of it (in ``branch_ptr`` order) the state the lexeme goes on in, a fallback state whose
    restart is that option's. The reader picks the option of the mode the parser reaches after the terminal, right
    away. ``bits[q]`` of such a fallback state is the set of options it serves (0 elsewhere): where it falls back, its
    terminal stands for those modes only. ``parted`` names the terminals of fallbacks still not kept because the mode
    after a lexeme of their chain would decide how the text after it lexes. ``part_row`` is None without parting
    states.

    A fallback only the end of input could take (the long lexeme cannot die on a byte, as lark.lark's ``REGEXP``
    after ``/\\/`` while no ``/`` follows) is not a fallback state: the text after the earlier match would have to be
    lexed and parsed to its end. Where the long lexeme can only become the earlier match's terminal, its states are
    copied as *late* states instead: ``late[q]`` is the terminal of the earlier match pending (-1 elsewhere); a late
    state lexes as its ``origin`` and is not accepting, and whoever reads the text keeps the reading where the long
    lexeme ends with the input beside it (the matcher does, ``Matcher._advance``). ``late`` is None without them.
    """

    n_plain: int
    trans: np.ndarray
    accept: np.ndarray
    restart: np.ndarray
    origin: np.ndarray
    alt: np.ndarray
    first_after: np.ndarray
    windows: dict[int, frozenset[int]]
    cut: Mapping[int, frozenset[Reading]] = field(default_factory=dict)
    parted: Mapping[int, frozenset[Reading]] = field(default_factory=dict)
    part_row: np.ndarray | None = None
    parts: np.ndarray | None = None
    bits: np.ndarray | None = None
    late: np.ndarray | None = None

    @property
    def added(self) -> bool:
        """Whether any fallback state was added."""
        return len(self.origin) > self.n_plain

    @property
    def fallback_terminals(self) -> tuple[int, ...]:
        """The terminals some fallback state emits when its long lexeme dies."""
        return tuple(sorted(self.windows))


class FallbackLimit(Exception):
    """The fallbacks of a lexer do not end within :data:`MAX_NEW_STATES` states (internal)."""


def trailing_pairs(trans: np.ndarray, context: TrailingContext) -> Iterator[tuple[int, int]]:
    """The (lexer state, trailing-context state) pairs the lexer DFA and a terminal's trailing-context DFA reach side
    by side from the empty lexeme."""
    seen = {(0, 0)}
    todo = [(0, 0)]
    while todo:
        q, t = todo.pop()
        yield q, t
        for byte in np.flatnonzero((trans[q] >= 0) & (context.trans[t] >= 0)).tolist():
            pair = (int(trans[q, byte]), int(context.trans[t, byte]))
            if pair not in seen:
                seen.add(pair)
                todo.append(pair)


def ends_allowed(trans: np.ndarray, accept: np.ndarray, trailing: tuple[tuple[int, TrailingContext], ...],
                 ) -> np.ndarray:
    """Per plain state, the next bytes (column 256: the end of input) before which its lexeme may end.

    A terminal whose lookahead reaches past the lexeme allows only some; where a state's lexeme is met by several
    states of that lookahead, it may end only where all allow it."""
    allowed = np.ones((len(accept), END + 1), dtype=bool)
    for terminal, context in trailing:
        for q, t in trailing_pairs(trans, context):
            if accept[q] == terminal:
                allowed[q] &= context.allowed[t]
    return allowed


def add_fallbacks(trans: np.ndarray, accept: np.ndarray, restart: np.ndarray, allowed: np.ndarray,
                  produce: np.ndarray, branches: list[list[int]] | None = None,
                  looks_past: frozenset[int] = frozenset(), joins: Joins | None = None, late: bool = False,
                  ) -> Fallbacks | None:
    """The lexer DFA ``trans``/``accept`` (every next lexeme starting in ``restart[q]``, a state with an empty
    lexeme; ``allowed`` from :func:`ends_allowed`; ``produce`` its Prod rows) with Lark's fallbacks as states; None where no text can take a
    fallback (the automaton stays as it is).

    A contextual lexer's ``restart[q]`` may be :data:`BRANCH` (the parser picks the next mode): ``branches[t]`` lists
    the states the lexeme after terminal ``t`` may then start in. Where a fallback's earlier match is such a terminal,
    the text after it is lexed from each of them: if every one reaches the same state (the modes lex the rest alike),
    that state is the restart, else a parting state leads to one fallback state per group of options that agree
    (see :class:`Fallbacks`). Where a lexeme of a fallback's chain is such a terminal and the modes part, the fallback
    is not kept there and the terminal is named in ``parted``; so is one whose match is of a terminal in
    ``looks_past`` (a contextual lexer's terminals with trailing context: its bans only cover the bytes that do not
    extend a lexeme, so they cannot say whether the match may end before one that does).

    With ``joins``, a fallback or chain whose every reading emits two terminals one right after the other that the
    parser never takes so is not kept (at any depth, and not recorded as dropped): Lark's parse of every such reading
    fails, as the plain rule's lexing does.

    With ``late``, a fallback only the end of input could take becomes late states where the long lexeme can only
    become the earlier match's terminal (see :class:`Fallbacks`); without, it is not kept.

    Raises :class:`FallbackLimit` where the fallbacks need more than :data:`MAX_NEW_STATES` states.
    """
    built = _Builder(trans, accept, restart, allowed, produce, branches or [], looks_past, joins, late)
    built.run()
    return built.result()


def _utf8_table() -> list[list[int]]:
    """UTF-8 as a DFA: ``table[u][b]`` is the position after byte ``b`` at position ``u`` (0: between characters;
    1-3: that many continuation bytes due; 4-7: the restricted second byte after E0, ED, F0, F4), -1 if invalid."""
    table = [[-1] * 256 for _ in range(8)]
    leads = {**{b: 1 for b in range(0xC2, 0xE0)}, **{b: 2 for b in range(0xE1, 0xF0)}, 0xE0: 4, 0xED: 5,
             **{b: 3 for b in range(0xF1, 0xF4)}, 0xF0: 6, 0xF4: 7}
    for b in range(0x80):
        table[0][b] = 0
    for b, u in leads.items():
        table[0][b] = u
    for u, (lo, hi, then) in {1: (0x80, 0xBF, 0), 2: (0x80, 0xBF, 1), 3: (0x80, 0xBF, 2), 4: (0xA0, 0xBF, 1),
                              5: (0x80, 0x9F, 1), 6: (0x90, 0xBF, 2), 7: (0x80, 0x8F, 2)}.items():
        for b in range(lo, hi + 1):
            table[u][b] = then
    return table


def can_die(trans: np.ndarray, accept: np.ndarray, starts: frozenset[int] = frozenset({0})) -> list[bool]:
    """Per state, whether some text continuing the lexeme in it (valid UTF-8) makes it die before it is complete
    again: at a byte no terminal continues it with, through non-accepting states only (lexemes begin in
    ``starts``)."""
    n = len(accept)
    rows, acc = trans.tolist(), accept.tolist()
    utf8 = _utf8_table()

    def fits(need: int, byte: int) -> int:
        return utf8[need][byte]

    # the UTF-8 positions each state is met at, from the empty lexemes
    seen = {(q, 0) for q in starts}
    todo = list(seen)
    while todo:
        q, need = todo.pop()
        for byte, nxt in enumerate(rows[q]):
            after = fits(need, byte)
            if nxt >= 0 and after >= 0 and (nxt, after) not in seen:
                seen.add((nxt, after))
                todo.append((nxt, after))
    dies = {pair for pair in seen if acc[pair[0]] < 0 and any(
        nxt < 0 and fits(pair[1], byte) >= 0 for byte, nxt in enumerate(rows[pair[0]]))}
    changed = True
    while changed:
        changed = False
        for q, need in seen:
            if (q, need) in dies or acc[q] >= 0:
                continue
            for byte, nxt in enumerate(rows[q]):
                after = fits(need, byte)
                if nxt >= 0 and after >= 0 and (nxt, after) in dies:
                    dies.add((q, need))
                    changed = True
                    break
    out = [False] * n
    for q, _ in dies:
        out[q] = True
    return out


class _Builder:
    def __init__(self, trans: np.ndarray, accept: np.ndarray, restart: np.ndarray, allowed: np.ndarray,
                 produce: np.ndarray, branches: list[list[int]], looks_past: frozenset[int], joins: Joins | None,
                 late: bool):
        self.n = len(accept)
        self.late = late
        self.looks_past = looks_past
        self.joins = joins
        self.produce = produce
        self.n_terms = produce.shape[1]
        self.trans = trans.tolist()
        self.plain_accept = accept.tolist()
        self.branches = branches
        self.starts = {0, *(r for r in restart.tolist() if r >= 0), *(q for options in branches for q in options)}
        self.dies = can_die(trans, accept, frozenset(self.starts))
        self.allowed = allowed.tolist()
        # per state: (origin, fallback terminal, restart, branch options served); plain states are their own origin;
        # a parting state is (HEAD, terminal, its row of self.heads, 0)
        self.keys: list[tuple[int, int, int, int]] = [(q, a, r, 0) for q, (a, r) in enumerate(zip(accept.tolist(),
                                                                                                  restart.tolist()))]
        self.ids: dict[tuple[int, int, int, int], int] = {}
        self.heads: list[tuple[int, tuple[int, ...]]] = []  # per parting state: the plain state, a member per option
        self.head_ids: dict[tuple[int, int, tuple[int, ...]], int] = {}
        self.rows: list[list[int] | None] = [None] * self.n
        self.depth = [0] * self.n
        self.cut: dict[int, set[Reading]] = {}
        self.parted: dict[int, set[Reading]] = {}
        self.produce_lists = [np.flatnonzero(row).tolist() for row in produce]
        self.utf8 = _utf8_table()
        self._dead: dict[int, list[int]] = {}
        self._parses: dict[tuple[int, int], bool] = {}
        self._inside: dict[tuple[int, int], bool] = {}

    def state(self, origin: int, term: int, again: int, bits: int = 0, before: int = -1) -> int:
        """The state growing ``origin``'s lexeme (-1: a chain state) that emits ``term`` and restarts in ``again``
        when it dies (``bits``: the branch options of ``term`` it serves, 0 for all); -1 (and ``term`` cut) past
        :data:`MAX_DEPTH`, -1 where the parser never takes ``term`` right after ``before`` (the terminal emitted right
        before ``term``'s lexeme, -1 if not known)."""
        key = (origin, term, again, bits)
        found = self.ids.get(key)
        if found is None:
            if not self.parses(term, again, before):
                return -1
            depth = self.depth[again] + 1
            if depth > MAX_DEPTH:
                self._drop(self.cut, term, term, [again], before)
                return -1
            found = self.ids[key] = self._add(key, depth)
        return found

    def late_state(self, origin: int, term: int) -> int:
        """The late state growing ``origin``'s lexeme while a match of ``term`` is pending that only the end of input
        could take."""
        key = (origin, term, LATE, 0)
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = self._add(key, 0)
        return found

    def ends_inside(self, q: int, u: int) -> bool:
        """Whether the input may end while the lexeme in plain state ``q`` (at UTF-8 position ``u``) is incomplete: some
        valid text leads it through incomplete states only to one between two characters."""
        found = self._inside.get((q, u))
        if found is None:
            seen, todo = {(q, u)}, [(q, u)]
            found = False
            while todo and not found:
                q, u = todo.pop()
                found = u == 0
                for byte, nxt in enumerate(self.trans[q]):
                    after = self.utf8[u][byte]
                    if nxt >= 0 and after >= 0 and self.plain_accept[nxt] < 0 and (nxt, after) not in seen:
                        seen.add((nxt, after))
                        todo.append((nxt, after))
            self._inside[(q, u)] = found
        return found

    def parses(self, term: int, again: int, before: int) -> bool:
        """Whether a reading that emits ``before`` (if known), ``term``, then a lexeme from state ``again`` may parse:
        the parser may take ``term`` after ``before`` and some terminal the lexeme may become after ``term``."""
        if self.joins is None:
            return True
        if before >= 0 and not self.joins(before, term):
            return False
        key = (term, again)
        found = self._parses.get(key)
        if found is None:
            found = self._parses[key] = any(self.joins(term, y) for y in self.first_terms(again))
        return found

    def _add(self, key: tuple[int, int, int, int], depth: int) -> int:
        if len(self.keys) - self.n >= MAX_NEW_STATES:
            raise FallbackLimit(f"more than {MAX_NEW_STATES} fallback states")
        self.keys.append(key)
        self.rows.append(None)
        self.depth.append(depth)
        return len(self.keys) - 1

    def part(self, nxt: int, term: int, byte: int) -> int:
        """Where ``byte`` takes a lexeme of branch terminal ``term`` on to plain state ``nxt``, a fallback to it: the
        fallback state where every mode after ``term`` lexes ``byte`` alike, else a parting state over one per group
        of modes that agree (-1: none)."""
        tails = [self.step(start, byte, term) for start in self.branches[term]]
        if len(set(tails)) == 1:
            return -1 if tails[0] < 0 else self.state(nxt, term, tails[0])
        if term in self.looks_past:
            self._drop(self.parted, term, term, tails)
            return -1
        members = tuple(-1 if tail < 0 else self.state(nxt, term, tail, sum(1 << k for k, t in enumerate(tails)
                                                                             if t == tail)) for tail in tails)
        if len(set(members)) == 1:
            return members[0]
        key = (term, nxt, members)
        found = self.head_ids.get(key)
        if found is None:
            self.heads.append((nxt, members))
            found = self.head_ids[key] = self._add((HEAD, term, len(self.heads) - 1, 0), 0)
        return found

    def ends(self, s: int, byte: int) -> bool:
        """Whether the lexeme pending in ``s`` may end before ``byte`` (a fallback's match was checked when made)."""
        return s >= self.n or self.allowed[s][byte]

    def row(self, s: int) -> list[int]:
        found = self.rows[s]
        if found is None:
            found = self.rows[s] = self._row(s)
        return found

    def _row(self, s: int) -> list[int]:
        origin, term, again, bits = self.keys[s]
        if origin < 0:
            return [-1] * 256
        accept = self.plain_accept
        if again == LATE:  # the long lexeme grows until it is complete again
            return [nxt if nxt < 0 or accept[nxt] >= 0 else self.late_state(nxt, term) for nxt in self.trans[origin]]
        out = []
        for byte, nxt in enumerate(self.trans[origin]):
            if nxt < 0 or accept[nxt] >= 0:
                out.append(nxt)
                continue
            if not self.dies[nxt]:  # only the end of input could make Lark fall back (see Fallbacks)
                if (self.late and s < self.n and term >= 0 and self.allowed[s][byte]
                        and set(self.produce_lists[nxt]) <= {term} and self.ends_inside(nxt, self.utf8[0][byte])):
                    out.append(self.late_state(nxt, term))
                    continue
                fallback = False
            elif s < self.n:  # a plain state: its own match is the fallback, if it is one and may end here
                fallback = term >= 0 and self.allowed[s][byte]
            else:
                fallback = True
            if not fallback:
                made = -1
            elif again == BRANCH:  # a plain state's own match, after which the parser picks the mode
                made = self.part(nxt, term, byte)
            else:
                tail = self.resume(term, again, byte)
                made = -1 if tail < 0 else self.state(nxt, term, tail, bits)
            out.append(nxt if made < 0 else made)
        return out

    def step(self, s: int, byte: int, before: int) -> int:
        """The state after ``byte`` from ``s`` under the rule (chain states for what it completes), -1 if rejected;
        ``before`` is the terminal emitted right before the lexeme of ``s``."""
        nxt = self.row(s)[byte]
        if nxt >= 0:
            head, term, row, _ = self.keys[nxt]
            if row == LATE:  # text re-read past a match: the end-only reading is not kept there
                return head
            if head != HEAD:
                return nxt
            # the mode after a lexeme of the chain would pick the restart: not kept
            self.parted.setdefault(term, set()).add(frozenset({(before, term)} if before >= 0 else ()))
            return self.heads[row][0]
        _, term, again, _ = self.keys[s]
        if term < 0 or s in self.starts or not self.ends(s, byte):
            return -1
        tail = self.resume(term, again, byte, before)
        return -1 if tail < 0 else self.state(-1, term, tail, before=before)

    def resume(self, term: int, again: int, byte: int, before: int = -1) -> int:
        """The state after ``byte`` read where the lexeme after ``term`` starts in ``again`` (-1: rejected); at a
        branch the one every mode reaches, else -1 with ``term`` parted (``before``: as in :meth:`state`)."""
        if again != BRANCH:
            return self.step(again, byte, term)
        tails = {self.step(start, byte, term) for start in self.branches[term]}
        if len(tails) == 1:
            return tails.pop()
        self._drop(self.parted, term, term, tails, before)
        return -1

    def _drop(self, dropped: dict[int, set[Reading]], named: int, term: int, after: Iterable[int], before: int = -1,
              ) -> None:
        """Record under ``named`` the dropped readings that emit ``before`` (if known), ``term``, then a lexeme from one
        of the states ``after``."""
        readings = dropped.setdefault(named, set())
        lead = {(before, term)} if before >= 0 else set()
        for q in after:
            if q >= 0:
                readings.update(frozenset({*lead, (term, y)}) for y in self.first_terms(q))

    def first_terms(self, q: int) -> list[int]:
        """The terminals the lexeme in state ``q`` may be emitted as first (its earlier match, if it falls back)."""
        origin, term, row, _ = self.keys[q]
        if q < self.n:
            return self.produce_lists[q]
        if origin == HEAD:
            return [term, *self.produce_lists[self.heads[row][0]]]
        return [term] if origin < 0 else [term, *self.produce_lists[origin]]

    def survives(self, s: int, byte: int) -> bool:
        """Whether ``byte`` read in ``s`` is lexed on (what it ends emitted), without making chain states."""
        while self.row(s)[byte] < 0:
            _, term, again, _ = self.keys[s]
            if term < 0 or s in self.starts or not self.ends(s, byte):
                return False
            if again == BRANCH:
                return any(self.row(start)[byte] >= 0 for start in self.branches[term])
            s = again
        return True

    def finish(self, s: int) -> bool:
        """Whether the input may end in ``s`` (what is pending completes, fallbacks and chains included)."""
        while s not in self.starts:
            _, term, again, _ = self.keys[s]
            if term < 0 or not self.ends(s, END):
                return False
            if again == BRANCH:
                return True
            s = again
        return True

    def dead_bytes(self, q: int) -> list[int]:
        """The bytes no transition of plain state ``q`` takes."""
        found = self._dead.get(q)
        if found is None:
            found = self._dead[q] = [byte for byte, nxt in enumerate(self.trans[q]) if nxt < 0]
        return found

    def run(self) -> None:
        s = 0
        while s < len(self.keys):
            self.row(s)
            s += 1

    def result(self) -> Fallbacks | None:
        n, keys = self.n, self.keys
        fallback = [k[0] >= 0 and s >= n and k[2] != LATE for s, k in enumerate(keys)]
        usable = [False] * len(keys)
        for s in range(n, len(keys)):
            origin, _, again, _ = keys[s]
            if fallback[s]:
                usable[s] = self.finish(s) or any(self.survives(again, byte) for byte in self.dead_bytes(origin))
        changed = True
        while changed:
            changed = False
            for s in range(n, len(keys)):
                if fallback[s] and not usable[s] and any(nxt >= n and usable[nxt] for nxt in self.rows[s]):
                    usable[s] = changed = True
        plain = [s if s < n or not fallback[s] or usable[s] else keys[s][0] for s in range(len(keys))]
        members: dict[int, list[int]] = {}  # per parting state, its members as kept
        for s in range(n, len(keys)):
            if keys[s][0] == HEAD:
                nxt, options = self.heads[keys[s][2]]
                kept = [nxt if m < 0 else plain[m] for m in options]
                if len(set(kept)) == 1:
                    plain[s] = kept[0]
                else:
                    members[s] = kept
        # keep what the plain states reach through transitions and restarts, in order
        number = {s: s for s in range(n)}
        order = list(range(n))
        i = 0
        while i < len(order):
            s = order[i]
            i += 1
            links = [plain[t] for t in self.rows[s] if t >= 0]
            if s in members:
                links.extend(members[s])
            elif s >= n and keys[s][2] != LATE:
                links.append(plain[keys[s][2]])
            for t in links:
                if t not in number:
                    number[t] = len(order)
                    order.append(t)
        if len(order) == n and not self.cut and not self.parted:
            return None
        size = len(order)
        trans = np.full((size, 256), -1, dtype=np.int32)
        accept = np.empty(size, dtype=np.int32)
        restart = np.empty(size, dtype=np.int32)
        origin = np.empty(size, dtype=np.int32)
        bits = np.zeros(size, dtype=np.int64)
        late = np.full(size, -1, dtype=np.int32)
        width = max((len(options) for options in self.branches), default=0)
        part_row = np.full(size, -1, dtype=np.int32)
        parts = np.full((len(members), 1 + width), -1, dtype=np.int32)
        windows: dict[int, set[int]] = {}
        heads: dict[int, list[int]] = {}  # per parting state, its members
        for new, s in enumerate(order):
            row = [number[plain[t]] if t >= 0 else -1 for t in self.rows[s]]
            trans[new] = row
            key_origin, term, again, bits[new] = keys[s]
            if s < n:
                accept[new], restart[new], origin[new] = self.plain_accept[s], again, s
                continue
            if key_origin == HEAD:
                accept[new], restart[new], origin[new] = -1, 0, HEAD
                part_row[new] = row_of = len(heads)
                heads[new] = [number[m] for m in members[s]]
                parts[row_of, 0] = term
                parts[row_of, 1:1 + len(members[s])] = heads[new]
                continue
            if again == LATE:
                accept[new], restart[new], origin[new], late[new] = -1, 0, key_origin, term
                continue
            accept[new], restart[new], origin[new] = term, number[plain[again]], key_origin
            if key_origin >= 0:
                windows.setdefault(term, set()).update(b for b, t in enumerate(row) if t >= n)
        for s in range(n):  # the byte that leaves a match for a fallback state is read while it is pending too
            for byte, t in enumerate(trans[s].tolist()):
                if t >= n and late[t] < 0 and (origin[t] >= 0 or origin[t] == HEAD):
                    windows.setdefault(self.plain_accept[s], set()).add(byte)
        fallbacks = [q for q in range(n, size) if origin[q] >= 0 and late[q] < 0]
        alt = np.full(size + len(fallbacks), -1, dtype=np.int32)
        alt[n:size][origin[n:] == -1] = CHAIN
        alt[fallbacks] = np.arange(size, size + len(fallbacks), dtype=np.int32)
        lists = (trans.tolist(), accept.tolist(), restart.tolist(), origin.tolist(), alt.tolist())
        first_after = np.array([self._first_after(q, *lists, heads) for q in fallbacks], dtype=bool).reshape(len(fallbacks), self.n_terms)
        pad = len(fallbacks)
        parting = len(members) > 0
        return Fallbacks(
            n, np.vstack([trans, np.full((pad, 256), -1, dtype=np.int32)]),
            np.concatenate([accept, np.full(pad, -1, dtype=np.int32)]),
            np.concatenate([restart, np.zeros(pad, dtype=np.int32)]),
            np.concatenate([origin, np.full(pad, -2, dtype=np.int32)]), alt, first_after,
            {t: frozenset(b) for t, b in windows.items()}, _frozen(self.cut), _frozen(self.parted),
            np.concatenate([part_row, np.full(pad, -1, dtype=np.int32)]) if parting else None,
            parts if parting else None, np.concatenate([bits, np.zeros(pad, dtype=np.int64)]) if parting else None,
            np.concatenate([late, np.full(pad, -1, dtype=np.int32)]) if (late >= 0).any() else None)

    def _first_after(self, x: int, rows: list[list[int]], acc: list[int], restart: list[int], origin: list[int],
                     alt: list[int], heads: dict[int, list[int]]) -> list[bool]:
        """The terminals the lexeme pending after fallback state ``x``'s earlier match (and its chain, emitted with
        it) can be emitted as first, over the continuations that make the long lexeme die before it is complete
        again (a bool row over terminals). A parting state the text after the match enters stands for its members
        (they differ only in their restarts)."""
        out = [False] * self.n_terms
        tail = restart[x]
        while alt[tail] == CHAIN:  # lexemes after the match that are complete already: emitted with it
            tail = restart[tail]
        plain, produce, utf8, dies = self.trans, self.produce_lists, self.utf8, self.dies

        def first_of(st: int) -> None:
            """What the lexeme pending in ``st`` can be emitted as first (its fallback, if it has one)."""
            for t in produce[origin[st]]:
                out[t] = True
            if alt[st] >= 0:
                out[acc[st]] = True

        def emits(st: int, byte: int) -> bool:
            return acc[st] >= 0 and (st >= self.n or self.allowed[st][byte])

        seen = {(origin[x], tail, 0)}
        todo = list(seen)
        while todo:
            ql, st, u = todo.pop()
            if emits(st, END):
                out[acc[st]] = True  # the input ends: the long lexeme falls back, the text after it completes
            for byte in range(256):
                after = utf8[u][byte]
                if after < 0:
                    continue
                long_next, tail_next = plain[ql][byte], rows[st][byte]
                tails = heads.get(tail_next, (tail_next,))
                if long_next < 0:  # the long lexeme dies here
                    if tail_next >= 0:
                        for one in tails:
                            first_of(one)
                    elif emits(st, byte):
                        out[acc[st]] = True
                elif self.plain_accept[long_next] < 0:
                    if tail_next >= 0:
                        for one in tails:
                            if (long_next, one, after) not in seen:
                                seen.add((long_next, one, after))
                                todo.append((long_next, one, after))
                    elif emits(st, byte) and dies[long_next]:
                        out[acc[st]] = True
        return out


def _frozen(dropped: dict[int, set[Reading]]) -> dict[int, frozenset[Reading]]:
    return {t: frozenset(readings) for t, readings in dropped.items()}
