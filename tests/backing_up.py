"""Lark's lexing of a prefix, for the brute-force oracles: longest match with backing up, over a plain lexer DFA.

Lark lexes with Python's ``re``: a lexeme is the longest complete match at its position, so a lexeme that runs on
past a match and then dies falls back to that match, and the bytes after it are lexed again. Of a *prefix* this
gives several readings: the pending lexeme may be the one that grows on (reading "a"), or, where it has passed a
match and is not complete now, it may die later and fall back to that match (reading "b": the match is emitted, the
rest lexed again, and the long lexeme becomes a *shadow* that must die before it is complete again).

This module shares nothing with ``grammask.automata.fallback`` (which builds the same rule into the lexer's states)
but the lexer DFA and its trailing-context table (``ends_allowed``): it lexes each prefix from scratch and searches
continuations byte by byte.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from grammask.automata.fallback import ends_allowed

END = 256


def _utf8() -> list[list[int]]:
    """UTF-8 as a DFA: position 0 between characters, 1-3 continuation bytes due, 4-7 the restricted second byte
    after E0, ED, F0, F4; -1 where a byte cannot come."""
    table = [[-1] * 256 for _ in range(8)]
    for b in range(256):
        if b < 0x80:
            table[0][b] = 0
        elif 0xC2 <= b <= 0xDF:
            table[0][b] = 1
        elif 0xE1 <= b <= 0xEF and b != 0xED:
            table[0][b] = 2
        elif 0xF1 <= b <= 0xF3:
            table[0][b] = 3
    table[0][0xE0], table[0][0xED], table[0][0xF0], table[0][0xF4] = 4, 5, 6, 7
    for u, lo, hi, then in ((1, 0x80, 0xBF, 0), (2, 0x80, 0xBF, 1), (3, 0x80, 0xBF, 2), (4, 0xA0, 0xBF, 1),
                            (5, 0x80, 0x9F, 1), (6, 0x90, 0xBF, 2), (7, 0x80, 0x8F, 2)):
        for b in range(lo, hi + 1):
            table[u][b] = then
    return table


UTF8 = _utf8()


@dataclass(frozen=True)
class Reading:
    """One way a prefix may lex: completed lexemes as (terminal, start, end), the pending lexeme's start and DFA
    state, and the shadows (DFA states of long lexemes that must die before they are complete again)."""

    lexemes: tuple[tuple[int, int, int], ...]
    start: int
    state: int
    shadows: tuple[int, ...]


class BackingUpLexer:
    """Prefixes lexed as Lark lexes (``backtrack``), or under the plain rule (one reading, no backing up)."""

    def __init__(self, lexer, backtrack: bool = True):
        self.backtrack = backtrack
        self.trans = lexer.trans.tolist()
        self.accept = lexer.accept.tolist()
        self.allowed = ends_allowed(lexer.trans, lexer.accept, lexer.trailing).tolist()
        self.produce = [frozenset(i for i, x in enumerate(row) if x) for row in lexer.produce.tolist()]
        self._dies: dict[tuple[int, int], bool] = {}

    def _match(self, state: int, nxt: int) -> int:
        """The terminal a lexeme in ``state`` is a match of before byte ``nxt`` (256: the end), else -1."""
        term = self.accept[state]
        return term if term >= 0 and self.allowed[state][nxt] else -1

    def readings(self, data: bytes, at: int = 0, lexemes: tuple = (), shadows: tuple = ()) -> list[Reading]:
        """Every reading of ``data[at:]`` lexed from a lexeme boundary ([] if none lexes)."""
        i, state, last, k = at, 0, None, at
        while k < len(data):
            nxt = self.trans[state][data[k]]
            if nxt < 0:
                term = self._match(state, data[k]) if self.backtrack else self.accept[state]
                match = (term, k) if term >= 0 else last
                if match is None:
                    return []
                lexemes += ((match[0], i, match[1]),)
                i = k = match[1]
                state, last = 0, None
                continue
            term = self._match(state, data[k])
            if k > i and term >= 0 and self.backtrack:
                last = (term, k)
            state = nxt
            k += 1
        out = [Reading(lexemes, i, state, shadows)]
        if state != 0 and self.accept[state] < 0 and last is not None:
            out += self.readings(data, last[1], lexemes + ((last[0], i, last[1]),), shadows + (state,))
        return out

    def token_mask(self, vocab, pending: bytes, key: Callable[[bytes, Reading], Hashable],
                verdict: Callable[[bytes, Reading], bool]) -> np.ndarray:
        """Per token id, whether some reading of ``pending`` + the token passes ``verdict`` (asked once per ``key``)."""
        allowed = np.zeros(vocab.n_logits, dtype=bool)
        known: dict[Hashable, bool] = {}
        for tok, data in enumerate(vocab.tokens):
            if not data:
                continue
            text = pending + data
            for reading in self.readings(text):
                k = key(text, reading)
                ok = known.get(k)
                if ok is None:
                    ok = known[k] = verdict(text, reading)
                if ok:
                    allowed[tok] = True
                    break
        return allowed

    def finish(self, data: bytes, reading: Reading) -> list[tuple[int, int, int]] | None:
        """The lexemes of ``reading`` if the input ends after ``data`` (shadows die there), None if it cannot."""
        if reading.state == 0:
            return list(reading.lexemes)
        term = self._match(reading.state, END)
        return None if term < 0 else [*reading.lexemes, (term, reading.start, len(data))]

    def first_terms(self, data: bytes, reading: Reading) -> frozenset[int]:
        """The terminals the pending lexeme can be emitted as, over the continuations that make every shadow die
        before it is complete again (the empty set from an empty lexeme)."""
        if reading.state == 0:
            return frozenset()
        if not reading.shadows:
            return self.produce[reading.state]
        trans, accept = self.trans, self.accept
        return frozenset(shadowed_first_terms(
            data, reading.state, reading.shadows, trans, self._match, self.produce,
            lambda s, b: trans[s][b] if trans[s][b] >= 0 else None, lambda s: accept[s] >= 0, self._can_die))

    def _can_die(self, state: int, u: int) -> bool:
        """Whether some valid continuation kills the lexeme in ``state`` before it is complete again."""
        key = (state, u)
        found = self._dies.get(key)
        if found is None:
            found = self._dies[key] = can_die(self.trans, self.accept, state, u)
        return found


def shadowed_first_terms(data: bytes, state: int, shadows, trans, match, produce, shadow_step, shadow_complete,
                         shadow_dies) -> set[int]:
    """The terminals the lexeme pending in ``state`` (after ``data``) can be emitted as, over the continuations that make
    every shadow die before it is complete again: a search over the pending lexeme's DFA (``trans``, ``match(q, next
    byte or END)``, ``produce``) and the shadows (``shadow_step(s, b)``, None once dead; ``shadow_complete(s)``;
    ``shadow_dies(s, u)``: some continuation from UTF-8 position ``u`` kills it)."""
    u = 0
    for b in data:
        u = UTF8[u][b]
    out: set[int] = set()
    start = (state, frozenset(shadows), u, -1)
    seen, todo = {start}, [start]
    while todo:
        q, alive, u, cand = todo.pop()
        term = match(q, END)
        if term >= 0 or cand >= 0:
            out.add(term if term >= 0 else cand)  # the input ends: the shadows die, the lexeme is complete
        for b in range(256):
            after = UTF8[u][b]
            if after < 0:
                continue
            moved = {shadow_step(s, b) for s in alive}
            if any(s is not None and shadow_complete(s) for s in moved):
                continue  # a shadow is complete again: this reading is not Lark's
            moved.discard(None)
            nxt = trans[q][b]
            here = match(q, b)
            if nxt < 0:
                match_here = here if here >= 0 else cand
                if match_here >= 0 and all(shadow_dies(s, after) for s in moved):
                    out.add(match_here)
                continue
            cand2 = here if here >= 0 else cand
            if not moved:
                out.update(produce[nxt])
                if cand2 >= 0:
                    out.add(cand2)
                continue
            key = (nxt, frozenset(moved), after, cand2)
            if key not in seen:
                seen.add(key)
                todo.append(key)
    return out


def can_die(trans: list[list[int]], accept: list[int], state: int, u: int) -> bool:
    """Whether some valid continuation (``u``: the UTF-8 position) kills the lexeme in ``state`` of the DFA
    ``trans``/``accept`` before it is complete again."""
    seen, todo = {(state, u)}, [(state, u)]
    while todo:
        q, v = todo.pop()
        for b in range(256):
            w = UTF8[v][b]
            if w < 0:
                continue
            nxt = trans[q][b]
            if nxt < 0:
                return True
            if accept[nxt] < 0 and (nxt, w) not in seen:
                seen.add((nxt, w))
                todo.append((nxt, w))
    return False
