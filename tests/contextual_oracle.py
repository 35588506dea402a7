"""A brute-force mask oracle for Lark's contextual lexer that shares nothing with grammask's modes.

In every LR state of Lark's own interactive LALR parser, the terminals its parse table accepts (and the
ignored ones) get a DFA of their own, built from scratch (no removal of terminals that shadow nothing,
no merged modes, no branch aliases; for a grammar that follows Lark's first match, each cut only by the other members of
its state, as Lark's per-state alternation cuts it). The prefix is lexed under the lexing rule of
:mod:`grammask.automata.lexer` in the DFA of the parser's current state, and every completed terminal is
fed to the parser at once, which picks the next lexeme's DFA.

A terminal whose regex has a lookahead ends a lexeme only where Python's ``re.match`` of it, on the lexeme and the
next character, returns the lexeme whole (its lookahead may reach one byte past the lexeme).

**Viability rule.** A byte string is viable iff it lexes and parses that way and its pending lexeme is
empty or can still become (per its DFA's reachable winners) an ignored terminal or one the parser takes
next. Token ``t`` is allowed after prefix ``w`` iff ``w + t`` is viable; EOS iff the pending lexeme is
complete, the parser takes its terminal (if not ignored) and then the end of input.

**Backing up** (grammars from Lark, ``grammar.backtrack``): each state's scanner is a Python ``re`` alternation, so
a lexeme is the longest complete match in the DFA of the parser's state when it starts: where it runs on past a
match and dies, the match is emitted and the rest lexed again in the DFA of the state the parser then reaches. A
prefix then has several readings (``tests/backing_up.py`` says which), each with its own parser; the long lexeme of
a reading that backs up later is a *shadow* in its own DFA, which must die before it is complete again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from backing_up import can_die, shadowed_first_terms
from lark import Lark, Token
from lark.exceptions import UnexpectedToken

from grammask.automata.dfa import build_dfa
from grammask.automata.first_match import restrict_preempted
from grammask.automata.lexer import alive
from grammask.automata.patterns import compile_regex
from grammask.grammar.ir import Grammar
from grammask.grammar.lark_frontend import _no_collision_check


class _ModeDFA:
    """One LR state's lexer: transitions, each state's winner (a grammar terminal index) and producible set.

    ``nfas`` holds each terminal's compiled regex where already known (filled in as needed)."""

    def __init__(self, grammar: Grammar, members: list[int], rank: dict[int, int], nfas: dict | None = None):
        nfas = {} if nfas is None else nfas
        for i in members:
            if i not in nfas:
                nfas[i] = compile_regex(grammar.terminals[i].pattern, grammar.terminals[i].flags)
        own = [nfas[i] for i in members]
        if grammar.first_match:
            own = _first_match_cut(grammar, members, own)
        dfa = build_dfa(own)
        self.trans = dfa.trans.tolist()
        self.winner = [min((members[t] for t in tags), key=rank.__getitem__) if tags else -1 for tags in dfa.accepts]
        n = len(self.trans)
        self.produce: list[set[int]] = [set() for _ in range(n)]
        changed = True
        while changed:
            changed = False
            for q in range(n):
                got = {self.winner[q]} - {-1}
                for r in set(self.trans[q]) - {-1}:
                    got |= self.produce[r]
                if got != self.produce[q]:
                    self.produce[q] = got
                    changed = True


def _first_match_cut(grammar: Grammar, members: list[int], nfas: list) -> list:
    """The members' automata with the strings Lark's first-match alternation of this state's scanner gives to another
    member cut (:func:`~grammask.automata.first_match.restrict_preempted` over these terminals alone)."""
    dfa = build_dfa(nfas)
    matches = np.zeros((dfa.n_states, len(nfas)), dtype=bool)
    for q, tags in enumerate(dfa.accepts):
        matches[q, sorted(tags)] = True
    after = alive(dfa.trans, matches, strict=True)
    return restrict_preempted([grammar.terminals[i] for i in members], nfas, matches, after)[0]


class Lookaheads:
    """The terminals whose regex has a lookahead, and whether a lexeme of one may end before some text, by ``re``."""

    def __init__(self, grammar: Grammar):
        self.patterns = {i: re.compile(t.pattern) for i, t in enumerate(grammar.terminals)
                         if "(?=" in t.pattern or "(?!" in t.pattern}

    def ends_before(self, term: int, lexeme: bytes, after: bytes) -> bool:
        """Whether ``lexeme`` of ``term`` may end before ``after`` (b"": the end of input)."""
        pattern = self.patterns.get(term)
        if pattern is None:
            return True
        text = lexeme.decode("utf-8", "replace")
        m = pattern.match(text + after.decode("utf-8", "replace")[:1])
        return m is not None and m.end() == len(text)


class ContextualOracle:
    """Masks of a grammar under Lark's contextual lexer, by brute force over the vocabulary."""

    def __init__(self, lark_text: str, grammar: Grammar, rank: np.ndarray, vocab):
        with _no_collision_check():  # Lark's interegular check runs for minutes on big grammars
            self.parser = Lark(lark_text, parser="lalr", lexer="contextual")
        self.grammar = grammar
        self.vocab = vocab
        self.names = [t.name for t in grammar.terminals]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.ignored = {i for i, n in enumerate(self.names) if n in grammar.ignore}
        self.rank = {i: int(r) for i, r in enumerate(rank.tolist())}
        self.looks = Lookaheads(grammar)
        self._dfas: dict[frozenset[int], _ModeDFA] = {}
        self._fed: dict[tuple, object] = {}
        self.backtrack = grammar.backtrack

    def _mode(self, ip) -> _ModeDFA:
        state = ip.parser_state
        keys = state.parse_conf.parse_table.states[state.position].keys()
        members = frozenset({self.index[k] for k in keys if k in self.index} | self.ignored)
        dfa = self._dfas.get(members)
        if dfa is None:
            dfa = self._dfas[members] = _ModeDFA(self.grammar, sorted(members), self.rank)
        return dfa

    def _feed(self, ip, term: int):
        """The parser after ``term`` (a copy), or None if it is a syntax error."""
        if term in self.ignored:
            return ip
        key = (tuple(ip.parser_state.state_stack), term)
        if key not in self._fed:
            branch = ip.copy(deepcopy_values=False)
            try:
                branch.feed_token(Token(self.names[term], ""))
            except UnexpectedToken:
                branch = None
            self._fed[key] = branch
        return self._fed[key]

    def _run(self, config, data: bytes):
        """(mode DFA, state, parser, pending lexeme's text) after non-empty ``data`` from ``config``, or None if
        rejected (the state is a pending lexeme's, or 0 for none only at the very start)."""
        dfa, q, ip, lexeme = config
        start = 0
        for i, b in enumerate(data):
            nxt = dfa.trans[q][b]
            if nxt < 0:
                term = dfa.winner[q]
                if term < 0 or not self.looks.ends_before(term, lexeme + data[start:i], data[i:]):
                    return None
                ip = self._feed(ip, term)
                if ip is None:
                    return None
                dfa = self._mode(ip)
                q, lexeme, start = 0, b"", i
                nxt = dfa.trans[q][b]
                if nxt < 0:
                    return None
            q = nxt
        return dfa, q, ip, lexeme + data[start:]

    def _viable_end(self, config, started: bool = True) -> bool:
        dfa, q, ip, _ = config
        if not started:
            return True
        return any(x in self.ignored or self._feed(ip, x) is not None for x in dfa.produce[q])

    def mask(self, prefix: bytes) -> np.ndarray:
        """Boolean mask over ``vocab.n_logits`` for the byte prefix (which must be viable)."""
        if self.backtrack:
            return self._backing_up_mask(prefix)
        ip = self.parser.parse_interactive("")
        config = self._run((self._mode(ip), 0, ip, b""), prefix)
        assert config is not None and self._viable_end(config, bool(prefix)), "prefix is not viable"
        allowed = np.zeros(self.vocab.n_logits, dtype=bool)
        for tok, data in enumerate(self.vocab.tokens):
            if data:
                after = self._run(config, data)
                allowed[tok] = after is not None and self._viable_end(after)
        if self._accepts_end(config, bool(prefix)):
            allowed[list(self.vocab.eos_ids)] = True
        return allowed

    def _accepts_end(self, config, started: bool) -> bool:
        dfa, q, ip, lexeme = config
        if started:
            term = dfa.winner[q]
            if term < 0 or not self.looks.ends_before(term, lexeme, b""):
                return False
            ip = self._feed(ip, term)
            if ip is None:
                return False
        return "$END" in ip.accepts()

    # ---- backing up (see the module docstring) --------------------------------------------------------------

    def _match(self, dfa: _ModeDFA, q: int, lexeme: bytes, after: bytes) -> int:
        """The terminal ``lexeme`` (in ``q`` of ``dfa``) is a match of before ``after`` (b"": the end), else -1."""
        term = dfa.winner[q]
        return term if term >= 0 and self.looks.ends_before(term, lexeme, after) else -1

    def _backing_up_mask(self, prefix: bytes) -> np.ndarray:
        backing = BackingUp(self._mode, lambda ip, term, _: self._feed(ip, term), self._match)
        readings = backing.readings(self.parser.parse_interactive(""), prefix)
        assert readings and (not prefix or any(self._viable(backing, prefix, r) for r in readings)), \
            "prefix is not viable"
        base = readings[0]  # its pending lexeme starts where the readings part
        pending = prefix[base.start:]
        allowed = np.zeros(self.vocab.n_logits, dtype=bool)
        for tok, data in enumerate(self.vocab.tokens):
            if data:
                text = pending + data
                allowed[tok] = any(self._viable(backing, text, r) for r in backing.readings(base.parse, text))
        if any(self._reading_ends(prefix, r) for r in readings):
            allowed[list(self.vocab.eos_ids)] = True
        return allowed

    def _viable(self, backing: BackingUp, data: bytes, reading: Reading) -> bool:
        if reading.state == 0:
            return True
        return any(x in self.ignored or self._feed(reading.parse, x) is not None
                   for x in backing.first_terms(data, reading))

    def _reading_ends(self, data: bytes, reading: Reading) -> bool:
        ip = reading.parse
        if reading.state != 0:
            term = self._match(reading.dfa, reading.state, data[reading.start:], b"")
            if term < 0:
                return False
            ip = self._feed(ip, term)
            if ip is None:
                return False
        return "$END" in ip.accepts()


@dataclass(frozen=True)
class Reading:
    """One way a prefix lexes under the contextual lexer with backing up: the parser (and postlex) after its
    completed lexemes, the pending lexeme's DFA, state and start, and the shadows as (DFA, state) pairs."""

    parse: object
    dfa: _ModeDFA
    state: int
    start: int
    shadows: tuple = ()


class BackingUp:
    """The readings of a prefix as Lark's contextual lexer lexes it (each state's scanner backs up), for an oracle
    that gives the mode of a parse (``mode``), feeds it a completed lexeme (``feed(parse, term, text)``, None if
    rejected) and says which terminal a lexeme is a match of before the next text (``match(dfa, q, lexeme,
    after)``, -1 if none)."""

    def __init__(self, mode, feed, match):
        self.mode, self.feed, self.match = mode, feed, match
        self._dies: dict[tuple, bool] = {}

    def readings(self, parse, data: bytes, at: int = 0, shadows: tuple = ()) -> list[Reading]:
        """Every reading of ``data[at:]`` lexed from a lexeme boundary with ``parse`` ([] if none lexes)."""
        dfa, q, i, k, last = self.mode(parse), 0, at, at, None
        while k < len(data):
            nxt = dfa.trans[q][data[k]]
            if nxt < 0:
                term = self.match(dfa, q, data[i:k], data[k:k + 1]) if k > i else -1
                match = (term, k) if term >= 0 else last
                if match is None:
                    return []
                parse = self.feed(parse, match[0], data[i:match[1]])
                if parse is None:
                    return []
                dfa, q, i, k, last = self.mode(parse), 0, match[1], match[1], None
                continue
            if k > i:
                term = self.match(dfa, q, data[i:k], data[k:k + 1])
                if term >= 0:
                    last = (term, k)
            q, k = nxt, k + 1
        out = [Reading(parse, dfa, q, i, shadows)]
        if q != 0 and dfa.winner[q] < 0 and last is not None:
            fed = self.feed(parse, last[0], data[i:last[1]])
            if fed is not None:
                out += self.readings(fed, data, last[1], shadows + ((dfa, q),))
        return out

    def first_terms(self, data: bytes, reading: Reading) -> set[int]:
        """The terminals the pending lexeme can be emitted as, over the continuations that make every shadow die
        before it is complete again (lookaheads past the lexeme are not checked here)."""
        dfa = reading.dfa
        if not reading.shadows:
            return dfa.produce[reading.state]

        def step(shadow, b):
            d, s = shadow
            nxt = d.trans[s][b]
            return None if nxt < 0 else (d, nxt)

        return shadowed_first_terms(data, reading.state, reading.shadows, dfa.trans, lambda q, _: dfa.winner[q],
                                    dfa.produce, step, lambda shadow: shadow[0].winner[shadow[1]] >= 0,
                                    lambda shadow, u: self._can_die(shadow[0], shadow[1], u))

    def _can_die(self, dfa: _ModeDFA, state: int, u: int) -> bool:
        """Whether some valid continuation kills the lexeme in ``state`` of ``dfa`` before it is complete again."""
        key = (id(dfa), state, u)
        found = self._dies.get(key)
        if found is None:
            found = self._dies[key] = can_die(dfa.trans, dfa.winner, state, u)
        return found
