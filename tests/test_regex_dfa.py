"""Regexes to byte DFAs: agreement with Python's ``re``, byte-level prefixes, UTF-8 validity, tags,
minimality, Python's match semantics for lazy quantifiers, and unsupported features."""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammask.automata import dfa as dfa_module
from grammask.automata.dfa import ByteDFA, build_dfa
from grammask.automata.patterns import compile_regex, regex_to_dfa
from grammask.automata.regex import parse_regex
from grammask.automata.utf8 import SCALARS, difference, utf8_sequences
from grammask.errors import UnsupportedRegexError

JSON_STRING = r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"'
JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"

PATTERNS = [
    JSON_STRING,
    JSON_NUMBER,
    r"(a|b)*abb",
    r"abc",
    r"",
    r"a?",
    r"(?:[0-9])+",
    r"[^\"\\\x00-\x1f]",
    r"\w+",
    r"[a-zA-Z_]\w*",
    r"\d+",
    r"\D\S\W",
    r"\s*x\s*",
    r"(?a)\w+",
    r"(?a:\d)\d",
    r".",
    r"(?s).",
    r".+",
    r"(?s:.)\n?.",
    r"[^a-z]+",
    r"[^\W\d_]+",
    r"[^\n]*",
    r"(?i:select)",
    r"(?i)straße",
    r"(?i)[a-f]+",
    r"(?i)[^k]",
    r"(?i)ΣΑΣ",
    r"(?i:é)é",
    r"(?i)\w",
    r"(?ia)k[s-t]",
    r"[α-ω]{2,3}",
    r"[\u4e00-\u9fff]+[\U0001F600-\U0001F64F]?",
    r"x{3}",
    r"(ab){0,2}c{2,}",
    r"[0-9a-fA-F]{4}",
    r"[a-z]{1,8}",
    r"(?:cat|category|dog)s?",
    r"(foo|)(bar)?",
    r"(?P<name>a|bb)+",
    r"(?x) a  b # comment",
    r"'(?:[^'\\\n]|\\.)+'",
    r"//[^\n]*",
    r"[\x80-\xff]+",
    r"\u00e9+|e\u0301",
]

# Characters that exercise the interesting cases: ASCII specials, multi-byte letters and digits,
# characters Python matches case-insensitively to ASCII letters (Kelvin sign, long s, dotted I).
SPECIAL_CHARS = (
    'abcdefkstxyzABKS_019 "\\/\n\t\x00\x1f\x7f'
    "éÉßẞſKİıΣσςµμ中😀٣\xa0\u2028\u0301\uffff\U0010ffff"
)
text_chars = st.one_of(st.sampled_from(SPECIAL_CHARS), st.characters(exclude_categories=["Cs"]))


@cache
def dfa_of(pattern: str, flags: str = "") -> ByteDFA:
    return regex_to_dfa(pattern, flags)


def accepted_tags(dfa: ByteDFA, data: bytes) -> frozenset[int]:
    state = dfa.walk(data)
    return frozenset() if state < 0 else dfa.accepts[state]


def dfa_matches(dfa: ByteDFA, text: str) -> bool:
    return 0 in accepted_tags(dfa, text.encode("utf-8"))


@st.composite
def candidate_strings(draw: st.DrawFn, pattern: str) -> str:
    """Matches of ``pattern``, near misses (one edit away from a match) and arbitrary text."""
    kind = draw(st.sampled_from(["match", "edit", "text"]))
    if kind == "text":
        return draw(st.text(text_chars, max_size=10))
    s = draw(st.from_regex(pattern, fullmatch=True))
    if kind == "match" or len(s) > 40:
        return s
    i = draw(st.integers(0, len(s)))
    c = draw(text_chars)
    return draw(st.sampled_from([s[:i] + c + s[i:], s[:i] + s[i + 1 :], s[:i] + c + s[i + 1 :]]))


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_agrees_with_re_fullmatch(pattern: str, data: st.DataObject) -> None:
    dfa = dfa_of(pattern)
    s = data.draw(candidate_strings(pattern))
    assert dfa_matches(dfa, s) == bool(re.fullmatch(pattern, s)), s


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_byte_prefix_of_a_match_is_viable(pattern: str, data: st.DataObject) -> None:
    dfa = dfa_of(pattern)
    encoded = data.draw(st.from_regex(pattern, fullmatch=True)).encode("utf-8")
    state = 0
    for byte in encoded:  # mid-character prefixes included
        state = int(dfa.trans[state, byte])
        assert state >= 0
    assert 0 in dfa.accepts[state]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_dfa_is_trimmed_and_numbered_breadth_first(pattern: str) -> None:
    dfa = dfa_of(pattern)
    assert dfa.trans.dtype == np.int32 and dfa.trans.shape == (dfa.n_states, 256)
    assert dfa.start == 0
    # Every state can reach acceptance (walking the reverse graph from accepting states).
    live = {s for s, a in enumerate(dfa.accepts) if a}
    grew = True
    while grew:
        grew = False
        for s in range(dfa.n_states):
            if s not in live and any(int(t) in live for t in dfa.trans[s] if t >= 0):
                live.add(s)
                grew = True
    assert live == set(range(dfa.n_states))
    # Breadth-first numbering over bytes 0..255: states appear in order of first discovery.
    order = [0]
    for s in order:
        for t in dfa.trans[s]:
            if t >= 0 and int(t) not in order:
                order.append(int(t))
    assert order == list(range(dfa.n_states))


@cache
def all_scalars() -> tuple[np.ndarray, str, np.ndarray, np.ndarray]:
    """Every scalar value, the text of them all, and their UTF-8 encodings (zero-padded to 4) and lengths."""
    cp = np.concatenate([np.arange(lo, hi + 1) for lo, hi in SCALARS])
    text = cp.astype("<u4").tobytes().decode("utf-32-le")
    length = 1 + (cp > 0x7F) + (cp > 0x7FF) + (cp > 0xFFFF)
    enc = np.zeros((len(cp), 4), dtype=np.int64)
    enc[:, 0] = np.select([length == 1, length == 2, length == 3], [cp, 0xC0 | cp >> 6, 0xE0 | cp >> 12], 0xF0 | cp >> 18)
    for k in range(1, 4):
        shift = np.maximum(6 * (length - 1 - k), 0)
        enc[:, k] = np.where(k < length, 0x80 | (cp >> shift) & 0x3F, 0)
    assert all(bytes(enc[i, : length[i]].tolist()) == chr(cp[i]).encode() for i in range(0, len(cp), 997))
    return cp, text, enc, length


def count_accepted_by_length(dfa: ByteDFA, max_len: int) -> list[int]:
    """How many byte strings of each length 0..max_len reach a state accepting tag 0."""
    accepting = np.array([0 in a for a in dfa.accepts])
    ways = np.zeros(dfa.n_states, dtype=np.int64)
    ways[0] = 1
    counts = []
    for _ in range(max_len + 1):
        counts.append(int(ways[accepting].sum()))
        nxt = np.zeros_like(ways)
        src, byte = np.nonzero(dfa.trans >= 0)
        np.add.at(nxt, dfa.trans[src, byte], ways[src])
        ways = nxt
    return counts


@pytest.mark.parametrize(
    "char_class",
    [r"(?s:.)", r".", r"\w", r"\W", r"\d", r"\s", r"(?a)\w", r'[^"\\\x00-\x1f]', r"(?i)k", r"(?i)[^a-z]", r"(?i)\w",
     r"[\ud7ff-\ue000]"],
)
def test_single_character_classes_accept_exactly_valid_utf8_of_their_members(char_class: str) -> None:
    dfa = dfa_of(char_class)
    scalars, text, enc, length = all_scalars()
    expected = np.zeros(len(scalars), dtype=bool)
    for run in re.finditer(char_class + "+", text):  # text index == index into scalars
        expected[run.start() : run.end()] = True
    state = np.zeros(len(scalars), dtype=np.int64)
    for k in range(4):
        alive = (k < length) & (state >= 0)
        state[alive] = dfa.trans[state[alive], enc[alive, k]]
    accepting = np.array([0 in a for a in dfa.accepts] + [False])  # index -1: dead
    assert np.array_equal(accepting[state], expected)
    # Together with the walk above, equal counts mean no other byte string (invalid UTF-8) is accepted.
    counts = count_accepted_by_length(dfa, 5)
    assert counts[5] == 0 and counts[0] == 0
    for n_bytes in (1, 2, 3, 4):
        assert counts[n_bytes] == int(expected[length == n_bytes].sum())


@pytest.mark.parametrize(
    "bad",
    [b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf",
     b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\x80", b"\xe4\xb8a", b"\xc3"],
)
def test_invalid_utf8_is_rejected(bad: bytes) -> None:
    dfa = dfa_of(r"(?s).*")
    assert 0 not in accepted_tags(dfa, b"ok" + bad)
    assert dfa.walk(b"ok" + bad + b"ok") == -1


def test_mid_character_prefixes_continue_only_with_valid_continuations() -> None:
    dfa = dfa_of(r"[é中😀]")
    for ch in "é中😀":
        encoded = ch.encode()
        for cut in range(1, len(encoded)):
            state = dfa.walk(encoded[:cut])
            assert state >= 0 and not dfa.accepts[state]
            allowed = [b for b in range(256) if dfa.trans[state, b] >= 0]
            assert allowed == [encoded[cut]]


@st.composite
def code_point_ranges(draw: st.DrawFn) -> tuple[tuple[int, int], ...]:
    lo = draw(st.integers(0, 0x10FFFF))
    hi = draw(st.integers(lo, min(0x10FFFF, lo + draw(st.sampled_from([3, 200, 5000, 0x110000])))))
    return ((lo, hi),)


@settings(max_examples=200, deadline=None)
@given(ranges=code_point_ranges(), probe=st.integers(0, 0x10FFFF))
def test_utf8_sequences_cover_exactly_the_scalars_of_a_range(ranges, probe) -> None:
    seqs = utf8_sequences(ranges)
    assert seqs == sorted(seqs)
    size = sum(int(np.prod([hi - lo + 1 for lo, hi in seq])) for seq in seqs)
    assert size == sum(hi - lo + 1 for lo, hi in difference(ranges, ((0xD800, 0xDFFF),)))
    if not 0xD800 <= probe <= 0xDFFF:
        encoded = chr(probe).encode()
        hits = [s for s in seqs if len(s) == len(encoded) and all(lo <= b <= hi for b, (lo, hi) in zip(encoded, s))]
        assert len(hits) == (1 if ranges[0][0] <= probe <= ranges[0][1] else 0)


C_LIKE = {
    "IF": "if",
    "INT": "int",
    "IDENT": r"[a-zA-Z_]\w*",
    "NUMBER": r"(?:0|[1-9][0-9]*)(?:[uU](?:ll|LL|l|L)?)?",
    "FLOAT": r"(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?",
    "STRING": r'"(?:[^"\\\n]|\\.)*"',
    "LINE_COMMENT": r"//[^\n]*",
    "BLOCK_COMMENT": r"/\*(.|\n)*?\*/",
    "DIV": "/",
    "DIV_EQ": "/=",
    "DOT": r"\.",
    "WS": r"\s+",
}


def expected_tags(patterns: list[str], s: str) -> frozenset[int]:
    """Each pattern's lexemes: what ``re.fullmatch`` accepts, or for a lazy one what ``re.match`` returns whole."""
    tags = set()
    for i, p in enumerate(patterns):
        m = re.match(p, s) if "*?" in p else re.fullmatch(p, s)
        if m and m.end() == len(s):
            tags.add(i)
    return frozenset(tags)


@settings(max_examples=300, deadline=None)
@given(s=st.one_of(
    st.lists(st.sampled_from(["if", "in", "t", "_", "x", "1", "0", ".", "e+5", '"', "\\", "/", "*", "=", "\n", " ",
                              "u", "L", "é", "中"]), max_size=7).map("".join),
    st.sampled_from(["if", "int", "interval", "x_é中", "0", "12uL", "1.5e-3", ".5", '"a\\"b"', "// c", "/**/",
                     "/* x */", "/", "/=", " \n\t\u2028"]),
))
def test_multi_tag_accept_sets_match_each_terminal(s: str) -> None:
    assert accepted_tags(multi_tag_dfa(), s.encode()) == expected_tags(list(C_LIKE.values()), s)


@cache
def multi_tag_dfa() -> ByteDFA:
    return build_dfa([compile_regex(p, name=name) for name, p in C_LIKE.items()])


def test_multi_tag_examples() -> None:
    dfa = multi_tag_dfa()
    names = list(C_LIKE)
    tags = lambda s: {names[i] for i in accepted_tags(dfa, s.encode())}
    assert tags("if") == {"IF", "IDENT"}
    assert tags("ifx") == {"IDENT"}
    assert tags("héllo") == {"IDENT"}
    assert tags("42") == {"NUMBER"}
    assert tags("/") == {"DIV"}
    assert tags("/*") == set() and dfa.walk(b"/*") >= 0
    assert tags("") == set()


def test_minimization_gives_the_textbook_four_states() -> None:
    dfa = dfa_of(r"(a|b)*abb")
    assert dfa.n_states == 4
    assert [bool(a) for a in dfa.accepts] == [False, False, False, True]


@pytest.mark.parametrize(
    "left, right",
    [(r"(a|b)*", r"[ab]*"), (r"a+", r"aa*"), (r"(?:ab|ac)", r"a[bc]"), (r"x{2,4}", r"xxx?x?"), (r"(?i)k", r"[kK\u212a]")],
)
def test_equivalent_regexes_give_identical_dfas(left: str, right: str) -> None:
    a, b = dfa_of(left), dfa_of(right)
    assert a.accepts == b.accepts
    assert np.array_equal(a.trans, b.trans)


@pytest.mark.parametrize("pattern", [r"(a|b)*abb", JSON_STRING, JSON_NUMBER, r"(?i:select)|[a-z]+", r"x{2,4}"])
def test_minimization_is_exact_even_when_every_hash_collides(pattern: str, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = dfa_of(pattern)
    monkeypatch.setattr(dfa_module, "_WEIGHTS", np.ones(257, dtype=np.uint64))
    colliding = regex_to_dfa(pattern)
    assert colliding.accepts == expected.accepts
    assert np.array_equal(colliding.trans, expected.trans)


def test_bounded_repeat_is_a_chain() -> None:
    dfa = dfa_of(r"[a-z]{1,64}")
    assert dfa.n_states == 65
    assert dfa_matches(dfa, "a" * 64) and not dfa_matches(dfa, "a" * 65)


def test_lazy_comment_stops_at_the_first_close() -> None:
    pattern = r"/\*(.|\n)*?\*/"
    dfa = dfa_of(pattern)
    end = dfa.walk(b"/* a * b */")
    assert 0 in dfa.accepts[end]
    assert (dfa.trans[end] == -1).all()
    assert dfa.walk(b"/* a */ b */") == -1
    assert dfa_matches(dfa, "/* é\n**/")


@settings(max_examples=300, deadline=None)
@given(s=st.lists(st.sampled_from(["/*", "*/", "*", "/", "a", "\n", "é"]), max_size=8).map("".join))
def test_lazy_regex_accepts_exactly_the_prefix_re_match_returns(s: str) -> None:
    pattern = r"/\*(.|\n)*?\*/"
    dfa = dfa_of(pattern)
    encoded = s.encode()
    accepted = [k for k in range(len(encoded) + 1) if 0 in accepted_tags(dfa, encoded[:k])]
    m = re.match(pattern, s)
    assert accepted == ([len(m.group().encode())] if m else [])


def test_lazy_repeat_of_fixed_count_is_greedy() -> None:
    assert compile_regex(r"a{3}?b*").trailing is None
    assert dfa_matches(dfa_of(r"a{3}?b*"), "aaabb")


def test_empty_language_gives_a_lone_start_state() -> None:
    dfa = dfa_of(r"[^\x00-\U0010ffff]")
    assert dfa.n_states == 1 and dfa.accepts == (frozenset(),)
    assert (dfa.trans == -1).all()
    assert regex_to_dfa(r"\ud800").n_states == 1  # a lone surrogate has no UTF-8 encoding


def test_empty_string_is_allowed_at_this_layer() -> None:
    dfa = dfa_of("")
    assert dfa.n_states == 1 and dfa.accepts == (frozenset({0}),)


def test_flags_argument() -> None:
    assert dfa_matches(regex_to_dfa("select", "i"), "SeLeCT")
    assert dfa_matches(regex_to_dfa("a.b", "s"), "a\nb")
    assert not dfa_matches(regex_to_dfa("a.b"), "a\nb")
    assert dfa_matches(regex_to_dfa(r"\w", ""), "é")
    assert not dfa_matches(regex_to_dfa(r"\w", "a"), "é")
    assert dfa_matches(regex_to_dfa("a b # c", "x"), "ab")
    assert dfa_matches(regex_to_dfa(r"(?i:s)", ""), "\u017f")  # long s, as re matches it


def test_dfa_is_read_only() -> None:
    with pytest.raises(ValueError):
        dfa_of("abc").trans[0, 0] = 5


@pytest.mark.parametrize(
    "pattern, feature",
    [
        (r"^a", "anchor"),
        (r"a$", "anchor"),
        (r"\Aa", "anchor"),
        (r"a\Z", "anchor"),
        (r"\bfoo", "anchor"),
        (r"a\Bb", "anchor"),
        (r"(?<=a)b", "before the start of the lexeme"),
        (r"x*(?<!a)b", "before the start of the lexeme"),
        (r"a(?=b(?!c))", "lookaround inside a lookaround"),
        (r"a(?=bc)", "more than one byte past the end"),
        (r"a(?!b\w)", "more than one byte past the end"),
        (r"(a)\1", "backreference"),
        (r"(?P<q>a)(?P=q)", "backreference"),
        (r"(a)?(?(1)b|c)", "conditional"),
        (r"(?>ab)", "atomic group"),
        (r"a*+", "possessive"),
        (r"a{1,3}+", "possessive"),
        (r"(", "invalid regex"),
        (r"[a-", "invalid regex"),
        (r"a{3,1}", "invalid regex"),
        (r"\p{L}", "invalid regex"),
        (r"(?L)a", "invalid regex"),
    ],
)
def test_unsupported_features_name_the_terminal(pattern: str, feature: str) -> None:
    with pytest.raises(UnsupportedRegexError, match="MY_TERM") as info:
        regex_to_dfa(pattern, name="MY_TERM")
    assert feature in str(info.value)


def test_unknown_flag_letter_is_reported() -> None:
    with pytest.raises(UnsupportedRegexError, match=r"MY_TERM.*'q'"):
        parse_regex("a", "q", name="MY_TERM")


@pytest.mark.parametrize("escape", ["\\s", "\\S", "\\w", "\\W", "\\d", "\\D"])
@pytest.mark.parametrize("flags", ["", "a"])
def test_class_escapes_match_re_on_every_code_point(escape, flags):
    # Python's str classes are Unicode (\s holds \x1c-\x1f, \x85, \u1680, \u2000-\u200a, ...): every scalar value's
    # UTF-8 bytes must reach an accepting state exactly where re matches it.
    dfa = regex_to_dfa(escape, flags)
    accepting = np.array([bool(tags) for tags in dfa.accepts] + [False])
    trans = np.vstack([dfa.trans, np.full((1, 256), -1, dtype=dfa.trans.dtype)])
    dead = len(accepting) - 1
    pattern = re.compile(escape, re.ASCII if flags else 0)
    for lo, hi in ((0, 0x80), (0x80, 0x800), (0x800, 0x10000), (0x10000, 0x110000)):
        points = [c for c in range(lo, hi) if not 0xD800 <= c <= 0xDFFF]
        text = "".join(map(chr, points))
        want = np.array([pattern.fullmatch(c) is not None for c in text])
        data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).reshape(len(points), -1)
        state = np.zeros(len(points), dtype=np.int64)
        for column in data.T:
            state = trans[state, column]
            state[state < 0] = dead
        assert np.array_equal(accepting[state], want), escape
