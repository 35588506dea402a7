"""A brute-force mask oracle for grammars with a postlex, sharing nothing with grammask's engine.

It lexes with its own byte loop over the grammar's lexer DFA *without* the postlex (keeping lexeme
texts), runs the **reference postlex object itself** over the tokens (Lark's own ``Indenter``, or a
semicolon-insertion postlex such as the built-in Go grammar's ``GoSemicolons``), and parses with
Lark's interactive LALR parser.

For a grammar that backs up as Lark's lexer does (``Grammar.backtrack``) lexing is Lark's (``backing_up.py``): a
prefix may lex several ways and is viable iff one of them is, the pending lexeme's terminals being those it can
become while the longer lexemes it backed up from die first.

**Viability rule.** ``w`` is viable iff lexing it fails nowhere, the postlex and the parser accept
the completed lexemes, and the pending lexeme is empty, may be ignored, or may become a terminal
that, passed through the postlex, the parser takes. For an indenter's newline some line width must
work: after the newline (as ``"\\n" + " " * width`` for every open level and one deeper) the
indenter and parser accept it and then either the end of input or some terminal other than
newline/indent/dedent. Token ``t`` is allowed iff ``w + t`` is viable; EOS iff the pending lexeme
completes and the postlex's end of input and ``$END`` are accepted.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
from backing_up import BackingUpLexer
from lark import Lark, Token
from lark.exceptions import LarkError, UnexpectedToken
from lark.indenter import Indenter

from grammask.automata.lexer import build_lexer
from grammask.bitmask import allocate_bitmask, bitmask_to_bool
from grammask.grammar.lark_export import lark_terminal_name, to_lark_text


def allowed_mask(matcher) -> np.ndarray:
    """The matcher's mask as booleans over ``vocab.n_logits`` (what the tests compare with the oracle)."""
    n = matcher.compiled.vocab.n_logits
    row = allocate_bitmask(1, n)[0]
    matcher.fill_mask(row)
    return bitmask_to_bool(row, n)


class _Fed:
    """A Lark lexer that lexes nothing: tokens are fed."""

    def __init__(self, conf):
        pass

    def lex(self, data):
        return iter(())


class _Done(Token):
    pass


class _IndentState:
    """Lark's ``Indenter`` as the reference postlex: its own ``_process`` on a copy of its state."""

    def __init__(self, indenter):
        self.ind = copy.deepcopy(indenter)
        self.ind.paren_level, self.ind.indent_level = 0, [0]
        self.newlines = {indenter.NL_type}
        self.special = {indenter.NL_type, indenter.INDENT_type, indenter.DEDENT_type, "$END"}

    def copy(self):
        other = copy.copy(self)
        other.ind = copy.deepcopy(self.ind)
        return other

    def key(self):
        """What the indenter's future depends on: its levels and bracket depth."""
        return tuple(self.ind.indent_level), self.ind.paren_level

    def run(self, tokens):
        for tok in self.ind._process(iter([*tokens, _Done("__DONE__", "")])):
            if isinstance(tok, _Done):
                return
            yield tok

    def end(self):
        return self.ind._process(iter(()))


class _SemicolonState:
    """A semicolon-insertion postlex (``process`` over a stream) as the reference: its state is the last
    token it passed on (an inserted semicolon included), so a run replays that token first and drops it
    from the output."""

    def __init__(self, postlex):
        self.postlex = postlex
        self.last = None
        self.newlines = set(postlex.nl_types)

    def copy(self):
        return copy.copy(self)

    def key(self):
        """What the postlex's future depends on: the last token it passed on."""
        return None if self.last is None else self.last.type

    def _replay(self, tokens):
        out = self.postlex.process(iter([*([self.last] if self.last is not None else []), *tokens]))
        if self.last is not None:
            next(out)
        return out

    def run(self, tokens):
        for tok in self._replay([*tokens, _Done("__DONE__", "")]):
            if isinstance(tok, _Done):
                break
            self.last = tok
            yield tok

    def end(self):
        return self._replay([])


class PostlexOracle:
    def __init__(self, grammar, vocab, postlex):
        from lark.lexer import Lexer

        fed = type("Fed", (Lexer,), {"__init__": _Fed.__init__, "lex": _Fed.lex})
        self.parser = Lark(to_lark_text(grammar), parser="lalr", lexer=fed, start=grammar.start)
        lexer = build_lexer(dataclasses.replace(grammar, semicolons=None))
        # terminal names as the exported grammar spells them
        self.names = [lark_terminal_name(n) for n in lexer.terminals]
        self.ignored = [bool(x) for x in lexer.ignored]
        self.lexing = BackingUpLexer(lexer, backtrack=grammar.backtrack)
        self.vocab = vocab
        self.start_state = _IndentState(postlex) if isinstance(postlex, Indenter) else _SemicolonState(postlex)

    def _lexemes(self, text: bytes, lexemes) -> list[tuple[int, bytes]]:
        return [(t, text[a:b]) for t, a, b in lexemes]

    def _run(self, ip, post, lexemes) -> bool:
        """Feed completed lexemes through the postlex into the parser (both change); False if rejected."""
        tokens = [Token(self.names[t], text.decode("utf-8", "replace")) for t, text in lexemes if not self.ignored[t]]
        try:
            for tok in post.run(tokens):
                ip.feed_token(tok)
        except (UnexpectedToken, LarkError, AssertionError, IndexError):
            return False
        return True

    def _ends(self, ip, post) -> bool:
        ip, post = ip.copy(deepcopy_values=False), post.copy()
        try:
            for tok in post.end():
                ip.feed_token(tok)
        except (UnexpectedToken, LarkError, AssertionError, IndexError):
            return False
        return "$END" in ip.accepts()

    def _pending_ok(self, ip, post, text: bytes, reading) -> bool:
        if reading.state == 0:
            return True
        produce = self.lexing.first_terms(text, reading)
        if any(self.ignored[x] for x in produce):
            return True
        acc = ip.accepts()
        if any(self.names[x] in acc for x in produce if self.names[x] not in post.newlines):
            return True
        newlines = [x for x in produce if self.names[x] in post.newlines]
        if isinstance(post, _SemicolonState):
            return any(self._run(ip.copy(deepcopy_values=False), post.copy(), [(x, b"\n")]) for x in newlines)
        if not newlines:
            return False
        levels = list(post.ind.indent_level)
        for width in [*levels, levels[-1] + 1]:
            ip2, post2 = ip.copy(deepcopy_values=False), post.copy()
            if not self._run(ip2, post2, [(newlines[0], b"\n" + b" " * width)]):
                continue
            if post2.ind.paren_level == 0 and self._ends(ip2, post2):
                return True
            if any(t not in post.special for t in ip2.accepts()):
                return True
        return False

    def mask(self, prefix: bytes) -> np.ndarray:
        """Boolean mask over ``vocab.n_logits`` after the byte prefix (which must be viable)."""
        readings = self.lexing.readings(prefix)
        assert readings, "prefix does not lex"
        base = readings[0]  # its lexemes are every reading's first ones
        ip = self.parser.parse_interactive("")
        post = self.start_state.copy()
        assert self._run(ip, post, self._lexemes(prefix, base.lexemes)), "prefix does not parse"
        pending = prefix[base.start:]

        def key(text: bytes, reading) -> tuple:
            lexemes = self._lexemes(text, reading.lexemes)
            return (tuple((t, x if self.names[t] in post.newlines else b"") for t, x in lexemes), reading.state,
                    reading.shadows, text[-4:] if reading.shadows else b"")

        def verdict(text: bytes, reading) -> bool:
            ip2, post2 = ip.copy(deepcopy_values=False), post.copy()
            return self._run(ip2, post2, self._lexemes(text, reading.lexemes)) and self._pending_ok(
                ip2, post2, text, reading)

        allowed = self.lexing.token_mask(self.vocab, pending, key, verdict)
        if self._eos_ok(ip, post, pending):
            allowed[list(self.vocab.eos_ids)] = True
        return allowed

    def accepts(self, text: bytes) -> bool:
        """Whether ``text`` is a whole sentence (EOS allowed after it)."""
        ip = self.parser.parse_interactive("")
        return self._eos_ok(ip, self.start_state.copy(), text)

    def _eos_ok(self, ip, post, pending: bytes) -> bool:
        """Whether the input may end after ``pending`` (lexed from a lexeme boundary, ``ip``/``post`` before it)."""
        for reading in self.lexing.readings(pending):
            done = self.lexing.finish(pending, reading)
            if done is None:
                continue
            ip2, post2 = ip.copy(deepcopy_values=False), post.copy()
            if self._run(ip2, post2, self._lexemes(pending, done)) and self._ends(ip2, post2):
                return True
        return False
