"""Random sentences of a grammar (bounded-depth derivations) and random mutations of them, for tests and benchmarks.

A sentence is sampled in two steps: a random derivation gives a terminal sequence (past
``max_depth`` every nonterminal takes its shallowest rule, so derivations always end); then
each terminal gets a random lexeme drawn from the lexer automaton, restricted to lexemes the
lexing rule emits as that terminal. Where two lexemes would merge or split under maximal
munch, an ignored lexeme (whitespace, a comment) is put between them, so the text lexes back
into exactly the sampled terminals (a lexeme that no gap can separate from the next is drawn
again). Ignored lexemes are also sprinkled in at random. Terminals the lexer never emits (another
always wins) are left out of derivations.

For a grammar with indentation (a postlex), the indent and dedent terminals of a derivation
become real indentation: the newline before them ends in the spaces of the new level.
"""

from __future__ import annotations

import random

import numpy as np

from grammask.automata.lexer import LexerAutomaton, build_lexer
from grammask.errors import EmptyLanguageError, GrammarError
from grammask.grammar.ir import Grammar

_INF = float("inf")
_INDENT_STEPS = (2, 4, 4)
"""Spaces an indent adds (drawn at random)."""
_RETRIES = 50
"""Times a sample may draw a terminal's lexeme again because the next one found no place after it."""


class SentenceSampler:
    """Draws random sentences of ``grammar`` as text.

    The constructor raises :class:`~grammask.errors.EmptyLanguageError` when the start rule derives no
    finite sentence (and what :func:`~grammask.automata.lexer.build_lexer` raises when no ``lexer`` is given).
    """

    def __init__(self, grammar: Grammar, *, max_depth: int = 12, lexer: LexerAutomaton | None = None):
        self.grammar = grammar
        self.max_depth = max_depth
        self.lexer = lexer or build_lexer(grammar)
        self._index = {name: i for i, name in enumerate(self.lexer.terminals)}
        self._rules: dict[str, list[tuple[str, ...]]] = {}
        for r in grammar.rules:
            self._rules.setdefault(r.lhs, []).append(r.rhs)
        trans = self.lexer.trans
        self._succ = [np.nonzero(row >= 0)[0] for row in trans]
        self._dist = self._distances()
        self._emitted = {name for name, t in self._index.items() if self._dist[t][0] < np.inf}
        self._ignored = [i for i, ign in enumerate(self.lexer.ignored) if ign and self.lexer.terminals[i] in self._emitted]
        ind = grammar.indentation
        self._marks = {ind.indent, ind.dedent} if ind is not None else set()
        self._height = self._min_heights()
        if self._height.get(grammar.start, _INF) == _INF:
            raise EmptyLanguageError(f"rule '{grammar.start}' derives no finite sentence")

    def _min_heights(self) -> dict[str, float]:
        """The least derivation height of each symbol; terminals the lexer never emits have none."""
        height = {t: 0.0 for t in self._emitted | self._marks}
        changed = True
        while changed:
            changed = False
            for lhs, alts in self._rules.items():
                best = min((1 + max((height.get(s, _INF) for s in rhs), default=0) for rhs in alts), default=_INF)
                if best < height.get(lhs, _INF):
                    height[lhs] = best
                    changed = True
        return height

    def _distances(self) -> list[np.ndarray]:
        """For each terminal, the fewest bytes from each lexer state to a lexeme emitted as it (inf: none)."""
        n = self.lexer.n_states
        trans = self.lexer.trans
        if self.lexer.counter is not None:  # a counted lexeme may move up a level on a byte that adds a unit
            trans = np.hstack([trans, self.lexer.counter.crossings(trans)])
        preds: list[list[int]] = [[] for _ in range(n)]
        for q in range(n):
            row = trans[q]
            for r in set(row[row >= 0].tolist()):
                preds[r].append(q)
        out = []
        for t in range(len(self.lexer.terminals)):
            dist = np.full(n, np.inf)
            frontier = np.nonzero(self.lexer.accept == t)[0].tolist()
            dist[frontier] = 0
            while frontier:
                nxt = []
                for r in frontier:
                    for q in preds[r]:
                        if dist[q] == np.inf:
                            dist[q] = dist[r] + 1
                            nxt.append(q)
                frontier = nxt
            out.append(dist)
        return out

    def terminals(self, rng: random.Random) -> list[str]:
        """A random terminal sequence derived from the start symbol (iteratively: any depth is fine).

        Below half of ``max_depth`` deeper rules are preferred, so documents are not mostly scalars;
        past ``max_depth`` every nonterminal takes its shallowest rule.
        """
        out: list[str] = []
        work: list[tuple[str, int]] = [(self.grammar.start, 0)]
        while work:
            sym, depth = work.pop()
            if sym in self._index or sym in self._marks:
                out.append(sym)
                continue
            alts = [a for a in self._rules[sym] if all(self._height.get(s, _INF) < _INF for s in a)]
            heights = [1 + max((self._height[s] for s in a), default=0) for a in alts]
            if depth >= self.max_depth:
                best = min(heights)
                rhs = rng.choice([a for a, h in zip(alts, heights) if h == best])
            elif depth < self.max_depth // 2:
                rhs = rng.choices(alts, weights=[1 + h for h in heights])[0]
            else:
                rhs = rng.choice(alts)
            work.extend((s, depth + 1) for s in reversed(rhs))
        return out

    def lexeme(self, terminal: str, rng: random.Random, mean_length: float = 6.0) -> bytes:
        """A random lexeme that the lexing rule emits as ``terminal`` (mostly printable ASCII, if allowed).

        Raises :class:`~grammask.errors.GrammarError` for a terminal the lexer can never emit.
        """
        t = self._index[terminal]
        dist = self._dist[t]
        if dist[0] == np.inf:
            raise GrammarError(f"terminal {terminal} can never be emitted by the lexer (another terminal always wins)")
        accept = self.lexer.accept
        state, count, out = 0, self.lexer.start_count, bytearray()
        while True:
            if accept[state] == t and (rng.random() < 1.0 / mean_length or not len(self._succ[state])):
                return bytes(out)
            after = {b: self._next(state, count, b) for b in self._succ[state].tolist()}
            options = [b for b, (q, _) in after.items() if dist[q] < np.inf]
            if not options:
                return bytes(out)
            if len(out) >= mean_length:  # head for the end of the lexeme
                best = min(dist[after[b][0]] for b in options)
                options = [b for b in options if dist[after[b][0]] == best]
            printable = [b for b in options if 0x20 <= b < 0x7F]
            b = rng.choice(printable if printable and rng.random() < 0.9 else options)
            out.append(b)
            state, count = after[b]

    def _next(self, state: int, count: int, b: int) -> tuple[int, int]:
        """The lexer state and the lexeme's count after byte ``b`` extends the lexeme (counted terminals move up
        their levels)."""
        nxt = int(self.lexer.trans[state, b])
        counter = self.lexer.counter
        if counter is None:
            return nxt, count
        count += int(counter.inc[state, b])
        while count >= counter.up_at[nxt]:
            nxt = int(counter.lift[nxt])
        return nxt, count

    def sample(self, rng: random.Random, *, ignored_rate: float = 0.15) -> str:
        """A random sentence as text, which lexes back into the sampled terminal sequence.

        For a grammar with indentation, each newline outside brackets ends in the indentation that
        the indent and dedent terminals after it call for (an indent adds 2 or 4 spaces, a dedent goes
        back a level), and newlines inside brackets are sprinkled in like ignored text (the postlex
        drops them).

        Raises :class:`~grammask.errors.GrammarError` when no lexemes are found for the sampled
        terminals that lex apart from their neighbours, or (indentation) no derivation in 50 draws
        puts its indents and dedents only where indentation makes them.
        """
        for _ in range(_RETRIES):
            names = self.terminals(rng)
            layout = self._layout(names, rng)
            if layout is not None:
                break
        else:
            ind = self.grammar.indentation
            raise GrammarError(f"no derivation found whose {ind.indent} and {ind.dedent} all come right after a {ind.newline}")
        widths, nested = layout
        placed: list[tuple[bytes, int, int | None]] = []  # per terminal: text, lexer state after, pending terminal
        retries = _RETRIES
        while len(placed) < len(names) or not self._finishes(placed):
            i = len(placed)
            state, pending = placed[-1][1:] if placed else (0, None)
            piece = None
            if i < len(names):
                piece = self._piece(names[i], state, pending, widths[i], nested[i], rng, ignored_rate)
            if piece is not None:
                placed.append(piece)
                continue
            if not placed or retries == 0:
                before = "the start" if pending is None else self.lexer.terminals[pending]
                what = "the end of input" if i == len(names) else f"terminal {names[i]}"
                raise GrammarError(f"could not find lexemes for {what} that lex apart from the one before it ({before})")
            retries -= 1
            placed.pop()  # draw the terminal before again
        return b"".join(p[0] for p in placed).decode("utf-8")

    def _finishes(self, placed: list[tuple[bytes, int, int | None]]) -> bool:
        """Whether the end of input closes the last lexeme of ``placed`` as its terminal."""
        state, pending = placed[-1][1:] if placed else (0, None)
        return self.lexer.finish(state) == ([] if pending is None else [pending])

    def _layout(self, names: list[str], rng: random.Random) -> tuple[list[int | None], list[bool]] | None:
        """For each of ``names``: the indentation its newline lexeme must end in (None where it is no
        newline outside brackets, or the grammar has no indentation) and whether it is inside brackets.

        None when no indentation makes the sequence: an indent or dedent not right after a newline
        (dedents at the end of input excepted), two indents, or dedents below the first column.
        """
        widths: list[int | None] = [None] * len(names)
        nested = [False] * len(names)
        ind = self.grammar.indentation
        if ind is None:
            return widths, nested
        levels, depth, i = [0], 0, 0
        while i < len(names):
            name = names[i]
            nested[i] = depth > 0
            if name in ind.open_brackets:
                depth += 1
            elif name in ind.close_brackets:
                depth = max(depth - 1, 0)
            elif name == ind.newline and depth == 0:
                j = i + 1
                while j < len(names) and names[j] in self._marks:
                    j += 1
                marks = names[i + 1 : j]
                if ind.indent in marks and len(marks) > 1 or marks.count(ind.dedent) >= len(levels):
                    return None
                if ind.indent in marks:
                    levels.append(levels[-1] + rng.choice(_INDENT_STEPS))
                else:
                    levels = levels[: len(levels) - len(marks)]
                widths[i] = levels[-1]
                i = j
                continue
            elif name in self._marks and (name == ind.indent or any(n != ind.dedent for n in names[i:])):
                return None
            i += 1
        return widths, nested

    def _piece(
        self, name: str, state: int, pending: int | None, width: int | None, nested: bool, rng: random.Random, ignored_rate: float
    ) -> tuple[bytes, int, int | None] | None:
        """(text, lexer state after, pending terminal) of terminal ``name`` placed after ``state`` and
        ``pending``: its lexeme, maybe after ignored text; None when none is found that lexes apart."""
        if name in self._marks:  # indent and dedent have no text of their own
            return b"", state, pending
        t = self._index[name]
        gaps = [(b"", state, pending)]
        if rng.random() < ignored_rate and (sprinkled := self._ignored_lexeme(state, pending, nested, rng)):
            gaps.insert(0, sprinkled)
        for _ in range(20):
            lex = self.lexeme(name, rng) if width is None else self._newline_lexeme(width, rng)
            if lex is None:
                continue
            for gap in (*gaps, self._ignored_lexeme(state, pending, nested, rng)):
                if gap is not None and (after := _place(self.lexer, gap[1], gap[2], lex, t)) is not None:
                    return gap[0] + lex, after, t
        return None

    def _newline_lexeme(self, width: int, rng: random.Random) -> bytes | None:
        """A random lexeme of the indentation's newline terminal whose last line is ``width`` spaces, or None."""
        name = self.grammar.indentation.newline
        t = self._index[name]
        for _ in range(20):
            lex = self.lexeme(name, rng)
            cut = lex.rfind(b"\n")
            if cut < 0:
                continue
            lex = lex[: cut + 1] + b" " * width
            stepped = self.lexer.step(0, lex)
            if stepped is not None and not stepped[0] and self.lexer.accept[stepped[1]] == t:
                return lex
        return None

    def _ignored_lexeme(self, state: int, pending: int | None, nested: bool, rng: random.Random):
        """(bytes, state, terminal) of a random ignored lexeme that can follow the pending one, or None
        (always None for a grammar that ignores nothing). Inside brackets (``nested``) a newline of the
        grammar's indentation counts as ignored."""
        kinds = self._ignored
        if nested and self.grammar.indentation is not None:
            kinds = [*kinds, self._index[self.grammar.indentation.newline]]
        for _ in range(20 if kinds else 0):
            t = rng.choice(kinds)
            lex = self.lexeme(self.lexer.terminals[t], rng, mean_length=2.0)
            placed = _place(self.lexer, state, pending, lex, t)
            if placed is not None:
                return lex, placed, t
        return None


def _place(lexer: LexerAutomaton, state: int, pending, lexeme: bytes, terminal: int) -> int | None:
    """The lexer state after appending ``lexeme``, if its first byte closes ``pending`` (which keeps its
    lexeme as drawn) and it lexes as one ``terminal``."""
    first = lexer.step(state, lexeme[:1])
    if first is None or pending is not None and first[0] != [pending]:
        return None
    stepped = lexer.step(state, lexeme)
    if stepped is None:
        return None
    emitted, new_state = stepped
    if emitted != ([] if pending is None else [pending]) or lexer.accept[new_state] != terminal:
        return None
    return new_state


def mutate(text: str, rng: random.Random, alphabet: str, edits: int = 1) -> str:
    """``text`` with ``edits`` random character insertions, deletions or adjacent swaps."""
    chars = list(text)
    for _ in range(edits):
        op = rng.randrange(3)
        if op == 0 or len(chars) < 2:
            chars.insert(rng.randrange(len(chars) + 1), rng.choice(alphabet))
        elif op == 1:
            del chars[rng.randrange(len(chars))]
        else:
            i = rng.randrange(len(chars) - 1)
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
    return "".join(chars)
