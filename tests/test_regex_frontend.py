"""``Grammar.from_regex``: the grammar's language is exactly what ``re.fullmatch`` accepts.

Bar: for 100 regexes, the matcher agrees with ``re.fullmatch`` on 1,000 sampled and mutated
strings each. The default run checks every regex on 1,000 strings through grammask's lexer
(the language of the one-terminal grammar) and a sample of regexes token by token through the
real matcher; ``-m slow`` runs all 100 x 1,000 through the matcher.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from json_schema_suite import lex_all

from grammask.automata.lexer import build_lexer
from grammask.automata.regex import Alt, Chars, Concat
from grammask.errors import (
    EmptyLanguageError,
    TokenRejectedError,
    UnsupportedRegexError,
)
from grammask.grammar.regex_frontend import (
    grammar_from_regex,
    parse_pattern,
    render_regex,
)
from grammask.sampler import SentenceSampler, mutate

REGEXES: list[str] = json.loads((Path(__file__).parent / "data" / "regexes.json").read_text(encoding="utf-8"))
"""The 100 regexes of the bar, kept as data so that ``bench/bench_regex.py`` reads the same list."""
assert len(REGEXES) == 100, len(REGEXES)

N_STRINGS = 1000
ALPHABET_EXTRA = "aAbz09 _-.\n\té😀ßKkſ"


def _strings(pattern: str, n: int, seed: int) -> list[str]:
    """``n`` strings: half sampled from the grammar, half mutations of samples and random strings."""
    rng = random.Random(seed)
    grammar = grammar_from_regex(pattern)
    sampler = SentenceSampler(grammar)
    alphabet = "".join(dict.fromkeys(re.sub(r"[\\\[\]\(\)\{\}\?\*\+\|\^\$]", "", pattern) + ALPHABET_EXTRA))
    out = []
    while len(out) < n:
        text = sampler.sample(rng, ignored_rate=0.0)
        out.append(text)
        out.append(mutate(text, rng, alphabet, edits=rng.randint(1, 3)))
        if rng.random() < 0.2:
            out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))))
    return out[:n]


def _lexer_accepts(lexer, text: str) -> bool:
    terminals = lex_all(lexer, text.encode("utf-8"))
    return terminals is not None and len(terminals) <= 1


@pytest.mark.parametrize("pattern", REGEXES)
def test_grammar_language_is_fullmatch(pattern):
    grammar = grammar_from_regex(pattern)
    lexer = build_lexer(grammar)
    nullable = any(not r.rhs for r in grammar.rules)
    for text in _strings(pattern, N_STRINGS, seed=hash(pattern) % 1000):
        expected = re.fullmatch(pattern, text) is not None
        got = _lexer_accepts(lexer, text) and (text != "" or nullable)
        assert got == expected, (pattern, text)


def _matcher_accepts(compiled, tokens: list[int]) -> bool:
    matcher = compiled.matcher()
    try:
        for token in tokens:
            matcher.advance(token)
    except TokenRejectedError:
        return False
    return matcher.is_accepting()


def _check_matcher(vocab, patterns, n):
    from grammask.compiler import compile as compile_grammar

    disagreements = []
    for pattern in patterns:
        compiled = compile_grammar(grammar_from_regex(pattern), vocab)
        for text in _strings(pattern, n, seed=7):
            # The tokenizer may normalize the text (drop control characters): judge what is fed.
            tokens = vocab.encode(text)
            fed = b"".join(vocab.tokens[t] for t in tokens)
            try:
                expected = re.fullmatch(pattern, fed.decode("utf-8")) is not None
            except UnicodeDecodeError:
                expected = False  # bytes that are no text match no regex
            if _matcher_accepts(compiled, tokens) != expected:
                disagreements.append((pattern, fed))
    assert not disagreements, disagreements[:10]


def test_matcher_agrees_with_fullmatch(vocab):
    _check_matcher(vocab("smollm2"), REGEXES[::10], 200)


@pytest.mark.slow
def test_matcher_agrees_with_fullmatch_all(vocab):
    _check_matcher(vocab("smollm2"), REGEXES, N_STRINGS)


def test_grammar_shape():
    g = grammar_from_regex(r"^ab+$")
    assert [t.name for t in g.terminals] == ["REGEX"]
    assert [r.rhs for r in g.rules] == [("REGEX",)]
    nullable = grammar_from_regex(r"(ab)*")
    assert sorted(r.rhs for r in nullable.rules) == [(), ("REGEX",)]
    assert re.fullmatch(nullable.terminals[0].pattern, "ab") and not re.fullmatch(nullable.terminals[0].pattern, "")
    only_empty = grammar_from_regex(r"(?:)")
    assert only_empty.terminals == () and [r.rhs for r in only_empty.rules] == [()]


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        (r"(?=a)a", "lookahead"),
        (r"(?!a)b", "negative lookahead"),
        (r"(?<=a)b", "lookbehind"),
        (r"(a)\1", "backreference"),
        (r"(?P<x>a)(?P=x)", "backreference"),
        (r"(a)?(?(1)b|c)", "conditional"),
        (r"a\bb", "word boundary"),
        (r"a^b", "anchor in the middle"),
        (r"(?m)^a$", "MULTILINE"),
        (r"(a$)+", "anchor inside a repetition"),
        (r"(?>a+)b", "atomic"),
        (r"a++", "possessive"),
        (r"[a", "invalid regex"),
    ],
)
def test_unsupported_constructs_raise(pattern, words):
    with pytest.raises(UnsupportedRegexError, match=words) as info:
        grammar_from_regex(pattern)
    assert repr(pattern) in str(info.value)


def test_empty_language_raises():
    with pytest.raises(EmptyLanguageError):
        grammar_from_regex(r"[^\x00-\U0010ffff]")


def test_ecma_dialect_search_semantics():
    node = parse_pattern(r"^\d+$", dialect="ecma", search=True)
    text = render_regex(node)
    assert re.fullmatch(text, "123") and not re.fullmatch(text, "١٢٣") and not re.fullmatch(text, "12\n")
    inner = render_regex(parse_pattern("b", dialect="ecma", search=True))
    assert re.fullmatch(inner, "abc") and not re.fullmatch(inner, "ac")
    dot = render_regex(parse_pattern("^.$", dialect="ecma", search=True))
    assert re.fullmatch(dot, "x", re.DOTALL) and not re.fullmatch(dot, "\u2028", re.DOTALL)
    with pytest.raises(UnsupportedRegexError, match="inline flags"):
        parse_pattern("(?i)a", dialect="ecma")


def _doubled(k: int):
    """``(a|b)`` concatenated with itself ``k`` times over: a shared subtree whose text doubles at each level."""
    node = Alt((Chars(((0x61, 0x61),)), Chars(((0x62, 0x62),))))
    for _ in range(k):
        node = Concat((node, node))
    return node


def test_shared_subtrees_render_once_and_mean_the_same():
    text = render_regex(_doubled(10))
    assert re.fullmatch(text, "ab" * 512) and not re.fullmatch(text, "ab" * 511)


def test_a_regex_too_long_to_write_out_is_refused():
    with pytest.raises(UnsupportedRegexError, match="characters long"):
        render_regex(_doubled(40))
