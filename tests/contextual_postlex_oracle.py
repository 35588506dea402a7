"""A brute-force mask oracle for Lark's contextual lexer together with a postlex, sharing nothing with grammask's
engine (its modes, walks, aliases, indentation context or tables).

The lexer is the one of ``tests/contextual_oracle.py``: in every LR state of **Lark's own** interactive LALR parser,
the terminals its parse table accepts, the ignored ones and the postlex's ``always_accept`` get a DFA of their own,
and the prefix is lexed under grammask's lexing rule in the DFA of the parser's current state. Every completed
lexeme (with its text) goes through **the reference postlex object itself** (Lark's ``Indenter``, via
``tests/postlex_oracle.py``), whose output is fed to the parser at once; the next lexeme is lexed in the DFA of the
state the parser has then reached (after a newline: after its indents and dedents), as Lark's contextual lexer asks
for it. A terminal whose regex has a lookahead ends a lexeme only where Python's ``re.match`` of it, on the lexeme
and the next character, returns the lexeme whole.

**Viability rule** (that of ``tests/postlex_oracle.py``). A byte string is viable iff it lexes and parses that way
and its pending lexeme is empty, may become an ignored terminal, or may become one the parser takes next; a pending
newline is viable iff some line width works: at one of the open levels or one deeper, the postlex and the parser
take it and then either the end of input or some terminal other than the newline, indent and dedent. Token ``t`` is
allowed after prefix ``w`` iff ``w + t`` is viable; EOS iff the pending lexeme completes before the end of input,
the postlex and the parser take it, and then the postlex's end and ``$END``.

The vocabulary is walked as a sorted list sharing each token's common prefix with the one before, and the
parser's steps, states and verdicts are remembered across prefixes: masks of long documents at many prefixes are
the common use.
"""

from __future__ import annotations

import numpy as np
from contextual_oracle import BackingUp, Lookaheads, Reading, _ModeDFA
from lark import Lark, Token
from lark.exceptions import LarkError, UnexpectedToken
from lark.indenter import Indenter
from postlex_oracle import _IndentState, _SemicolonState

from grammask.grammar.ir import Grammar
from grammask.grammar.lark_frontend import _no_collision_check

_REJECTED = (UnexpectedToken, LarkError, AssertionError, IndexError)


class _Parse:
    """A snapshot of the parser and the postlex (never changed once made) and the key of what follows from it."""

    __slots__ = ("ip", "key", "post")

    def __init__(self, ip, post):
        self.ip, self.post = ip, post
        self.key = (tuple(ip.parser_state.state_stack), post.key())


class ContextualPostlexOracle:
    """Masks of a grammar under Lark's contextual lexer and a postlex, by brute force over the vocabulary."""

    def __init__(self, lark_text: str, grammar: Grammar, rank: np.ndarray, vocab, postlex, start: str = "start"):
        with _no_collision_check():
            self.parser = Lark(lark_text, parser="lalr", lexer="contextual", postlex=postlex, start=start)
        self.grammar = grammar
        self.vocab = vocab
        self.names = [t.name for t in grammar.terminals]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.ignored = {i for i, n in enumerate(self.names) if n in grammar.ignore}
        self.always = {self.index[n] for n in postlex.always_accept if n in self.index}
        self.rank = {i: int(r) for i, r in enumerate(rank.tolist())}
        self.looks = Lookaheads(grammar)
        self.start_post = _IndentState(postlex) if isinstance(postlex, Indenter) else _SemicolonState(postlex)
        self.newlines = {self.index[n] for n in self.start_post.newlines if n in self.index}
        self.special = {postlex.NL_type, postlex.INDENT_type, postlex.DEDENT_type, "$END"} if isinstance(
            postlex, Indenter) else {"$END"}
        self.tokens = sorted((data, tok) for tok, data in enumerate(vocab.tokens) if data)
        self._nfas: dict = {}
        self._dfas: dict[frozenset[int], _ModeDFA] = {}
        self._modes: dict[int, _ModeDFA] = {}
        self._fed: dict[tuple, _Parse | None] = {}
        self._accepts: dict[tuple, frozenset[str]] = {}
        self._viable: dict[tuple, bool] = {}

    # ---- the parser and the postlex -------------------------------------------------------------------------------

    def _mode(self, parse: _Parse) -> _ModeDFA:
        position = parse.ip.parser_state.position
        dfa = self._modes.get(position)
        if dfa is None:
            keys = parse.ip.parser_state.parse_conf.parse_table.states[position].keys()
            members = frozenset({self.index[k] for k in keys if k in self.index} | self.ignored | self.always)
            dfa = self._dfas.get(members)
            if dfa is None:
                dfa = self._dfas[members] = _ModeDFA(self.grammar, sorted(members), self.rank, self._nfas)
            self._modes[position] = dfa
        return dfa

    def _run(self, parse: _Parse, tokens: list[Token]) -> _Parse | None:
        """The parser and postlex after ``tokens`` went through the postlex into the parser, or None if rejected."""
        ip, post = parse.ip.copy(deepcopy_values=False), parse.post.copy()
        try:
            for tok in post.run(tokens):
                ip.feed_token(tok)
        except _REJECTED:
            return None
        return _Parse(ip, post)

    def _feed(self, parse: _Parse, term: int, text: bytes) -> _Parse | None:
        """After a completed lexeme of ``term`` (its text matters for a newline only)."""
        if term in self.ignored:
            return parse
        if term in self.newlines:
            text = b"\n" + text.rsplit(b"\n", 1)[1] if b"\n" in text else text
        else:
            text = b""
        key = (parse.key, term, text)
        if key not in self._fed:
            self._fed[key] = self._run(parse, [Token(self.names[term], text.decode("utf-8", "replace"))])
        return self._fed[key]

    def _accepted(self, parse: _Parse) -> frozenset[str]:
        found = self._accepts.get(parse.key)
        if found is None:
            found = self._accepts[parse.key] = frozenset(parse.ip.accepts())
        return found

    def _ends(self, parse: _Parse) -> bool:
        """Whether the input may end here: the postlex's end, then ``$END``."""
        ip, post = parse.ip.copy(deepcopy_values=False), parse.post.copy()
        try:
            for tok in post.end():
                ip.feed_token(tok)
        except _REJECTED:
            return False
        return "$END" in ip.accepts()

    # ---- lexing ---------------------------------------------------------------------------------------------------

    def _step(self, config, data: bytes, i: int):
        """The configuration after byte ``data[i]``, or None if it is rejected. A configuration is (mode DFA, state,
        pending lexeme's text, parse)."""
        dfa, q, lexeme, parse = config
        b = data[i]
        nxt = dfa.trans[q][b]
        if nxt < 0:
            term = dfa.winner[q]
            if term < 0 or not self.looks.ends_before(term, lexeme, data[i:]):
                return None
            parse = self._feed(parse, term, lexeme)
            if parse is None:
                return None
            dfa, lexeme = self._mode(parse), b""
            nxt = dfa.trans[0][b]
            if nxt < 0:
                return None
        return dfa, nxt, lexeme + data[i : i + 1], parse

    def _viable_end(self, config) -> bool:
        dfa, q, _, parse = config
        if q == 0:
            return True
        key = (id(dfa), q, parse.key)
        found = self._viable.get(key)
        if found is None:
            found = self._viable[key] = self._pending_ok(dfa.produce[q], parse)
        return found

    def _pending_ok(self, produce: set[int], parse: _Parse) -> bool:
        if produce & self.ignored:
            return True
        accepted = self._accepted(parse)
        if any(self.names[x] in accepted for x in produce - self.newlines):
            return True
        newlines = sorted(produce & self.newlines)
        if not newlines:
            return False
        if isinstance(parse.post, _SemicolonState):
            return any(self._feed(parse, x, b"\n") is not None for x in newlines)
        levels = list(parse.post.ind.indent_level)
        for width in [*levels, levels[-1] + 1]:
            after = self._run(parse, [Token(self.names[newlines[0]], "\n" + " " * width)])
            if after is None:
                continue
            if after.post.ind.paren_level == 0 and self._ends(after):
                return True
            if any(t not in self.special for t in self._accepted(after)):
                return True
        return False

    # ---- masks ----------------------------------------------------------------------------------------------------

    def _start(self, prefix: bytes):
        parse = _Parse(self.parser.parse_interactive(""), self.start_post.copy())
        config = (self._mode(parse), 0, b"", parse)
        for i in range(len(prefix)):
            config = self._step(config, prefix, i)
            assert config is not None, f"prefix is rejected at byte {i}"
        assert self._viable_end(config), "prefix is not viable"
        return config

    def mask(self, prefix: bytes) -> np.ndarray:
        """Boolean mask over ``vocab.n_logits`` for the byte prefix (which must be viable)."""
        if self.grammar.backtrack:
            return self._backing_up_mask(prefix)
        config = self._start(prefix)
        allowed = np.zeros(self.vocab.n_logits, dtype=bool)
        configs = [config]  # configs[k]: after the first k bytes of the previous token (None: rejected)
        previous = b""
        for data, tok in self.tokens:
            shared = 0
            limit = min(len(data), len(previous), len(configs) - 1)
            while shared < limit and data[shared] == previous[shared]:
                shared += 1
            del configs[shared + 1 :]
            for i in range(shared, len(data)):
                configs.append(None if configs[-1] is None else self._step(configs[-1], data, i))
            previous = data
            allowed[tok] = configs[-1] is not None and self._viable_end(configs[-1])
        if self._eos_ok(config):
            allowed[list(self.vocab.eos_ids)] = True
        return allowed

    def _eos_ok(self, config) -> bool:
        dfa, q, lexeme, parse = config
        if q != 0:
            term = dfa.winner[q]
            if term < 0 or not self.looks.ends_before(term, lexeme, b""):
                return False
            parse = self._feed(parse, term, lexeme)
            if parse is None:
                return False
        return self._ends(parse)

    # ---- backing up -----------------------------------------------------------------------------------------------

    def _match(self, dfa: _ModeDFA, q: int, lexeme: bytes, after: bytes) -> int:
        term = dfa.winner[q]
        return term if term >= 0 and self.looks.ends_before(term, lexeme, after) else -1

    def _backing_up_mask(self, prefix: bytes) -> np.ndarray:
        backing = BackingUp(self._mode, self._feed, self._match)
        readings = backing.readings(_Parse(self.parser.parse_interactive(""), self.start_post.copy()), prefix)
        assert any(self._reading_viable(backing, prefix, r) for r in readings), "prefix is not viable"
        base = readings[0]  # its pending lexeme starts where the readings part
        pending = prefix[base.start:]
        allowed = np.zeros(self.vocab.n_logits, dtype=bool)
        for data, tok in self.tokens:
            text = pending + data
            allowed[tok] = any(self._reading_viable(backing, text, r) for r in backing.readings(base.parse, text))
        if any(self._eos_ok((r.dfa, r.state, prefix[r.start:], r.parse)) for r in readings):
            allowed[list(self.vocab.eos_ids)] = True
        return allowed

    def _reading_viable(self, backing: BackingUp, data: bytes, reading: Reading) -> bool:
        if not reading.shadows:
            return self._viable_end((reading.dfa, reading.state, b"", reading.parse))
        return self._pending_ok(backing.first_terms(data, reading), reading.parse)
