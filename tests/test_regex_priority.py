"""Lazy quantifiers and lookarounds get Python's own match semantics, exactly.

A lazy regex's lexemes are the strings ``re.match`` returns whole; a regex with lookarounds and no
lazy quantifier accepts what ``re.fullmatch`` accepts. A lookahead reaching past the lexeme is one
byte of trailing context: where the lexer would end the lexeme before a character (its DFA has no
transition on the character's first byte), the lexeme must be a match exactly when ``re`` matches
it followed by that character. Checked on random small regexes, on the terminals of Lark's and
SynCode's grammars, and at the lexer, which refuses a trailing context it cannot honour.
"""

from __future__ import annotations

import glob
import itertools
import os
import random
import re
from functools import cache

import lark
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lark.lexer import PatternStr
from lark.load_grammar import load_grammar

from grammask.automata.dfa import ByteDFA, build_dfa
from grammask.automata.lexer import build_lexer
from grammask.automata.patterns import compile_regex
from grammask.automata.regex import ByteNFA
from grammask.errors import UnsupportedRegexError
from grammask.grammar.ir import Grammar, Rule, Terminal

LARK_GRAMMARS = os.path.join(os.path.dirname(lark.__file__), "grammars")
SYNCODE_GRAMMARS = "/work/shared/data/syncode-grammars"


def _lazy(pattern: str) -> bool:
    return re.search(r"[*+?}]\?", re.sub(r"\(\?[=!<:]", "(", pattern)) is not None


def python_lexeme(pattern: str, text: str, after: str | None) -> bool:
    """Whether ``re`` makes ``text`` a lexeme of ``pattern`` when ``after`` (None: the end) follows."""
    rest = after or ""
    if _lazy(pattern):
        m = re.match(pattern, text + rest)
        return m is not None and m.end() == len(text)
    return re.match(f"(?:{pattern})(?={re.escape(rest)}\\Z)", text + rest) is not None


def grammask_lexeme(nfa: ByteNFA, dfa: ByteDFA, data: bytes, after: int) -> bool:
    """Whether ``data`` is a lexeme of the regex before byte ``after`` (256: the end of input)."""
    if nfa.trailing is None:
        state = dfa.walk(data)
        return state >= 0 and 0 in dfa.accepts[state]
    state = 0
    for byte in data:
        state = int(nfa.trailing.trans[state, byte])
        if state < 0:
            return False
    return bool(nfa.trailing.allowed[state, after])


@cache
def compiled(pattern: str) -> tuple[ByteNFA, ByteDFA]:
    nfa = compile_regex(pattern)
    return nfa, build_dfa([nfa])


def check_against_re(pattern: str, texts, nexts: str) -> None:
    nfa, dfa = compiled(pattern)
    for text in texts:
        data = text.encode()
        assert grammask_lexeme(nfa, dfa, data, 256) == python_lexeme(pattern, text, None), (pattern, text)
        for c in nexts:
            first = c.encode()[0]
            if dfa.walk(data + bytes([first])) < 0 and dfa.walk(data) >= 0:  # the lexer would end here
                assert grammask_lexeme(nfa, dfa, data, first) == python_lexeme(pattern, text, c), (pattern, text, c)


# --- random small regexes --------------------------------------------------------------------


def _random_regex(rng: random.Random, depth: int) -> str:
    def atom(d: int) -> str:
        r = rng.random()
        if d <= 0 or r < 0.35:
            return rng.choice(["a", "b", "c", "[ab]", ".", "(?:)"])
        if r < 0.5:
            return "(?:" + "|".join(seq(d - 1) for _ in range(rng.randint(2, 3))) + ")"
        if r < 0.6:
            return "(" + seq(d - 1) + ")"
        if r < 0.72:
            return rng.choice(["(?=", "(?!"]) + rng.choice(["a", "b", "[ab]", "c", "a|b", "(?:)"]) + ")"
        if r < 0.8:
            return rng.choice(["(?<=", "(?<!"]) + rng.choice(["a", "b", "[bc]"]) + ")"
        return "(?:" + seq(d - 1) + ")"

    def piece(d: int) -> str:
        a = atom(d)
        if rng.random() < 0.45 and not a.startswith(("(?=", "(?!", "(?<")):
            a += rng.choice(["*", "+", "?", "{0,2}", "{1,2}"]) + rng.choice(["", "?"])
        return a

    def seq(d: int) -> str:
        return "".join(piece(d) for _ in range(rng.randint(1, 3)))

    return seq(depth) + rng.choice(["", "", "(?!a)", "(?=b)", "(?![ab])"])


SHORT_TEXTS = ["".join(p) for n in range(5) for p in itertools.product("abc", repeat=n)]


@pytest.mark.parametrize("seed", range(8))
def test_random_regexes_agree_with_re(seed: int) -> None:
    rng = random.Random(seed)
    checked = 0
    while checked < 25:
        pattern = _random_regex(rng, 2)
        try:
            re.compile(pattern)
            compile_regex(pattern)
        except (re.error, UnsupportedRegexError):
            continue
        check_against_re(pattern, SHORT_TEXTS, "abc")
        checked += 1


def test_sre_empty_iteration_rule() -> None:
    # re stops repeating once an iteration matched the empty string and goes on after the repeat.
    for pattern in [r"(?:b*b??(?:)+?|a+?){1,2}?(?:cb|[ab]{0,2}?)*", r"(?:a|)*?b", r"(?:(?:)|a)+?"]:
        check_against_re(pattern, SHORT_TEXTS, "abc")


# --- the terminals of real grammars ----------------------------------------------------------


@cache
def lark_terminals(path: str) -> list[Terminal]:
    """Every terminal with a pattern in a Lark grammar file, as the Lark front end writes it."""
    with open(path) as f:
        text = f.read()
    if path.endswith("common.lark"):
        names = re.findall(r"^([A-Z_]+)\s*:", text, re.MULTILINE)
        text = "start: " + " | ".join(names) + "\n%import common (" + ", ".join(names) + ")\n"
    loaded, _ = load_grammar(text, path, [LARK_GRAMMARS], False)
    rule_names = [str(r[0]) for r in loaded.rule_defs]
    defs, _, _ = loaded.compile(["start"] if "start" in rule_names else rule_names[:1], set())
    return [
        Terminal(str(d.name), d.pattern.to_regexp(), literal=d.pattern.value if isinstance(d.pattern, PatternStr) else None,
                 priority=d.priority)
        for d in defs
        if d.pattern is not None
    ]


def all_terminals_grammar(terminals: list[Terminal]) -> Grammar:
    return Grammar(tuple(terminals), tuple(Rule("start", (t.name,)) for t in terminals), "start")


GRAMMAR_FILES = [os.path.join(LARK_GRAMMARS, "python.lark"), os.path.join(LARK_GRAMMARS, "lark.lark")] + sorted(
    glob.glob(os.path.join(SYNCODE_GRAMMARS, "*.lark"))
)


@pytest.mark.parametrize("path", GRAMMAR_FILES, ids=os.path.basename)
def test_every_terminal_of_the_grammar_builds_one_lexer(path: str) -> None:
    terminals = lark_terminals(path)
    lexer = build_lexer(all_terminals_grammar(terminals))
    assert lexer.terminals == tuple(t.name for t in terminals)


def test_every_common_terminal_compiles_but_the_inner_string_helper() -> None:
    terminals = {t.name: t for t in lark_terminals(os.path.join(LARK_GRAMMARS, "common.lark"))}
    # Alone, the helper's lookbehind can see the previous lexeme (it is meant inside ESCAPED_STRING).
    helper = terminals.pop("_STRING_ESC_INNER")
    with pytest.raises(UnsupportedRegexError, match=r"_STRING_ESC_INNER.*before the start of the lexeme"):
        compile_regex(helper.pattern, name=helper.name)
    for t in terminals.values():
        compile_regex(t.pattern, name=t.name)
    del terminals["_STRING_INNER"]  # matches the empty string: no lexer takes it, as before
    build_lexer(all_terminals_grammar(list(terminals.values())))


def test_escaped_string_is_its_regular_equivalent() -> None:
    raw = build_dfa([compile_regex(r'".*?(?<!\\)(\\\\)*?"')])
    regular = build_dfa([compile_regex(r'"(?:[^"\\\n]|\\[^\n])*"')])
    assert raw.accepts == regular.accepts and np.array_equal(raw.trans, regular.trans)


def _pattern(path: str, name: str) -> str:
    return next(t.pattern for t in lark_terminals(path) if t.name == name)


LARK = os.path.join(LARK_GRAMMARS, "lark.lark")
PYTHON = os.path.join(LARK_GRAMMARS, "python.lark")
SYNCODE_PYTHON = os.path.join(SYNCODE_GRAMMARS, "python.lark")
REAL_PATTERNS = [
    (LARK, "STRING"),
    (LARK, "REGEXP"),
    (LARK, "OP"),
    (PYTHON, "STRING"),
    (PYTHON, "LONG_STRING"),
    (PYTHON, "DEC_NUMBER"),
    (SYNCODE_PYTHON, "STRING"),
    (SYNCODE_PYTHON, "LONG_STRING"),
    (SYNCODE_PYTHON, "COMMENT"),
    (None, r"/\*(.|\n)*?\*/"),
    (None, r"(?x: a (?! b ) \w+ (?<! _ ) )"),
    (None, r"(?i:x.(?<=[AB])y+?)"),
    (None, r"(?s:<!--.*?-->)"),
    (None, r"(?m:a\w*?!)"),
]
PIECES = ['"', "'", '"""', "\\", "/", "*", "a", "i", "b", "r", "u", "x", "y", "0", "1", "_", "?", "+", "\n", "#",
          " ", "é", "<!--", "-->", "A"]
NEXTS = "\"'\\/a0129_?+ \n#é-xyA"


@pytest.mark.parametrize(
    "source, name", REAL_PATTERNS, ids=[f"{os.path.basename(os.path.dirname(s or ''))}:{n}" for s, n in REAL_PATTERNS]
)
@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from(PIECES), max_size=9).map("".join))
def test_real_terminals_agree_with_re(source: str | None, name: str, text: str) -> None:
    pattern = name if source is None else _pattern(source, name)
    check_against_re(pattern, [text], NEXTS)


def test_lark_regexp_keeps_its_flags_and_escapes() -> None:
    nfa = compile_regex(_pattern(LARK, "REGEXP"))
    dfa = build_dfa([nfa])
    for lexeme in [r"/abc/i", r"/a\/b/", r"/a\/", "/a/imslux"]:  # /a\/ is what re.match returns without a later /
        assert 0 in dfa.accepts[dfa.walk(lexeme.encode())], lexeme
    assert dfa.walk(b"//") < 0  # (?!\/): no empty regexp


# --- trailing context at the lexer -----------------------------------------------------------


def _grammar(**patterns: str) -> Grammar:
    return all_terminals_grammar([Terminal(name, p) for name, p in patterns.items()])


def test_trailing_context_the_lexer_cannot_honour_raises() -> None:
    with pytest.raises(UnsupportedRegexError, match=r"terminal STRING: .*lexeme b'\"\"'.*before byte b'\"'"):
        build_lexer(_grammar(STRING=r'"(?!"").*?"'))
    with pytest.raises(UnsupportedRegexError, match=r"terminal A: .*at the end of input"):
        build_lexer(_grammar(A=r"x(?=b)", B="b|xx"))


def test_trailing_context_honoured_where_other_terminals_extend_the_lexeme() -> None:
    lexer = build_lexer(_grammar(STRING=r'"(?!"").*?"', LONG_STRING=r'""".*?"""', NAME=r"[a-z]+"))
    names = lambda data: [lexer.terminals[t] for t in lexer.step(0, data)[0]]
    assert names(b'""x') == ["STRING"]
    assert names(b'"""a"""x') == ["LONG_STRING"]
    assert lexer.step(0, b'""" ') is not None and lexer.finish(lexer.step(0, b'"""')[1]) is None
    ops = build_lexer(_grammar(OP=r"[+*]|[?](?![a-z])", RULE=r"!?[_?]?[a-z][_a-z0-9]*"))
    assert [ops.terminals[t] for t in ops.step(0, b"?ab+")[0]] == ["RULE"]
    assert [ops.terminals[t] for t in ops.step(0, b"?+")[0]] == ["OP"]
    # Alone, OP's forbidden bytes start no lexeme: the input is rejected either way.
    assert build_lexer(_grammar(OP=r"[+*]|[?](?![a-z])")).step(0, b"?a") is None


def test_flags_m_x_u_are_accepted_and_anchors_still_raise() -> None:
    assert build_dfa([compile_regex(r"(?m)a", name="T")]).walk(b"a") >= 0
    assert build_dfa([compile_regex("a b", "xu", name="T")]).walk(b"ab") >= 0
    with pytest.raises(UnsupportedRegexError, match="anchor"):
        compile_regex(r"(?m)a$", name="T")


# --- end to end ------------------------------------------------------------------------------

LOOKAROUND_GRAMMAR = r'''
start: item*
item: STRING | LONG_STRING | REGEXP | OP | RULE
STRING: /"(?!"").*?(?<!\\)(\\\\)*?"/i
LONG_STRING: /""".*?(?<!\\)(\\\\)*?"""/is
REGEXP: /\/(?!\/)[^\/\n]*?\/[imslux]*/
OP: /[+*]|[?](?![a-z])/
RULE: /!?[_?]?[a-z][_a-z0-9]*/
%ignore " "
'''


def test_matcher_agrees_with_lark_on_a_lookaround_grammar(vocab) -> None:
    from lark import Lark
    from lark.exceptions import LarkError

    from grammask import compile as compile_grammar
    from grammask.errors import TokenRejectedError
    from grammask.sampler import SentenceSampler, mutate

    tokens = vocab("smollm2")
    grammar = Grammar.from_lark(LOOKAROUND_GRAMMAR)
    compiled = compile_grammar(grammar, tokens, cache=False)
    reference = Lark(LOOKAROUND_GRAMMAR, parser="lalr", lexer="basic")
    sampler = SentenceSampler(grammar, max_depth=6)
    rng = random.Random(3)
    disagreements = []
    for i in range(300):
        text = sampler.sample(rng)
        if i % 2:
            text = mutate(text, rng, '"\\/?+* abi\n', edits=rng.randint(1, 2))
        ids = tokens.encode(text)
        if tokens.decode(ids) != text.encode():
            continue  # SmolLM2 cannot spell some byte of the text (it lacks a few byte tokens)
        fed = text
        matcher = compiled.matcher()
        try:
            for t in ids:
                matcher.advance(t)
            got = matcher.is_accepting()
        except TokenRejectedError:
            got = False
        try:
            reference.parse(fed)
            want = True
        except LarkError:
            want = False
        if got != want:
            disagreements.append((fed, got))
    assert not disagreements, disagreements[:5]
