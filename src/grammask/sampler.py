"""Random sentences of a grammar (bounded-depth derivations) and random mutations of them, for tests and benchmarks.

A sentence is sampled in two steps: a random derivation gives a terminal sequence (past
``max_depth`` every nonterminal takes its shallowest rule, so derivations always end); then
each terminal gets a random lexeme drawn from the lexer automaton, restricted to lexemes the
lexing rule emits as that terminal. Where two lexemes would merge or split under maximal
munch, an ignored lexeme (whitespace, a comment) is put between them, so the text lexes back
into exactly the sampled terminals. Ignored lexemes are also sprinkled in at random.
"""

from __future__ import annotations

import random

import numpy as np

from grammask.automata.lexer import LexerAutomaton, build_lexer
from grammask.errors import EmptyLanguageError, GrammarError
from grammask.grammar.ir import Grammar

_INF = float("inf")


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
        self._ignored = [i for i, ign in enumerate(self.lexer.ignored) if ign]
        self._rules: dict[str, list[tuple[str, ...]]] = {}
        for r in grammar.rules:
            self._rules.setdefault(r.lhs, []).append(r.rhs)
        self._height = self._min_heights()
        if self._height.get(grammar.start, _INF) == _INF:
            raise EmptyLanguageError(f"rule '{grammar.start}' derives no finite sentence")
        trans = self.lexer.trans
        self._succ = [np.nonzero(row >= 0)[0] for row in trans]
        self._dist = self._distances()

    def _min_heights(self) -> dict[str, float]:
        height = {t: 0.0 for t in self._index}
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
        preds: list[list[int]] = [[] for _ in range(n)]
        for q in range(n):
            for r in set(self.lexer.trans[q, self._succ[q]].tolist()):
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
            if sym in self._index:
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
        trans, accept = self.lexer.trans, self.lexer.accept
        state, out = 0, bytearray()
        while True:
            if accept[state] == t and (rng.random() < 1.0 / mean_length or not len(self._succ[state])):
                return bytes(out)
            options = [b for b in self._succ[state].tolist() if dist[trans[state, b]] < np.inf]
            if not options:
                return bytes(out)
            if len(out) >= mean_length:  # head for the end of the lexeme
                best = min(dist[trans[state, b]] for b in options)
                options = [b for b in options if dist[trans[state, b]] == best]
            printable = [b for b in options if 0x20 <= b < 0x7F]
            b = rng.choice(printable if printable and rng.random() < 0.9 else options)
            out.append(b)
            state = int(trans[state, b])

    def sample(self, rng: random.Random, *, ignored_rate: float = 0.15) -> str:
        """A random sentence as text, which lexes back into the sampled terminal sequence.

        Raises :class:`~grammask.errors.GrammarError` when a terminal can never be emitted, or no lexeme of
        one is found that lexes apart from its neighbour.
        """
        text = bytearray()
        state, pending = 0, None
        for name in self.terminals(rng):
            t = self._index[name]
            if self._ignored and rng.random() < ignored_rate:
                placed = self._ignored_lexeme(state, pending, rng)
                if placed is not None:
                    text += placed[0]
                    state, pending = placed[1], placed[2]
            for _ in range(50):
                lex = self.lexeme(name, rng)
                after = _place(self.lexer, state, pending, lex, t)
                if after is not None:
                    text += lex
                    break
                gap = self._ignored_lexeme(state, pending, rng)
                if gap is not None and (after := _place(self.lexer, gap[1], gap[2], lex, t)) is not None:
                    text += gap[0] + lex
                    break
            else:
                raise GrammarError(f"could not find a lexeme for terminal {name} that lexes apart from its neighbour")
            state, pending = after, t
        return text.decode("utf-8")

    def _ignored_lexeme(self, state: int, pending, rng: random.Random):
        """(bytes, state, terminal) of a random ignored lexeme that can follow the pending one, or None
        (always None for a grammar that ignores nothing)."""
        for _ in range(20 if self._ignored else 0):
            t = rng.choice(self._ignored)
            lex = self.lexeme(self.lexer.terminals[t], rng, mean_length=2.0)
            placed = _place(self.lexer, state, pending, lex, t)
            if placed is not None:
                return lex, placed, t
        return None


def _place(lexer: LexerAutomaton, state: int, pending, lexeme: bytes, terminal: int) -> int | None:
    """The lexer state after appending ``lexeme``, if it closes ``pending`` and lexes as one ``terminal``."""
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
