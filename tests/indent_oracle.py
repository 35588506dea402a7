"""A brute-force mask oracle for grammars with Lark's ``Indenter`` postlex, sharing nothing with grammask's engine.

It lexes with its own byte loop over the lexer DFA (keeping lexeme texts), runs **Lark's own**
``Indenter`` instance over the tokens, and parses with Lark's interactive LALR parser.

**Viability rule.** ``w`` is viable iff lexing it fails nowhere, Lark's indenter and parser accept
the completed lexemes, and the pending lexeme is empty, may be ignored, may become a terminal the
parser takes next, or may become the newline: then some line width must work, i.e. after the
newline (as ``"\\n" + " " * width`` for every open level and one deeper) the indenter and parser
accept it and then either the end of input or some terminal other than newline/indent/dedent.
Token ``t`` is allowed iff ``w + t`` is viable; EOS iff the pending lexeme completes and the
indenter's end-of-input dedents and ``$END`` are accepted.
"""

from __future__ import annotations

import copy

import numpy as np
from lark import Lark, Token
from lark.exceptions import LarkError, UnexpectedToken

from grammask.grammar.lark_export import lark_terminal_name, to_lark_text


class _Fed:
    """A Lark lexer that lexes nothing: tokens are fed."""

    def __init__(self, conf):
        pass

    def lex(self, data):
        return iter(())


class _Done(Token):
    pass


class IndentOracle:
    def __init__(self, grammar, lexer, vocab, indenter):
        from lark.lexer import Lexer

        fed = type("Fed", (Lexer,), {"__init__": _Fed.__init__, "lex": _Fed.lex})
        self.parser = Lark(to_lark_text(grammar), parser="lalr", lexer=fed, start=grammar.start)
        # terminal names as the exported grammar spells them
        self.trans = lexer.trans.tolist()
        self.accept = lexer.accept.tolist()
        self.names = [lark_terminal_name(n) for n in lexer.terminals]
        self.ignored = [bool(x) for x in lexer.ignored]
        self.produce = [set(np.flatnonzero(row).tolist()) for row in lexer.produce]
        self.vocab = vocab
        self.indenter = indenter
        self.nl = indenter.NL_type
        self.special = {indenter.NL_type, indenter.INDENT_type, indenter.DEDENT_type, "$END"}

    def lex(self, data: bytes, state: int = 0):
        """(completed (terminal, text) pairs, pending state, pending text) or None."""
        out, start = [], 0
        for i, b in enumerate(data):
            nxt = self.trans[state][b]
            if nxt < 0:
                term = self.accept[state]
                nxt = self.trans[0][b]
                if term < 0 or nxt < 0:
                    return None
                out.append((term, data[start:i]))
                start = i
            state = nxt
        return out, state, data[start:]

    def _run(self, ip, ind, lexemes) -> bool:
        """Feed completed lexemes through the indenter into the parser (both copies change); False if rejected."""
        tokens = [Token(self.names[t], text.decode("utf-8", "replace")) for t, text in lexemes if not self.ignored[t]]
        stream = iter([*tokens, _Done("__DONE__", "")])
        try:
            for tok in ind._process(stream):
                if isinstance(tok, _Done):
                    return True
                ip.feed_token(tok)
        except (UnexpectedToken, LarkError, AssertionError, IndexError):
            return False
        return True

    def _ends(self, ip, ind) -> bool:
        ip, ind = ip.copy(), copy.deepcopy(ind)
        try:
            for tok in ind._process(iter(())):
                ip.feed_token(tok)
        except (UnexpectedToken, LarkError, AssertionError, IndexError):
            return False
        return "$END" in ip.accepts()

    def _pending_ok(self, ip, ind, state: int) -> bool:
        if state == 0:
            return True
        produce = self.produce[state]
        if any(self.ignored[x] for x in produce):
            return True
        acc = ip.accepts()
        if any(self.names[x] in acc for x in produce if self.names[x] != self.nl):
            return True
        if not any(self.names[x] == self.nl for x in produce):
            return False
        levels = list(ind.indent_level)
        for width in [*levels, levels[-1] + 1]:
            ip2, ind2 = ip.copy(), copy.deepcopy(ind)
            nl_index = self.names.index(self.nl)
            if not self._run(ip2, ind2, [(nl_index, b"\n" + b" " * width)]):
                continue
            if ind2.paren_level == 0 and self._ends(ip2, ind2):
                return True
            if any(t not in self.special for t in ip2.accepts()):
                return True
        return False

    def mask(self, prefix: bytes) -> np.ndarray:
        """Boolean mask over ``vocab.n_logits`` after the byte prefix (which must be viable)."""
        lexed = self.lex(prefix)
        assert lexed is not None, "prefix does not lex"
        done, state, pending = lexed
        ip = self.parser.parse_interactive("")
        ind = copy.deepcopy(self.indenter)
        ind.paren_level, ind.indent_level = 0, [0]
        assert self._run(ip, ind, done), "prefix does not parse"
        allowed = np.zeros(self.vocab.n_logits, dtype=bool)
        verdicts: dict[tuple, bool] = {}
        for tok, data in enumerate(self.vocab.tokens):
            if not data:
                continue
            res = self.lex(pending + data)
            if res is None:
                continue
            lexemes, end, _ = res
            key = (tuple((t, text if self.names[t] == self.nl else b"") for t, text in lexemes), end)
            ok = verdicts.get(key)
            if ok is None:
                ip2, ind2 = ip.copy(), copy.deepcopy(ind)
                ok = verdicts[key] = self._run(ip2, ind2, lexemes) and self._pending_ok(ip2, ind2, end)
            allowed[tok] = ok
        if self._eos_ok(ip, ind, state, pending):
            allowed[list(self.vocab.eos_ids)] = True
        return allowed

    def _eos_ok(self, ip, ind, state: int, pending: bytes) -> bool:
        ip, ind = ip.copy(), copy.deepcopy(ind)
        if state != 0:
            term = self.accept[state]
            if term < 0 or not self._run(ip, ind, [(term, pending)]):
                return False
        return self._ends(ip, ind)
