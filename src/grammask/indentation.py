"""Indentation (Lark's ``Indenter`` postlex) run by the engine: newline widths, the level stack, brackets.

The lexer emits the grammar's newline terminal like any other; what the parser then sees depends on
context the LR stack does not hold (the stack of indentation levels, the bracket depth, and, for a
newline lexeme that began in an earlier token, the width its last line had reached). So in emitted
terminal sequences a newline is a *context terminal*: an id at or above ``base`` (one past the
parser's columns, so every table lookup of it fails and the compiled checks leave its class to the
matcher):

- ``base`` itself: a newline lexeme still pending, of any width (in follow sets);
- ``base + 1 + stride * 2 * w``: a newline whose last line is ``w`` wide;
- ``base + 1 + stride * (2 * w + 1)``: a newline whose last line is ``w`` wider than the width it had when
  the token began (the newline lexeme started before the token and the token adds no line break).

Under the contextual lexer (:mod:`grammask.automata.contextual`) the next lexeme's mode is that of the LR
state the newline's indents and dedents reach, which the walk cannot know: it lexes the possible modes side
by side (:mod:`grammask.contextual_walk`) and adds ``k`` (``0 < k < stride``) to the id above where the
token's later bytes lex as they do only in some modes, those of alias ``k - 1``: its *mode column*
(``alias_base + k - 1`` of the parse table) is not an error exactly in the LR states of those modes. With
the basic lexer ``stride`` is 1.

The vocabulary walks (:mod:`grammask.spanner`, :mod:`grammask.contextual_walk`) write these ids;
:class:`IndentRuntime` reads them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from grammask.automata.fallback import CHAIN
from grammask.automata.lexer import BRANCH, LexerAutomaton
from grammask.errors import GrammarError
from grammask.grammar.ir import Indentation
from grammask.parser.stack import LRRunner, Stack
from grammask.parser.tables import ERROR

# (indentation levels, bracket depth, width of the pending lexeme's current line: NO_BREAK before its first
# line break, which only a newline lexeme made of a comment alone can lack, at the end of input)
Context = tuple[tuple[int, ...], int, int]
NO_BREAK = -1
START: Context = ((0,), 0, NO_BREAK)


def _next_width(width: int, step: int) -> int:
    """The current line's width after a byte adding ``step`` (-1: a line break)."""
    if step < 0:
        return 0
    return width if width == NO_BREAK else width + step


def byte_widths(tab_len: int, line_breaks: str = "\n") -> np.ndarray:
    """Per byte, what it adds to the current line's indentation: -1 (one of ``line_breaks``: back to 0), 1,
    ``tab_len`` or 0.

    Lark counts the spaces and tabs of the text after the newline lexeme's last line break.
    """
    widths = np.zeros(256, dtype=np.int32)
    widths[[ord(c) for c in line_breaks]] = -1
    widths[ord(" ")] = 1
    widths[ord("\t")] = tab_len
    return widths


@dataclass(frozen=True)
class IndentSpec:
    """The indentation rules of one compiled grammar, as lexer and parser terminal indices."""

    newline_lexer: int
    newline: int
    indent: int
    dedent: int
    opens: frozenset[int]
    closes: frozenset[int]
    tab_len: int
    base: int
    line_breaks: str = "\n"
    eof_newline: bool = False
    stride: int = 1
    alias_base: int = 0

    @classmethod
    def build(cls, rules: Indentation, lexer: LexerAutomaton, parser_terminals: tuple[str, ...], aliases: int = 0,
              ) -> IndentSpec:
        """The spec of ``rules``, with room for ``aliases`` alias columns after the parser's (a contextual lexer's).

        Raises :class:`~grammask.errors.GrammarError` if a pending newline could not always reach any width.
        """
        index = {n: i for i, n in enumerate(parser_terminals)}
        spec = cls(
            newline_lexer=lexer.terminals.index(rules.newline),
            newline=index[rules.newline],
            indent=index[rules.indent],
            dedent=index[rules.dedent],
            opens=frozenset(index[n] for n in rules.open_brackets if n in index),
            closes=frozenset(index[n] for n in rules.close_brackets if n in index),
            tab_len=rules.tab_len,
            line_breaks=rules.line_breaks,
            base=len(parser_terminals) + 1 + aliases,
            eof_newline=rules.eof_newline,
            stride=aliases + 1,
            alias_base=len(parser_terminals) + 1,
        )
        spec._check_any_width(lexer, rules.newline)
        return spec

    def _check_any_width(self, lexer: LexerAutomaton, name: str) -> None:
        """Masks treat a pending newline as able to end at any width; check the lexer allows that.

        From every state that can still become the newline, a line break must be reachable after which
        the lexeme is a complete newline that may go on with spaces: then any width is.
        """
        trans, produce, accept = lexer.trans, lexer.produce, lexer.accept
        nl = self.newline_lexer
        fresh_line = (trans[:, 10] >= 0) & (accept[np.maximum(trans[:, 10], 0)] == nl)
        after = np.maximum(trans[:, 10], 0)
        fresh_line &= (trans[after, 32] >= 0) & (accept[np.maximum(trans[after, 32], 0)] == nl)
        reach = fresh_line.copy()
        changed = True
        while changed:
            succ = np.where(trans >= 0, reach[np.maximum(trans, 0)], False).any(axis=1)
            grown = reach | (succ & produce[:, nl])
            changed = bool((grown != reach).any())
            reach = grown
        stuck = np.flatnonzero(produce[:, nl] & ~reach)
        stuck = stuck[stuck != 0]
        if len(stuck):
            raise GrammarError(
                f"the indenter's newline terminal {name}: a pending newline must always be able to reach a line "
                f"break followed by spaces (e.g. /(\\r?\\n[\\t ]*)+/); grammask's exact masks rely on that"
            )

    def to_json(self) -> dict:
        """The spec as JSON-able data (see :meth:`from_json`)."""
        data = dataclasses.asdict(self)
        data["opens"], data["closes"] = sorted(self.opens), sorted(self.closes)
        return data

    @classmethod
    def from_json(cls, data: dict) -> IndentSpec:
        """The spec :meth:`to_json` wrote; KeyError or TypeError if a field is missing."""
        return cls(**{**data, "opens": frozenset(data["opens"]), "closes": frozenset(data["closes"])})

    def with_alias_brackets(self, aliases: list[tuple[int, int]], parser_term: np.ndarray) -> IndentSpec:
        """The spec with the contextual lexer's aliases of brackets (lexer terminal, modes; parser terminal
        ``alias_base`` + their index) counted as the brackets they stand for."""
        opens, closes = set(self.opens), set(self.closes)
        for a, (t, _) in enumerate(aliases):
            pt = int(parser_term[t])
            if pt in self.opens:
                opens.add(self.alias_base + a)
            elif pt in self.closes:
                closes.add(self.alias_base + a)
        return dataclasses.replace(self, opens=frozenset(opens), closes=frozenset(closes))

    def lexer_terminal_map(self, parser_term: np.ndarray) -> np.ndarray:
        """``parser_term`` with the newline's lexer terminal mapped to the pending-newline context id."""
        mapped = parser_term.copy()
        mapped[self.newline_lexer] = self.base
        return mapped

    def max_id(self, max_width: int) -> int:
        """The largest context id a token whose whitespace adds at most ``max_width`` can produce."""
        return self.base + self.stride * (2 * max_width + 2)

    def newline_id(self, width: int) -> int:
        """The context id of a newline whose last line is ``width`` wide (any mode)."""
        return self.base + 1 + self.stride * 2 * width


class IndentRuntime:
    """Feeds terminals and context terminals to persistent LR stacks, with indentation context."""

    def __init__(self, spec: IndentSpec, runner: LRRunner, lexer: LexerAutomaton, parser_term: np.ndarray):
        self.spec = spec
        self.runner = runner
        self._lexer = lexer
        self._parser_term = parser_term.tolist()
        self._widths = byte_widths(spec.tab_len, spec.line_breaks).tolist()
        self._real = [t for t in range(spec.alias_base - 1) if t not in (spec.newline, spec.indent, spec.dedent)]
        shifted = runner.tables.action[:, [spec.newline, spec.indent, spec.dedent]]
        self.after_newline = set(shifted[shifted >= 0].tolist()) | {runner.initial[0]}
        self._lr_mode = None if lexer.lr_mode is None else lexer.lr_mode.tolist()

    def read(self, lexstate: int, stack: Stack, levels: tuple[int, ...], depth: int, width: int, data: bytes):
        """Lex ``data`` from (``lexstate``, current line ``width``) and feed what it completes: ``(lexer state, stack,
        levels, depth, width)`` after it, or None if the lexer, the indenter or the parser rejects it. A contextual
        lexer's next mode is read off the stack each lexeme reaches."""
        lexer = self._lexer
        trans, accept, restart = lexer._lists
        widths, bans, parting = self._widths, lexer.bans, lexer.parting
        for b in data:
            nxt = trans[lexstate][b]
            while nxt < 0:  # emit; a fallback's restart may emit in turn (LexerAutomaton.alt)
                term = accept[lexstate]
                if term < 0 or (bans is not None and b in bans[lexstate]):
                    return None
                fed = self._emit(term, stack, levels, depth, width)
                if fed is None:
                    return None
                stack, levels, depth = fed
                again = restart[lexstate]
                if again == BRANCH:
                    again = lexer.branch_options[term].get(self._lr_mode[stack[0]], -1)
                    if again < 0:
                        return None
                lexstate = again
                nxt = trans[again][b]
                width = NO_BREAK
            if parting is not None and parting[nxt] >= 0:  # the mode after the pending match picks how the rest lexes
                fed = self._emit(parting[nxt], stack, levels, depth, width)
                nxt = lexer.member(nxt, -1 if fed is None else self._lr_mode[fed[0][0]])
            width = _next_width(width, widths[b])
            lexstate = nxt
        return lexstate, stack, levels, depth, width

    def _emit(self, term: int, stack: Stack, levels: tuple[int, ...], depth: int, width: int):
        """Feed lexer terminal ``term`` ending with the current line ``width`` wide: ``(stack, levels, depth)``, or
        None if the indenter or the parser rejects it."""
        item = self._parser_term[term]
        if term == self.spec.newline_lexer:
            if width == NO_BREAK and depth == 0:
                return None  # Lark's Indenter fails on a newline without a line break
            item = self.spec.newline_id(max(width, 0))
        return (stack, levels, depth) if item < 0 else self.feed(stack, levels, depth, item)

    def fallen(self, lexstate: int, stack: Stack, levels: tuple[int, ...], depth: int, width: int):
        """Feed what fallback state ``lexstate`` emits where its long lexeme dies right now (see
        ``LexerAutomaton.alt``): ``(stack, levels, depth)``, or None if rejected."""
        lexer = self._lexer
        while True:
            fed = self._emit(int(lexer.accept[lexstate]), stack, levels, depth, width)
            if fed is None:
                return None
            stack, levels, depth = fed
            width = NO_BREAK
            lexstate = int(lexer.restart[lexstate])
            if lexer.alt[lexstate] != CHAIN:
                return stack, levels, depth

    def width_after(self, lexstate: int, width: int, data: bytes, end: int | None = None) -> int | None:
        """The current line's width after lexing ``data`` from (``lexstate``, ``width``) (:data:`NO_BREAK` where no
        line break is pending), None if the lexer rejects the bytes. A contextual lexer's next mode at a branch (and a
        parting state's member) would need the parser: every option is tried, and the width is that of a way that
        ends in lexer state ``end`` (None: any way; the lexer's bans are not checked)."""
        trans, accept, restart = self._lexer._lists
        widths, parting = self._widths, self._lexer.parting
        todo = [(0, lexstate, width)]
        while todo:
            i, lexstate, width = todo.pop()
            if i == len(data):
                if end is None or lexstate == end:
                    return width
                continue
            b = data[i]
            nxt = trans[lexstate][b]
            if nxt >= 0:
                ways = [nxt]
            else:  # emit; a fallback's restart may emit in turn; a branch restarts in each mode it may
                ways, width, emitting = [], NO_BREAK, [lexstate]
                while emitting:
                    s = emitting.pop()
                    term = accept[s]
                    if term < 0:
                        continue
                    for again in self._lexer.next_starts(s) if restart[s] == BRANCH else [restart[s]]:
                        if trans[again][b] >= 0:
                            ways.append(trans[again][b])
                        else:
                            emitting.append(again)
            for nxt in ways:
                members = [nxt] if parting is None or parting[nxt] < 0 else \
                    self._lexer.parts[self._lexer.part_row[nxt], 1:].tolist()
                todo.extend((i + 1, m, _next_width(width, widths[b])) for m in members)
        return None

    def finish(self, lexstate: int, width: int) -> list[int] | None:
        """The items the pending lexeme completes at the end of input, None if it cannot end there."""
        if lexstate == 0:
            return []
        term = self._lexer.ends_before(lexstate, 256)
        if term < 0:
            return None
        if term == self.spec.newline_lexer:
            if self.spec.eof_newline:
                items = [self.spec.newline_id(0)]
            elif width == NO_BREAK:  # Lark's Indenter measures the text after the lexeme's last line break
                return None
            else:
                items = [self.spec.newline_id(width)]
        else:
            pt = self._parser_term[term]
            items = [pt] if pt >= 0 else []
        alt = self._lexer.alt
        if alt is None or alt[lexstate] == -1:
            return items
        again = int(self._lexer.restarts[lexstate])
        rest = self.finish(again, NO_BREAK)  # a fallback: the text after the match lexes on to the end
        return None if rest is None else items + rest

    def feed(self, stack: Stack, levels: tuple[int, ...], depth: int, item: int, carry: int = 0, feed=None):
        """Feed one item: ``(stack, levels, depth)`` after it, or None if the parser or the indenter rejects it.

        ``carry`` is the width the newline's line had before the token (for relative context ids);
        ``feed`` replaces the LR runner's ``feed`` (a memo, see :class:`ClassCheck`). A newline with modes (see the
        module docstring) is rejected unless the state it leaves on top is in one of them.
        """
        spec = self.spec
        feed = feed or self.runner.feed
        if item < spec.base:
            if item in spec.opens:
                depth += 1
            elif item in spec.closes:
                if depth == 0:
                    return None
                depth -= 1
            stack = feed(stack, item)
            return None if stack is None else (stack, levels, depth)
        code, modes = divmod(item - spec.base - 1, spec.stride)
        if depth == 0:
            if code % 2 and carry == NO_BREAK:
                return None  # the newline began before the token and has no line break: Lark's Indenter fails
            fed = self._newline(stack, levels, code // 2 + (carry if code % 2 else 0), feed)
            if fed is None:
                return None
            stack, levels = fed
        if modes and not self.mode_ok(stack[0], np.array([modes]))[0]:
            return None
        return stack, levels, depth

    def mode_ok(self, top: int, modes: np.ndarray) -> np.ndarray:
        """Per entry of ``modes`` (0: any mode, else ``k`` of a context id): whether LR state ``top`` is in them."""
        ok = modes == 0
        some = ~ok
        ok[some] = self.runner.tables.action[top, self.spec.alias_base + modes[some] - 1] != ERROR
        return ok

    def _newline(self, stack: Stack, levels: tuple[int, ...], width: int, feed):
        """``(stack, levels)`` after a newline whose last line is ``width`` wide (outside brackets), or None."""
        spec = self.spec
        stack = feed(stack, spec.newline)
        if stack is None:
            return None
        if width > levels[-1]:
            stack = feed(stack, spec.indent)
            return None if stack is None else (stack, (*levels, width))
        while width < levels[-1]:
            levels = levels[:-1]
            stack = feed(stack, spec.dedent)
            if stack is None:
                return None
        return None if width != levels[-1] else (stack, levels)

    def feed_all(self, stack: Stack, levels: tuple[int, ...], depth: int, items, carry: int = 0):
        """Feed items in order (``carry`` applies to the first line only); None as soon as one is rejected."""
        for item in items:
            fed = self.feed(stack, levels, depth, item, carry)
            if fed is None:
                return None
            stack, levels, depth = fed
        return stack, levels, depth

    def pending_ok(self, stack: Stack, levels: tuple[int, ...], depth: int, feed=None) -> bool:
        """Whether a pending newline lexeme can still end at some width after which the text may go on.

        Its line can reach any width (:meth:`IndentSpec.build` checks the lexer), so the options are a
        deeper line, the end of input, or a line at one of the open levels taking a real terminal.
        """
        if depth > 0:
            return True
        spec = self.spec
        feed = feed or self.runner.feed
        stack = feed(stack, spec.newline)
        if stack is None:
            return False
        if feed(stack, spec.indent) is not None or self.accepts_end(stack, levels, feed):
            return True
        for k in range(len(levels)):
            if any(feed(stack, t) is not None for t in self._real):
                return True
            if k < len(levels) - 1:
                stack = feed(stack, spec.dedent)
                if stack is None:
                    return False
        return False

    def accepts_end(self, stack: Stack, levels: tuple[int, ...], feed=None) -> bool:
        """Whether the input may end here: one dedent per open level, then the end (with ``eof_newline``, a
        newline first unless the last terminal was one, or nothing came yet)."""
        feed = feed or self.runner.feed
        if self.spec.eof_newline and stack[0] not in self.after_newline:
            stack = feed(stack, self.spec.newline)
            if stack is None:
                return False
        for _ in range(len(levels) - 1):
            stack = feed(stack, self.spec.dedent)
            if stack is None:
                return False
        return feed(stack, self.runner.end) is not None

    def follow_ok(self, stack: Stack, levels: tuple[int, ...], depth: int, follow, feed=None) -> bool:
        """Whether a pending lexeme with follow set ``follow`` (terminals, may-be-ignored) can still be taken."""
        terms, anything = follow
        if anything:
            return True
        feed = feed or self.runner.feed
        base = self.spec.base
        return any(self.pending_ok(stack, levels, depth, feed) if x == base else feed(stack, x) is not None
                   for x in terms)


class ClassCheck:
    """Decides token classes against one stack and indentation context, sharing work between them.

    One per mask fill: the LR feeds, the items fed after each sequence prefix and the follow checks
    are remembered, so classes that differ only in a newline's width cost a few lookups each.
    """

    def __init__(self, runtime: IndentRuntime, stack: Stack, context: Context):
        levels, depth, self._carry = context
        self._rt = runtime
        self._states: list[tuple] = [(stack, levels, depth)]
        self._steps: dict[tuple[int, int], int] = {}
        self._follows: dict[tuple, bool] = {}
        self._feeds: dict[tuple[int, int], tuple] = {}

    def _feed(self, stack: Stack, terminal: int) -> Stack | None:
        key = (id(stack), terminal)
        hit = self._feeds.get(key)
        if hit is None:
            hit = self._feeds[key] = (stack, self._rt.runner.feed(stack, terminal))
        return hit[1]

    def _next(self, s: int, item: int) -> int:
        """The state after feeding ``item`` in state ``s`` (an index of ``_states``), -1 if rejected."""
        nxt = self._steps.get((s, item))
        if nxt is None:
            fed = self._rt.feed(*self._states[s], item, self._carry, self._feed)
            nxt = -1
            if fed is not None:
                nxt = len(self._states)
                self._states.append(fed)
            self._steps[(s, item)] = nxt
        return nxt

    def step(self, item: int) -> tuple | None:
        """``(stack, levels, depth)`` after feeding ``item`` first, None if it is rejected."""
        nxt = self._next(0, item)
        return None if nxt < 0 else self._states[nxt]

    def accepts(self, seq: tuple[int, ...], follow: tuple[tuple[int, ...], bool]) -> bool:
        """Whether the class (items ``seq``, then a pending lexeme with ``follow``) is accepted."""
        s = 0
        for item in seq:
            s = self._next(s, item)
            if s < 0:
                return False
        key = (s, follow[0], follow[1])
        ok = self._follows.get(key)
        if ok is None:
            ok = self._follows[key] = self._rt.follow_ok(*self._states[s], follow, self._feed)
        return ok
