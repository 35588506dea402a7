"""Canonical matchers (issue 15): ``compiled.matcher(canonical=True)`` against the tokenizers themselves.

* Regex exactness (the seed paper's Alg. 4 as the oracle): for each small regex, the token sequences a
  canonical matcher can produce and end (EOS allowed), enumerated depth first up to 6 tokens, equal
  ``{encode(s) : s in L, |encode(s)| <= 6}`` from the HF tokenizer. Infinite languages are cut at a byte
  bound ``B`` on both sides (sequences whose text has at most ``B`` bytes, strings of at most ``B`` bytes),
  which keeps the comparison exact: a sequence's text and a string's encoding are the same object. Every
  state the enumeration visits must have a non-empty mask (no dead ends). The strings of ``L`` are listed
  with the ``regex`` module's partial matching, not with grammask's automata. Llama-2 writes a space
  before the text it encodes, so its regexes start with one and the oracle encodes the rest.
* Random runs: a random chooser drives canonical matchers on regexes (never an empty mask; every run
  ends accepted; its tokens are the tokenizer's encoding of its text) and on JSON and C, where the mask is
  the grammar's AND the relation's, without a dead-end guarantee: empty masks are counted and printed.

The default run takes every regex on both tokenizers, a few random runs on regexes and JSON; ``-m slow``
takes more random runs (all regexes, Llama-3 too, JSON and C measured).
"""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest
import regex
from canonical_corpus import Oracle
from conftest import get_vocab

import grammask as gm
from grammask.errors import CanonicalError, TokenRejectedError
from grammask.vocab import Vocabulary

MAX_TOKENS = 6

# (pattern, alphabet, byte bound)
REGEXES = [
    ("(cat|dog|catalog)s?", "catdoglsg", 9),
    ("[0-3]{1,4}", "0123", 4),
    ("a+", "a", 8),
    ("(ab)+", "ab", 8),
    (" +", " ", 7),
    ("[ab ]{1,4}", "ab ", 4),
    ("\n+", "\n", 5),
    ("[ \n]{1,4}", " \n", 4),
    ("(hello|help|he|llo) ?world", "helopwrd ", 11),
    ("it's|it is|its", "its' ", 5),
    ("(we|they)('ll|'re|'ve)", "wethy'lrv", 7),
    ("x(=|==|!=)y", "xy=!", 4),
    ("[(){}]{1,3}", "(){}", 3),
    (r"-?[1-3](\.[0-2])?", "-123.0", 5),
    ("true|false|null", "truefalsn", 5),
    ('"[ab]{0,3}"', '"ab', 5),
    ("[a-c]{1,3}", "abc", 3),
    ("é|e|è|ée", "éeè", 4),
    ("(日本|本)語?", "日本語", 9),
    ("[αβ]{1,3}", "αβ", 6),
    ("🦖|🦕|🦖🦕", "🦖🦕", 8),
    ("(foo|bar)(_(foo|bar))?", "fobar_", 7),
    ("<[ab]{1,2}>", "<>ab", 4),
    (r"def [a-c]\(\)", "def abc()", 7),
    ("[A-Ca-c]{1,2}", "ABCabc", 2),
    ("(  |\t)?(x|y)", " \txy", 3),
    ("10{1,4}", "10", 5),
    ("[.,;:!?]{1,3}", ".,;:!?", 3),
    ("(ing|in|g)+", "ing", 7),
    ("(th|the|there|here)+", "ther", 8),
    ("A[a-z]?", "Aabcdefghijklmnopqrstuvwxyz", 2),
    (r"https?://[ab]\.com", "htps:/ab.com", 15),
    (r"[0-2]\.[0-2]{1,2}", "012.", 4),
]


def language(pattern: str, alphabet: str, bound: int) -> list[str]:
    """The strings of ``pattern`` (whole match) of at most ``bound`` UTF-8 bytes, over ``alphabet``."""
    compiled = regex.compile(pattern)
    out, stack = [], [""]
    while stack:
        s = stack.pop()
        if compiled.fullmatch(s):
            out.append(s)
        for ch in alphabet:
            t = s + ch
            if len(t.encode()) <= bound and compiled.fullmatch(t, partial=True):
                stack.append(t)
    return out


def oracle_sequences(name: str, pattern: str, alphabet: str, bound: int) -> set[tuple[int, ...]]:
    """Alg. 4: the tokenizer's encodings of the language's strings, at most ``MAX_TOKENS`` long."""
    oracle = Oracle(get_vocab(name))
    out = set()
    for s in language(pattern, alphabet, bound):
        if oracle.prepend:
            if not s.startswith(" "):
                continue  # no encoding spells it: the tokenizer puts a space before any text
            s = s[1:]
        ids = oracle.encoding(s) if s else []
        if ids is not None and len(ids) <= MAX_TOKENS:
            out.add(tuple(ids))
    return out


@functools.cache
def compiled_regex(name: str, pattern: str) -> gm.CompiledGrammar:
    return gm.compile(gm.Grammar.from_regex(pattern), get_vocab(name))


def matcher_sequences(name: str, pattern: str, bound: int, canonical: bool = True,
                      prefix: str = "") -> set[tuple[int, ...]]:
    """The token sequences a (canonical) matcher produces and ends after ``prefix``, at most ``MAX_TOKENS`` long and
    ``bound`` bytes."""
    vocab = get_vocab(name)
    matcher = compiled_regex(name, pattern).matcher(canonical=canonical, prefix=prefix)
    eos = set(vocab.eos_ids)
    out: set[tuple[int, ...]] = set()

    def walk(seq: list[int], size: int) -> None:
        allowed = matcher.allowed_tokens().tolist()
        assert allowed, f"dead end after {[vocab.tokens[t] for t in seq]}"
        for t in allowed:
            if t in eos:
                out.add(tuple(seq))
            elif len(seq) < MAX_TOKENS and size + len(vocab.tokens[t]) <= bound:
                matcher.advance(t)
                walk([*seq, t], size + len(vocab.tokens[t]))
                matcher.rollback()

    walk([], 0)
    return out


def check_regex(name: str, pattern: str, alphabet: str, bound: int) -> int:
    if name == "llama2":
        pattern, alphabet, bound = f" (?:{pattern})", alphabet + " ", bound + 1
    expected = oracle_sequences(name, pattern, alphabet, bound)
    got = matcher_sequences(name, pattern, bound)
    vocab = get_vocab(name)
    show = lambda seqs: sorted(vocab.decode(list(s)) + f" {list(s)}".encode() for s in seqs)[:5]
    assert got == expected, f"{pattern!r}: only matcher {show(got - expected)}, only tokenizer {show(expected - got)}"
    product = compiled_regex(name, pattern)._product
    assert (product.undecided, product.left_out) == (0, 0)  # every dead-end question was answered
    return len(expected)


@pytest.mark.parametrize("pattern,alphabet,bound", REGEXES, ids=[r[0] for r in REGEXES])
def test_regex_sequences_equal_the_tokenizer_smollm2(pattern, alphabet, bound):
    assert check_regex("smollm2", pattern, alphabet, bound) > 0


@pytest.mark.parametrize("pattern,alphabet,bound", REGEXES, ids=[r[0] for r in REGEXES])
def test_regex_sequences_equal_the_tokenizer_llama2(pattern, alphabet, bound):
    assert check_regex("llama2", pattern, alphabet, bound) > 0


@pytest.mark.parametrize("pattern,alphabet,bound,prefix", [
    ("(cat|dog|catalog)s?", "catdoglsg", 9, "cat"),
    ("(hello|help|he|llo) ?world", "helopwrd ", 11, "hel"),
    ("[ \n]{1,4}x", " \nx", 5, " "),
    ("(日本|本)語?", "日本語", 9, "日"),
    ("(we|they)('ll|'re|'ve)", "wethy'lrv", 7, "we'"),
])
def test_regex_sequences_after_a_prefix_equal_the_tokenizer(pattern, alphabet, bound, prefix):
    """After a text prefix the canonical matcher produces exactly the tokenizer's encodings of the rests ``s`` with
    ``prefix + s`` in the language (the output is encoded on its own)."""
    oracle = Oracle(get_vocab("smollm2"))
    expected = set()
    for s in language(pattern, alphabet, bound + len(prefix.encode())):
        if s.startswith(prefix):
            ids = oracle.encoding(s[len(prefix):]) if s != prefix else []
            if ids is not None and len(ids) <= MAX_TOKENS:
                expected.add(tuple(ids))
    assert expected and matcher_sequences("smollm2", pattern, bound, prefix=prefix) == expected


def test_plain_matcher_produces_more():
    """The comparison has teeth: without ``canonical`` the matcher also produces split spellings ('c' 'at' 's')."""
    pattern, alphabet, bound = REGEXES[0]
    plain = matcher_sequences("smollm2", pattern, bound, canonical=False)
    expected = oracle_sequences("smollm2", pattern, alphabet, bound)
    assert expected < plain and len(plain) > 3 * len(expected)


def random_run(matcher, vocab, rng: random.Random, max_tokens: int, p_eos: float = 0.5,
               p_finish: float = 0.0) -> tuple[list[int], str]:
    """Drives ``matcher`` with a random chooser: ``(tokens, how it ended)``, ended one of 'eos', 'dead', 'limit'.

    ``p_finish``: how often the chooser takes, among the allowed tokens, one the grammar alone finishes soonest
    after (``next_token_costs`` of the plain matcher inside), so that runs on grammars end.
    """
    eos = set(vocab.eos_ids)
    tokens: list[int] = []
    while len(tokens) < max_tokens:
        allowed = matcher.allowed_tokens().tolist()
        if not allowed:
            return tokens, "dead"
        ends = [t for t in allowed if t in eos]
        if ends and (len(allowed) == len(ends) or rng.random() < p_eos):
            matcher.advance(ends[0])
            return tokens, "eos"
        others = [t for t in allowed if t not in eos]
        if rng.random() < p_finish:
            costs = matcher._matcher.next_token_costs()
            best = min(int(costs[t]) for t in others)
            others = [t for t in others if costs[t] == best]
        t = rng.choice(others)
        matcher.advance(t)
        tokens.append(t)
    return tokens, "limit"


def check_ended_run(vocab, tokens: list[int]) -> None:
    text = vocab.decode(tokens)
    oracle = Oracle(vocab)
    if oracle.prepend:
        text = text[1:]
    assert oracle.encoding(text.decode()) == tokens, f"{text!r} as {tokens} is not its own encoding"


RANDOM_REGEXES = [r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", r'\{"[a-z]{1,8}": [0-9]{1,5}\}', r"[ \t\n]{0,4}x[ \t\n]{0,4}",
                  r"[a-z]+( [a-z]+){0,3}", r"(Hello|Hi), [A-Z][a-z]{0,6}!", r"(\w+ ){1,4}\w+"]


def regex_runs(name: str, pattern: str, runs: int, max_tokens: int) -> dict[str, int]:
    """Random runs of a canonical regex matcher: never a dead end; ended runs match and are their own encoding."""
    vocab = get_vocab(name)
    matcher = gm.compile(gm.Grammar.from_regex(pattern), vocab).matcher(canonical=True)
    rng = random.Random(len(pattern) * 7919 + len(name))
    counts = {"eos": 0, "dead": 0, "limit": 0}
    for _ in range(runs):
        matcher.reset()
        tokens, ended = random_run(matcher, vocab, rng, max_tokens)
        counts[ended] += 1
        assert ended != "dead", f"dead end after {vocab.decode(tokens)!r}"
        if ended == "eos":
            assert regex.fullmatch(pattern, vocab.decode(tokens).decode())
            check_ended_run(vocab, tokens)
    return counts


@pytest.mark.parametrize("pattern", RANDOM_REGEXES[:2])
def test_random_runs_on_regexes_end_canonical(pattern):
    assert regex_runs("smollm2", pattern, runs=3, max_tokens=25)["eos"] >= 1


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm2", "llama3"])
@pytest.mark.parametrize("pattern", RANDOM_REGEXES)
def test_random_runs_on_regexes_end_canonical_slow(name, pattern):
    counts = regex_runs(name, pattern, runs=10, max_tokens=40)
    print(name, pattern, counts)
    assert counts["eos"] >= 1


def grammar_runs(name: str, grammar: str, runs: int, seed: int, max_tokens: int, p_eos: float = 0.9,
                 p_finish: float = 0.5, prefix: str = "") -> dict[str, int]:
    """Random runs of a canonical matcher on a built-in grammar after ``prefix``: counts of how they ended (ended
    ones checked: their own encoding, and the prefix and output a sentence)."""
    vocab = get_vocab(name)
    compiled = gm.compile(gm.Grammar.builtin(grammar), vocab)
    matcher = compiled.matcher(canonical=True, prefix=prefix)
    rng = random.Random(seed)
    counts = {"eos": 0, "dead": 0, "limit": 0}
    for _ in range(runs):
        matcher.reset()
        tokens, ended = random_run(matcher, vocab, rng, max_tokens, p_eos=p_eos, p_finish=p_finish)
        counts[ended] += 1
        if ended == "eos":
            assert matcher.is_terminated()
            check_ended_run(vocab, tokens)
            assert compiled.matcher(prefix=prefix.encode() + vocab.decode(tokens)).is_accepting()
    print(name, grammar, counts)
    return counts


def test_random_runs_on_json():
    counts = grammar_runs("smollm2", "json", runs=3, seed=1, max_tokens=20)
    assert counts["eos"] >= 1


def test_random_runs_on_json_after_a_prefix():
    counts = grammar_runs("smollm2", "json", runs=3, seed=3, max_tokens=20, prefix='{"key": [1, "a')
    assert counts["eos"] >= 1


@pytest.mark.slow
@pytest.mark.parametrize("grammar", ["json", "c"])
@pytest.mark.parametrize("name", ["smollm2", "llama3"])
def test_random_runs_on_grammars_measured(name, grammar):
    counts = grammar_runs(name, grammar, runs=10, seed=2, max_tokens=40, p_eos=0.3, p_finish=0.3)
    assert counts["eos"] >= 1


def dead_end(plain, relation, state: int, eos: set[int], depth: int) -> bool:
    """Whether, within ``depth`` tokens, every continuation the grammar allows stops being canonical before it ends."""
    if plain.is_accepting() and relation.can_end(state):
        return False
    for u in plain.allowed_tokens().tolist():
        after = relation.step(state, u) if u not in eos else -1
        if after >= 0:
            if depth == 0:
                return False
            deeper = plain.fork()
            deeper.advance(u)
            if not dead_end(deeper, relation, after, eos, depth - 1):
                return False
    return True


def test_bounded_regex_mask_holds_only_tokens_proven_alive():
    """A mask with more tokens to search from than ``mask_searches`` (``\\w+`` before a required suffix) leaves the
    rest out: every token it keeps is taken by ``advance`` and proven alive, and ``advance`` still takes a left-out
    token that is alive."""
    vocab = get_vocab("smollm2")
    compiled = compiled_regex("smollm2", r"\w+@\w+\.(com|org)")
    matcher = compiled.matcher(canonical=True)
    matcher.accept_tokens(vocab.encode("mail"))
    relation = matcher.relation
    product = gm.canonical_matcher.RegexProduct(compiled, relation, mask_searches=16)
    row = np.zeros(gm.bitmask.bitmask_words(vocab.n_logits), dtype=np.int32)
    matcher.plain.fill_mask(row)
    row[: len(relation.allowed_words(matcher.relation_state))] &= relation.allowed_words(matcher.relation_state)
    before = set(np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).tolist())
    product.restrict(row, matcher.plain.lexer_state, matcher.relation_state)
    kept = set(np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).tolist())
    assert kept and product.left_out > 1000 and len(kept) < len(before)
    targets = product.successors(matcher.plain.lexer_state)[1]
    for t in sorted(kept)[:40]:
        assert product.alive(targets[t], relation.step(matcher.relation_state, t))
        assert matcher.accept_token(t)
        matcher.rollback()
    left = max(before - kept)  # a long word piece: alive, as advance finds
    assert product.alive(targets[left], relation.step(matcher.relation_state, left)) and matcher.accept_token(left)


@pytest.mark.parametrize("name", ["llama3"])
def test_regex_mask_leaves_out_a_dead_partial_character(name):
    """Found by the attack bench: after white space, Llama-3's ``b' \\xe3\\x80'`` starts U+3000 (white space to
    ``\\s``) but no canonical encoding of the rest goes on from it; the mask, which searched only 64 of 490
    candidates, held it and ``advance`` refused it."""
    vocab = get_vocab(name)
    matcher = compiled_regex(name, r"\s*yes\s*|\s*no\s*").matcher(canonical=True)
    matcher.accept_tokens(vocab.encode(" \t\t\t\t\t\u3000\u3000\u3000\u3000\n" + " " * 16 + "\n" + " " * 25 + "\n"
                                       + "\u3000" * 7 + "\t\t    \t"))
    allowed = matcher.allowed_tokens().tolist()
    assert vocab.tokens.index(b" \xe3\x80") not in allowed and len(allowed) > 100
    for t in allowed[::7]:
        assert matcher.accept_token(t), vocab.tokens[t]
        matcher.rollback()


def test_mask_is_grammar_and_relation():
    """On JSON: the canonical mask is the plain mask AND the relation's set, less tokens that leave an unfinished
    keyword only non-canonical tokens could finish (' fals' before 'e': ' false' is one token; 'n', 'ul' before
    'l')."""
    vocab = get_vocab("smollm2")
    compiled = gm.compile(gm.Grammar.builtin("json"), vocab)
    plain, canon = compiled.matcher(), compiled.matcher(canonical=True)
    relation = compiled._relation_of()
    fals, e = (vocab.tokens.index(b) for b in (b" fals", b"e"))
    for t in vocab.encode('{"key": [1, 2.5, "x y", false]}'):
        got = set(canon.allowed_tokens().tolist())
        expected = set(np.intersect1d(plain.allowed_tokens(), relation.allowed(canon.relation_state)).tolist())
        assert t in got and got <= expected
        for dropped in expected - got:
            probe = plain.fork()
            probe.advance(dropped)
            assert dead_end(probe, relation, relation.step(canon.relation_state, dropped), set(vocab.eos_ids), 8)
        plain.advance(t)
        canon.advance(t)
    assert canon.is_accepting()
    assert set(vocab.eos_ids) <= set(canon.allowed_tokens().tolist())
    probe = compiled.matcher(canonical=True)
    probe.accept_tokens(vocab.encode('[1,'))
    assert probe.accept_token(vocab.tokens.index(b" false"))
    probe.rollback()
    assert fals not in probe.allowed_tokens() and relation.step(relation.step(probe.relation_state, fals), e) < 0
    start = compiled.matcher(canonical=True)
    assert vocab.tokens.index(b"n") not in start.allowed_tokens()


def test_remembered_rows_are_the_rows_made_afresh():
    """A canonical mask met again (another matcher in the same grammar and relation state) is copied from the rows
    remembered, and equals the row made without them; a budgeted matcher's rows are not remembered."""
    vocab = get_vocab("smollm2")
    compiled = gm.compile(gm.Grammar.builtin("json"), vocab)
    first, again, fresh = (compiled.matcher(canonical=True) for _ in range(3))
    rows = first._rows
    for t in [*vocab.encode('{"a": [1, 2, {"b": null}], "c": "x y"}'), min(vocab.eos_ids)]:
        made = first.allowed_tokens()
        assert rows.get(rows.key(first.plain, first.relation_state)) is not None
        fresh._rows = gm.canonical_matcher.MaskRows()
        assert np.array_equal(again.allowed_tokens(), made) and np.array_equal(fresh.allowed_tokens(), made)
        for m in (first, again, fresh):
            m.advance(t)
    budgeted = compiled.matcher(canonical=True, max_tokens=40)
    budgeted._rows = gm.canonical_matcher.MaskRows()
    budgeted.allowed_tokens()
    assert budgeted._rows.get(budgeted._rows.key(budgeted.plain, budgeted.relation_state)) is None


@pytest.mark.parametrize("nodes", [16_384, 3])
def test_row_keys_are_equal_exactly_for_equal_states(nodes):
    """Keys of remembered rows number the LR stack: two matchers' keys are equal exactly when their grammar states
    (``state_key``, equal by value) and relation states are, also when the numbering's tables are cleared often."""
    vocab = get_vocab("smollm2")
    compiled = gm.compile(gm.Grammar.builtin("json"), vocab)
    rows = gm.canonical_matcher.MaskRows(nodes=nodes)
    seen: dict[tuple, tuple] = {}
    for text in ('{"a": [1, [2, {"b": [3]}]], "c": {"d": []}}', '[[[1], 2], {"a": {"b": {}}}]', '{"c": {"d": []}}'):
        m = compiled.matcher(canonical=True)
        for t in vocab.encode(text):
            state = (m.plain.state_key, m.relation_state)
            key = rows.key(m.plain, m.relation_state)
            assert seen.setdefault(key, state) == state
            m.advance(t)
    by_state: dict[tuple, set] = {}
    for key, state in seen.items():
        by_state.setdefault(state, set()).add(key)
    assert len(by_state) > 30
    if nodes > 100:
        assert all(len(keys) == 1 for keys in by_state.values())


def test_forced_check_groups_tokens_by_what_they_leave():
    """The dead-end check's groups: every token the lexer reads from a state, once, in the group of the lexer state
    and the terminals it leaves (as a plain matcher reads it), ascending; its group sizes per token id."""
    vocab = get_vocab("smollm2")
    compiled = gm.compile(gm.Grammar.builtin("json"), vocab)
    check = compiled.matcher(canonical=True)._forced
    plain = compiled.matcher()
    for t in vocab.encode('{"key": [1, 2.5, "x y", false]}'):
        q = plain.lexer_state
        groups = check._tokens_by_end(q)
        sizes = check._group_sizes(q)
        seen = [u for _, _, tokens in groups for u in tokens]
        assert len(seen) == len(set(seen)) == int((sizes > 0).sum())
        assert t in seen
        for q2, terminals, tokens in groups:
            assert tokens == sorted(tokens) and all(sizes[u] == len(tokens) for u in tokens)
            left = set()
            for u in tokens[:: max(1, len(tokens) // 5)]:
                probe = plain.fork()
                if probe.accept_token(u):
                    left.add(probe.lexer_state)
            assert left <= {q2}, (q, terminals)
        plain.advance(t)


def split_in_two(vocab, word: str) -> list[int]:
    """Two tokens that spell ``word`` (a non-canonical encoding where ``word`` is one token)."""
    for k in range(1, len(word)):
        head, tail = word[:k].encode(), word[k:].encode()
        if head in vocab.tokens and tail in vocab.tokens:
            return [vocab.tokens.index(head), vocab.tokens.index(tail)]
    raise AssertionError(word)


@pytest.mark.parametrize("make,prefix,output,word", [
    (lambda: gm.Grammar.builtin("python"), "def f(a):\n    if a:\n        return a\n    ", "return a + 1\n", "return"),
    (lambda: gm.Grammar.from_json_schema({"type": "object", "properties": {"name": {"type": "string", "maxLength": 5000}},
                                          "required": ["name"]}), '{"name": "', 'hello world"}', " world"),
], ids=["python-indenter", "schema-counted"])
def test_canonical_with_an_indenter_or_counted_bounds(make, prefix, output, word):
    """Grammars with an indenter (Python) or counted length bounds: the tokenizer's own encoding of an output is taken
    to the end, a split of one of its tokens is refused, and random runs keep non-empty masks of canonical steps."""
    vocab = get_vocab("smollm2")
    compiled = gm.compile(make(), vocab)
    assert compiled._engine.indenter is not None or compiled._engine.lexer.counter is not None
    m = compiled.matcher(canonical=True, prefix=prefix)
    ids = vocab.encode(output)
    assert m.accept_tokens(ids) == len(ids) and m.is_accepting()
    assert set(vocab.eos_ids) <= set(m.allowed_tokens().tolist())
    m.reset()
    before = output[: output.index(word)]
    m.accept_tokens(vocab.encode(before))
    assert m.accept_tokens(split_in_two(vocab, word)) == 1
    rng = random.Random(5)
    for _ in range(2):
        m.reset()
        tokens, ended = random_run(m, vocab, rng, 12, p_eos=0.0)
        assert ended == "limit" and m.relation.accepts(tokens) > len(tokens) - 1


def test_operations_and_errors():
    vocab = get_vocab("smollm2")
    compiled = compiled_regex("smollm2", "(cat|dog|catalog)s?")
    m = compiled.matcher(canonical=True)
    c, at = (vocab.encode(s)[0] for s in ("c", "at"))
    with pytest.raises(TokenRejectedError):  # 'c' then 'at' would be written 'cat'
        m.advance(c)
        m.advance(at)
    m.reset()
    assert m.accept_tokens(vocab.encode("cats")) == len(vocab.encode("cats"))
    assert m.is_accepting()
    other = m.fork()
    other.rollback(len(vocab.encode("cats")))
    assert m.is_accepting() and not other.is_accepting() and other.num_tokens == 0
    assert m.validate_tokens([min(vocab.eos_ids)]) == 1 and m.is_accepting()
    with pytest.raises(gm.errors.TextRejectedError, match="byte 3"):
        compiled.matcher(canonical=True, prefix="catx")
    with pytest.raises(CanonicalError, match="after the prefix 'a'"):  # Llama-2 writes a space before any text
        compiled_regex("llama2", "ab+").matcher(canonical=True, prefix="a")
    with pytest.raises(CanonicalError, match="tokenizer"):
        gm.compile(gm.Grammar.from_regex("a+"), Vocabulary([b"a", b"b", None], eos_ids=[2])).matcher(canonical=True)
    with pytest.raises(CanonicalError, match="space"):  # Llama-2 writes a space first: no encoding spells 'cat'
        compiled_regex("llama2", "cat").matcher(canonical=True)
