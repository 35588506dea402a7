"""A brute-force mask oracle that shares nothing with grammask's spanner tables or LR simulation.

It lexes with its own byte loop over the lexer DFA and parses with Lark's interactive LALR
parser, built from the grammar's Lark text.

**Viability rule.** A byte string ``w`` is viable iff

1. lexing ``w`` under the lexing rule (1-lookahead maximal munch over the lexer DFA) does not
   fail; it emits terminals ``T1..Tk`` and leaves a pending lexeme in lexer state ``q``;
2. Lark's LALR parser accepts the non-ignored terminals among ``T1..Tk`` one by one; and
3. the pending lexeme is empty, or some terminal ``X`` in Prod(q) (a terminal some continuation
   of the pending lexeme is emitted as) is ignored or is accepted by the parser next.

With ``backtrack=True`` (grammars from Lark, ``Grammar.backtrack``) step 1 lexes as Lark does, backing up to the
last complete match where a lexeme dies (``backing_up.py``): a prefix may then lex several ways, and it is viable
iff one of them is, its pending lexeme's terminals being those it can become while the longer lexemes it backed
up from die first.

Token ``t`` is allowed after prefix ``w`` iff ``w + t`` is viable. EOS is allowed iff the pending
lexeme is empty or complete, and the parser accepts its terminal (if not ignored) then ``$END``.
This is the semantics DESIGN.md asks of masks, under the assumption (true for grammars whose
ignored terminals can separate any two terminals, like JSON and the C subset) that a terminal
the parser accepts can always be followed by the rest of a sentence at the byte level.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from backing_up import BackingUpLexer
from lark import Lark, Token
from lark.exceptions import UnexpectedToken


class MaskOracle:
    def __init__(self, lark_text: str, lexer, vocab, backtrack: bool = False):
        self.parser = Lark(lark_text, parser="lalr", lexer="basic")
        self.backing_up = BackingUpLexer(lexer) if backtrack else None
        self.trans = lexer.trans.tolist()
        self.accept = lexer.accept.tolist()
        self.names = lexer.terminals
        self.ignored = [bool(x) for x in lexer.ignored]
        self.vocab = vocab
        self.produce = self._producible()
        self._token_lex: dict[int, list] = {}

    def _producible(self) -> list[set[int]]:
        n = len(self.trans)
        preds: list[set[int]] = [set() for _ in range(n)]
        for q, row in enumerate(self.trans):
            for r in row:
                if r >= 0:
                    preds[r].add(q)
        produce: list[set[int]] = [set() for _ in range(n)]
        for q in range(n):
            term = self.accept[q]
            if term < 0:
                continue
            seen, todo = {q}, deque([q])
            while todo:
                s = todo.popleft()
                produce[s].add(term)
                for p in preds[s] - seen:
                    seen.add(p)
                    todo.append(p)
        return produce

    def lex(self, state: int, data: bytes):
        """(emitted terminal indices, end state), or None on a lexing error."""
        out = []
        for b in data:
            nxt = self.trans[state][b]
            if nxt < 0:
                term = self.accept[state]
                nxt = self.trans[0][b]
                if term < 0 or nxt < 0:
                    return None
                out.append(term)
            state = nxt
        return out, state

    def _feed(self, ip, terms) -> bool:
        for t in terms:
            if self.ignored[t]:
                continue
            try:
                ip.feed_token(Token(self.names[t], ""))
            except UnexpectedToken:
                return False
        return True

    def _lexed_tokens(self, state: int) -> list:
        cached = self._token_lex.get(state)
        if cached is None:
            cached = [self.lex(state, b) if b else None for b in self.vocab.tokens]
            self._token_lex[state] = cached
        return cached

    def mask(self, prefix: bytes) -> np.ndarray:
        """Boolean mask over ``vocab.n_logits`` for the byte prefix (which must be viable)."""
        if self.backing_up is not None:
            return self._mask_backing_up(prefix)
        lexed = self.lex(0, prefix)
        assert lexed is not None, "prefix does not lex"
        emitted, state = lexed
        ip = self.parser.parse_interactive("")
        assert self._feed(ip, emitted), "prefix does not parse"
        allowed = np.zeros(self.vocab.n_logits, dtype=bool)
        after_cache: dict[tuple, set | None] = {}
        for tok, res in enumerate(self._lexed_tokens(state)):
            if res is None:
                continue
            terms, end = res
            key = tuple(terms)
            acc = after_cache.get(key, False)
            if acc is False:
                branch = ip.copy(deepcopy_values=False)
                acc = branch.accepts() if self._feed(branch, terms) else None
                after_cache[key] = acc
            if acc is None:
                continue
            if any(self.ignored[x] or self.names[x] in acc for x in self.produce[end]):
                allowed[tok] = True
        if self._accepts_end(ip, state):
            allowed[list(self.vocab.eos_ids)] = True
        return allowed

    def _mask_backing_up(self, prefix: bytes) -> np.ndarray:
        lexing = self.backing_up
        readings = lexing.readings(prefix)
        assert readings, "prefix does not lex"
        base = readings[0]  # its lexemes are every reading's first ones
        ip = self.parser.parse_interactive("")
        assert self._feed(ip, [t for t, _, _ in base.lexemes]), "prefix does not parse"
        pending = prefix[base.start:]

        def key(text: bytes, reading) -> tuple:
            terms = tuple(t for t, _, _ in reading.lexemes)
            return terms, reading.state, reading.shadows, text[-4:] if reading.shadows else b""

        def verdict(text: bytes, reading) -> bool:
            branch = ip.copy()
            if not self._feed(branch, [t for t, _, _ in reading.lexemes]):
                return False
            if reading.state == 0:
                return True
            acc = branch.accepts()
            return any(self.ignored[x] or self.names[x] in acc for x in lexing.first_terms(text, reading))

        allowed = lexing.token_mask(self.vocab, pending, key, verdict)
        for reading in lexing.readings(pending):
            done = lexing.finish(pending, reading)
            if done is not None:
                branch = ip.copy()
                if self._feed(branch, [t for t, _, _ in done]) and "$END" in branch.accepts():
                    allowed[list(self.vocab.eos_ids)] = True
        return allowed

    def _accepts_end(self, ip, state: int) -> bool:
        if state != 0:
            term = self.accept[state]
            if term < 0:
                return False
            ip = ip.copy(deepcopy_values=False)
            if not self._feed(ip, [term]):
                return False
        return "$END" in ip.accepts()
