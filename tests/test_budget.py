"""Token budgets: the matcher API, budgeted masks on real documents, costs against brute force, the cache."""

from __future__ import annotations

import logging
import warnings
from collections import deque
from pathlib import Path

import numpy as np
import pytest
from conftest import get_compiled, get_vocab

import grammask.compiled
from grammask import Grammar, Vocabulary, compile
from grammask.bitmask import allocate_bitmask, bitmask_to_bool
from grammask.budget import BUDGET_KIND, INF
from grammask.budget.runtime import _unique_columns
from grammask.compiler import clear_caches
from grammask.errors import BudgetError, TokenRejectedError

BENCH = Path(__file__).parent.parent / "bench" / "data"
DOCUMENTS = {"json": BENCH / "document.json", "c": BENCH / "sample.c"}

# Left-recursive, so not LL(1): TruncProof's own algorithm does not apply to it.
EXPR = r"""
start: expr
expr: expr "+" term | expr "-" term | term
term: term "*" factor | term "/" factor | factor
factor: NUMBER | "(" expr ")" | "-" factor
NUMBER: /[0-9]+/
WS: / +/
%ignore WS
"""


def _mask(matcher, n: int) -> np.ndarray:
    row = allocate_bitmask(1, n)[0]
    matcher.fill_mask(row)
    return bitmask_to_bool(row, n)


def test_budget_below_the_minimum_raises_and_names_it():
    compiled = get_compiled("json", "smollm2")
    minimum = compiled.matcher().min_tokens_to_finish()
    assert minimum == 2  # a one-token value ("0") and EOS
    with pytest.raises(BudgetError, match=f"at least {minimum} tokens.*max_tokens={minimum} or more"):
        compiled.matcher(max_tokens=minimum - 1)
    m = compiled.matcher(max_tokens=minimum)
    assert (m.max_tokens, m.remaining_budget) == (minimum, minimum)
    assert compiled.matcher().remaining_budget is None


@pytest.mark.parametrize("grammar", ["json", "c"])
def test_replay_within_a_tight_budget(grammar):
    """A document that fits its budget exactly (its tokens and EOS) is never masked, and the counts track it."""
    vocab = get_vocab("smollm2")
    ids = vocab.encode(DOCUMENTS[grammar].read_text())
    budget = len(ids) + 1
    m = get_compiled(grammar, "smollm2").matcher(max_tokens=budget)
    eos = sorted(vocab.eos_ids)
    for i, t in enumerate(ids):
        assert m.remaining_budget == budget - i
        assert 1 <= m.min_tokens_to_finish() <= m.remaining_budget
        assert _mask(m, vocab.n_logits)[t], f"token {i} ({vocab.tokens[t]!r}) masked"
        m.advance(t)
    mask = _mask(m, vocab.n_logits)
    assert m.remaining_budget == 1 and m.min_tokens_to_finish() == 1
    assert mask[eos].all() and mask.sum() == len(eos)  # only EOS fits in the last token
    m.advance(eos[0])
    assert m.min_tokens_to_finish() == 0 and m.remaining_budget == 0


@pytest.mark.parametrize("grammar", ["json", "c"])
def test_a_large_budget_leaves_every_mask_unchanged(grammar):
    vocab = get_vocab("smollm2")
    compiled = get_compiled(grammar, "smollm2")
    ids = vocab.encode(DOCUMENTS[grammar].read_text())
    free, budgeted = compiled.matcher(), compiled.matcher(max_tokens=10 * len(ids))
    for t in ids:
        assert np.array_equal(_mask(free, vocab.n_logits), _mask(budgeted, vocab.n_logits))
        free.advance(t)
        budgeted.advance(t)


def test_nesting_is_cut_off_where_the_closing_tokens_would_not_fit():
    vocab = get_vocab("smollm2")
    compiled = get_compiled("json", "smollm2")
    open_id = vocab.encode("[")[0]
    m = compiled.matcher(max_tokens=10)
    depth = 0
    while _mask(m, vocab.n_logits)[open_id]:
        m.advance(open_id)
        depth += 1
    # "[" * 4 + "]" * 4 + EOS takes 9 tokens; a fifth "[" would need 11
    assert depth == 4 and m.min_tokens_to_finish() == 5
    with pytest.raises(TokenRejectedError, match="budget of 10 tokens"):
        m.advance(open_id)
    assert m.num_tokens == depth and m.min_tokens_to_finish() == 5  # unchanged
    assert _mask(m, vocab.n_logits)[vocab.encode("1")[0]]  # the one spare token may hold a value


def test_fork_shares_the_budget_and_rollback_returns_tokens():
    vocab = get_vocab("smollm2")
    m = get_compiled("json", "smollm2").matcher(max_tokens=12)
    for t in vocab.encode('{"a": '):
        m.advance(t)
    fork = m.fork()
    fork.advance(vocab.encode("1")[0])
    assert fork.remaining_budget == m.remaining_budget - 1
    assert (m.min_tokens_to_finish(), fork.min_tokens_to_finish()) == (3, 2)  # value "}" EOS, then "}" EOS
    used = m.num_tokens
    m.rollback(2)
    assert m.remaining_budget == 12 - used + 2


def test_min_tokens_without_a_budget_and_after_a_dead_end():
    vocab = get_vocab("smollm2")
    compiled = get_compiled("json", "smollm2")
    m = compiled.matcher()
    for t in vocab.encode('{"key": tr'):
        m.advance(t)
    # finish "true" (1 token: "ue"), then "}" and EOS
    assert m.min_tokens_to_finish() == 3
    assert m.max_tokens is None and m.remaining_budget is None


def test_next_token_costs_agree_with_masks_and_min_tokens():
    vocab = get_vocab("smollm2")
    m = get_compiled("json", "smollm2").matcher(max_tokens=9)
    for t in vocab.encode("[[["):
        m.advance(t)
    costs = m.next_token_costs()
    assert np.array_equal(costs >= 0, _mask(m, vocab.n_logits))
    assert costs[vocab.encode("]")[0]] == m.min_tokens_to_finish() - 1
    assert costs.max() <= m.remaining_budget - 1  # every allowed token leaves room for the rest


# ---- costs against brute force on a small vocabulary ------------------------------------------

EXPR_TOKENS = [b"1", b"2", b"12", b"+", b"-", b"*", b"(", b")", b" ", b"(1", b"1)", b"+1", b"))", b"1+", None]


def _true_min(matcher, limit: int) -> int:
    """Fewest tokens (EOS included) to a complete output, by breadth-first search over matcher states."""
    eos = next(iter(matcher.compiled.vocab.eos_ids))
    queue = deque([(matcher, 0)])
    seen = set()
    while queue:
        m, d = queue.popleft()
        if m.is_accepting():
            return d + 1
        if d == limit:
            continue
        for t in np.nonzero(_mask(m, m.compiled.vocab.n_logits))[0].tolist():
            if t == eos:
                continue
            child = m.fork()
            child.advance(t)
            key = (child._lexstate, child._stack)
            if key not in seen:
                seen.add(key)
                queue.append((child, d + 1))
    return INF


def _claim_gaps(compiled, rng: np.random.Generator, states: int, steps: int) -> list[int]:
    """Claimed minus true minimum at ``states`` random states (up to ``steps`` random tokens from the start) from which
    a completion of at most 12 tokens exists; asserts every claim is at least the true minimum, and finite there."""
    n = compiled.vocab.n_logits
    eos = compiled.vocab.eos_ids
    gaps = []
    for _ in range(states):
        m = compiled.matcher()
        for _ in range(int(rng.integers(0, steps))):
            allowed = [t for t in np.nonzero(_mask(m, n))[0].tolist() if t not in eos]
            if not allowed:
                break
            m.advance(int(rng.choice(allowed)))
        claimed = m.min_tokens_to_finish()
        true = _true_min(m, min(claimed, 12))
        if true == INF:
            assert claimed > 12, f"a claim of {claimed} tokens that no completion realises"
            continue
        assert true <= claimed < INF, f"claim {claimed}, true minimum {true}"
        gaps.append(claimed - true)
    return gaps


def test_claimed_minimum_is_never_below_the_true_one_on_a_small_vocabulary():
    vocab = Vocabulary(EXPR_TOKENS, [len(EXPR_TOKENS) - 1], name="expr-toy")
    compiled = compile(Grammar.from_lark(EXPR, name="expr"), vocab, cache=False)
    gaps = _claim_gaps(compiled, np.random.default_rng(7), states=100, steps=12)
    # Multi-terminal tokens ("(1", "1)", "))") are what the witness-based count leaves out: about
    # 0.2 tokens on average, and most claims are exact.
    assert np.mean(gaps) < 0.5 and np.mean(np.array(gaps) == 0) > 0.6


LIST = r"""
start: "[" (NUM ("," NUM)*)? "]"
NUM: /[0-9]+/
%ignore " "
"""
LIST_TOKENS = [b"[", b"]", b",", b"1", b"2", b"12", b" ", b"a", b"1,", b"[]", b" ]", None]
# An empty rule: reductions can push states without a shift.
PAIRS = r"""
start: "{" pairs "}"
pairs: | pair | pairs "," pair
pair: KEY ":" value
value: NUM | "{" pairs "}"
KEY: /"[a-z]"/
NUM: /[0-9]/
"""
PAIRS_TOKENS = [b"{", b"}", b",", b":", b'"a"', b"1", b'"a":', b"{}", b"}}", b'{"a":', b",,", None]


# ---- the contextual lexer (Lark's default for LALR): grammars it lexes otherwise than the basic one -------------

# Keywords are names where no keyword can stand ("let let = print;"); after a name the next lexeme's mode depends
# on the stack ("==" where a statement starts, "=" after "let x"): a branch. Conflict-free, so budgets count
# every completion and a large budget changes no mask.
LETS = r"""
start: stmt+
stmt: "let" NAME "=" expr ";" | "print" expr ";" | NAME "==" expr ";" | "if" expr "then" stmt
expr: atom ("+" atom)* | atom "=>" atom
atom: NAME | NUMBER | "(" expr ")"
NAME: /[a-z_]+/
NUMBER: /[0-9]+/
%ignore /[ \n]+/
"""
LETS_DOCS = ["let let = print;", "print if;", "let then = 1; then == then+(let=>x);", "if if then print if;",
             "let print = let=>print; print print+if;"]
LETS_TOKENS = [b"let", b"print", b"if", b"then", b" ", b"x", b"=", b"==", b";", b"1", b"+", b"=>", b"le", b"t",
               b"t=", b"=1;", b" if", b"(", b")", None]
KEYS_TOKENS = [b"{", b"}", b",", b":", b" ", b"true", b"null", b"a", b"1", b"{true", b"true:", b"tr", b"ue", b"-",
               None]
SPLIT_TOKENS = [b"p", b"q", b"k", b"x", b"xx", b"xxx", b" ", b"kx", b"pk", b"kxx", None]
QUOTES_TOKENS = [b"a", b"b", b"'", b"''", b"'''", b"x", b" ", b"'x'", b"''x", None]
# A terminal that costs more in one mode than in another: after "pk" both XX and Y compete, so Y Y takes a
# separator ("x", " ", "x"); after "qk" only Y does ("xx" is Y Y in one token). A count that took Y's cheaper
# mode for both would promise "pk" "x" "x" in four tokens, EOS included.
MODES = r"""
start: "p" "k" (XX "z" "z" "z" "z" | Y Y) | "q" "k" Y Y
XX: "xx"
Y: "x"
%ignore " "
"""
MODES_DOCS = ["pkx x", "qkxx", "pkxxzzzz", "q k x x"]
MODES_TOKENS = [b"p", b"q", b"k", b"x", b"xx", b"z", b" ", b"pk", None]
CONTEXTUAL = ("lets", "keys", "split", "quotes", "modes")


def contextual_source(name: str) -> str:
    """The text of a small grammar the contextual lexer lexes otherwise than the basic one."""
    from test_contextual import KEYS, QUOTES, SPLIT

    return {"lets": LETS, "keys": KEYS, "split": SPLIT, "quotes": QUOTES, "modes": MODES}[name]


def lark_judge(source: str, lexer: str = "contextual"):
    """``text -> bool``: whether Lark (``parser="lalr"``, the ``lexer`` given) parses ``text``."""
    from lark import Lark
    from lark.exceptions import LarkError

    parser = Lark(source, parser="lalr", lexer=lexer)

    def accepts(text: str) -> bool:
        try:
            parser.parse(text)
        except LarkError:
            return False
        return True

    return accepts


SMALL_CASES = {
    "expr": (EXPR, EXPR_TOKENS), "list": (LIST, LIST_TOKENS), "empty-rule": (PAIRS, PAIRS_TOKENS),
    "lets": ("lets", LETS_TOKENS), "keys": ("keys", KEYS_TOKENS), "split": ("split", SPLIT_TOKENS),
    "quotes": ("quotes", QUOTES_TOKENS), "modes": ("modes", MODES_TOKENS),
}


@pytest.mark.parametrize("case", SMALL_CASES)
def test_every_path_of_a_small_vocabulary_finishes_within_its_budget(case):
    """Exhaustively: every reachable state has a non-empty mask, ``advance`` agrees with it, every path ends
    with EOS within the budget, and Lark (``parser="lalr"``, its default contextual lexer) parses the text
    wherever EOS is allowed. The contextual lexer lexes the last five grammars otherwise than the basic one."""
    source, tokens = SMALL_CASES[case]
    if case in CONTEXTUAL:
        source = contextual_source(source)
    vocab = Vocabulary(tokens, [len(tokens) - 1], name="toy")
    compiled = compile(Grammar.from_lark(source), vocab, cache=False)
    assert compiled._engine.lexer.contextual == (case in CONTEXTUAL)
    _every_path(compiled, lark_judge(source), budgets=7)


def _every_path(compiled, judge, budgets: int) -> None:
    """Every path of ``compiled``'s (small) vocabulary under each budget from the minimum on (``budgets`` of them):
    see :func:`test_every_path_of_a_small_vocabulary_finishes_within_its_budget`."""
    tokens = compiled.vocab.tokens
    eos = len(tokens) - 1
    minimum = compiled.matcher().min_tokens_to_finish()
    assert minimum < INF
    for budget in range(minimum, minimum + budgets):
        seen = set()
        todo = [(compiled.matcher(max_tokens=budget), b"")]
        while todo:
            m, text = todo.pop()
            mask = _mask(m, len(tokens))
            assert mask.any(), f"empty mask with budget {budget} after {text!r}"
            assert m.num_tokens + m.min_tokens_to_finish() <= budget
            for t in range(len(tokens) - 1):
                child = m.fork()
                if not mask[t]:
                    with pytest.raises(TokenRejectedError):
                        child.advance(t)
                    continue
                child.advance(t)
                key = (child._lexstate, child._stack, child.num_tokens)
                if key not in seen:
                    seen.add(key)
                    todo.append((child, text + tokens[t]))
            assert mask[eos] == m.is_accepting()
            assert not mask[eos] or judge(text.decode()), text


# ---- Lark's backing up (rule 6 of the lexing rule), and lexemes banned at the end of input ------------------------

# A lexeme may not end the input: after "a" only A may stand and its lookahead needs a "y" or a " " after it, though
# the parser may end there; "b" "x" ends the input as AB (the lexer that lexes "x" after "b"). A separator (" ") ends "ax" at the end. In test_contextual's
# EOF_BAN (only "y" may follow A) none can: no completion is counted through A at all (its every lexeme is banned at
# the end, so the terminal costs INF), and budgets mask "a".
EOF_BAN_SEP = r"""
start: "a" A Y? | "b" AB
A: /x(?=[y ])/
AB: /x[a-xz]*/
Y: "y"
%ignore " "
"""
EOF_BAN_TOKENS = [b"a", b"b", b"x", b"y", b"xy", b" ", b"z", b"ax", b"x ", None]
DASH_TOKENS = [b"k", b" ", b"ab", b"a", b"-", b"1", b"!", b";", b"m", b"#", b"x", b"\n", b" #", b"-1", b"ab-", b"1!",
               None]
PARTED_TOKENS = [b"a", b"b", b":", b"f", b"for", b"fo", b"r", b"x", b'"', b";", b" ", b":f", b'"x"', b"r;", None]
# After "I" only a NAME may stand: "ab-1" runs on as a LONG, which the parser never takes there, so every token that
# leaves it pending is allowed only by the reading where it dies (NAME "-" NUM): costed by that reading alone.
DYING = r"""
start: s+
s: "K" NAME ";" | "J" LONG ";" | "I" NAME "-" NUM ";"
NAME: /[a-z]+/
NUM: /[0-9]+/
LONG: /[a-z]+-[0-9]+!/
%ignore " "
"""
DYING_TOKENS = [b"I", b"J", b"K", b" ", b"ab", b"a", b"-", b"1", b"-1", b"!", b";", b"1;", b"b-", b"1!", None]
FALLBACK_CASES = {
    "dying": ("dying", "basic", DYING_TOKENS), "dying-contextual": ("dying", "contextual", DYING_TOKENS),
    "dash": ("dash", "contextual", DASH_TOKENS), "dash-basic": ("dash", "basic", DASH_TOKENS),
    "parted": ("parted", "contextual", PARTED_TOKENS), "eof-ban": ("eof-ban", "contextual", EOF_BAN_TOKENS),
    "eof-ban-sep": ("eof-ban-sep", "contextual", EOF_BAN_TOKENS),
}


def _fallback_source(name: str) -> str:
    from test_contextual import EOF_BAN
    from test_contextual_fallback import DASH, PARTED

    return {"dash": DASH, "parted": PARTED, "eof-ban": EOF_BAN, "eof-ban-sep": EOF_BAN_SEP, "dying": DYING}[name]


def _fallback_compiled(case: str):
    name, lexer, tokens = FALLBACK_CASES[case]
    vocab = Vocabulary(tokens, [len(tokens) - 1], name="toy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile(Grammar.from_lark(_fallback_source(name), lexer=lexer), vocab, cache=False)
    lexer_ = compiled._engine.lexer
    if name.startswith("eof-ban"):
        assert lexer_.ban is not None and lexer_.ban[:, 256].any()
    else:
        assert lexer_.alt is not None and (lexer_.part_row is not None) == (name == "parted")
    return compiled


@pytest.mark.parametrize("case", FALLBACK_CASES)
def test_every_path_finishes_within_its_budget_where_the_lexer_backs_up(case):
    """As above, for grammars whose lexer backs up as Lark's does (under both lexers, with a parting state) and ones
    with a lexeme banned at the end of input: budgets were refused for them before."""
    name, lexer, _ = FALLBACK_CASES[case]
    _every_path(_fallback_compiled(case), lark_judge(_fallback_source(name), lexer=lexer), budgets=6)


@pytest.mark.parametrize("case", [c for c in FALLBACK_CASES if c != "eof-ban"])  # there A's claims are INF
def test_claimed_minimum_is_never_below_the_true_one_where_the_lexer_backs_up(case):
    gaps = _claim_gaps(_fallback_compiled(case), np.random.default_rng(5), states=60, steps=10)
    assert gaps and np.mean(gaps) < 1.5


def test_a_token_allowed_only_where_its_long_lexeme_dies_is_costed_by_that_reading():
    compiled = _fallback_compiled("dying")
    m = compiled.matcher(max_tokens=7)
    for t in (b"I", b"ab", b"-"):
        m.advance(DYING_TOKENS.index(t))
    assert compiled._engine.lexer.alt[m._lexstate] >= 0  # "ab-" pending: a LONG, or NAME "-"
    # " " ends it (a digit would run on as the LONG), then "1" ";" EOS: the count never runs on
    assert m.min_tokens_to_finish() == 4
    m.advance(DYING_TOKENS.index(b"1"))
    # ";" ends the long lexeme "ab-1": NAME "-" NUM ";" are fed, then EOS
    assert m.min_tokens_to_finish() == 2 and _mask(m, len(DYING_TOKENS))[DYING_TOKENS.index(b";")]


def test_a_lexeme_banned_at_the_end_needs_a_separator_there():
    compiled = _fallback_compiled("eof-ban-sep")
    m = compiled.matcher()
    for t in (b"a", b"x"):
        m.advance(compiled.vocab.tokens.index(t))
    assert not m.is_accepting() and m.min_tokens_to_finish() == 2  # " " then EOS ("y" then EOS too)
    banned = _fallback_compiled("eof-ban")
    assert banned.matcher().min_tokens_to_finish() == 3  # "b" "x" EOS
    assert not _mask(banned.matcher(max_tokens=20), len(EOF_BAN_TOKENS))[0]  # "a" A: no completion counted


@pytest.mark.parametrize("name", CONTEXTUAL)
def test_claimed_minimum_is_never_below_the_true_one_under_the_contextual_lexer(name):
    tokens = dict(zip(CONTEXTUAL, (LETS_TOKENS, KEYS_TOKENS, SPLIT_TOKENS, QUOTES_TOKENS, MODES_TOKENS)))[name]
    vocab = Vocabulary(tokens, [len(tokens) - 1], name="toy")
    compiled = _contextual(contextual_source(name), vocab)
    gaps = _claim_gaps(compiled, np.random.default_rng(3), states=60, steps=10)
    # Multi-terminal tokens ("t=", "=1;") are what the witness-based count leaves out, as under the basic lexer
    # (the same states' claims there: 1.47, 0.02, 0.55, 0.33 tokens above the true minimum on average).
    assert np.mean(gaps) < 1.5


def _contextual(source: str, vocab: Vocabulary):
    """``source`` compiled under the contextual lexer, which must lex it otherwise than the basic one."""
    compiled = compile(Grammar.from_lark(source, lexer="contextual"), vocab, cache=False)
    assert compiled._engine.lexer.contextual
    return compiled


def _sampled_documents(source: str, count: int, seed: int) -> list[str]:
    """``count`` ASCII sentences of ``source`` drawn at random (that Lark's contextual lexer and parser accept)."""
    import random

    from grammask.sampler import SentenceSampler

    sampler = SentenceSampler(Grammar.from_lark(source, lexer="contextual"), max_depth=7)
    rng = random.Random(seed)
    judge = lark_judge(source)
    docs = []
    while len(docs) < count:
        doc = sampler.sample(rng)
        if doc.isascii():
            assert judge(doc), doc
            docs.append(doc)
    return docs


@pytest.mark.parametrize("name", CONTEXTUAL)
def test_a_large_budget_leaves_every_mask_unchanged_under_the_contextual_lexer(name):
    """Real tokens (SmolLM2) on documents only the contextual lexer accepts and on sampled ones: with a budget far
    above their length, every mask equals the unbudgeted one."""
    from test_contextual import SMALL

    vocab = get_vocab("smollm2")
    source = contextual_source(name)
    compiled = _contextual(source, vocab)
    docs = {"lets": LETS_DOCS, "modes": MODES_DOCS}.get(name) or SMALL[name][1]
    docs = docs + _sampled_documents(source, 6, seed=1)
    for doc in docs:
        ids = vocab.encode(doc)
        free, budgeted = compiled.matcher(), compiled.matcher(max_tokens=10 * len(ids) + 10)
        for t in ids:
            assert np.array_equal(_mask(free, vocab.n_logits), _mask(budgeted, vocab.n_logits)), doc
            free.advance(t)
            budgeted.advance(t)
        assert budgeted.is_accepting()


def test_left_recursive_grammar_costs():
    vocab = Vocabulary(EXPR_TOKENS, [len(EXPR_TOKENS) - 1], name="expr-toy")
    compiled = compile(Grammar.from_lark(EXPR, name="expr"), vocab, cache=False)
    m = compiled.matcher()
    # Each completion is single-byte tokens and EOS: "1", then one ")" per open parenthesis.
    for text, expected in [(b"", 2), (b"(", 3), (b"((", 4), (b"1+", 2), (b"1+2*(", 3), (b"12", 1), (b"(1+(", 4)]:
        m.reset()
        for byte in text:
            m.advance(EXPR_TOKENS.index(bytes([byte])))
        assert m.min_tokens_to_finish() == expected, text


# ---- the disk cache -------------------------------------------------------------------------


def test_budget_tables_are_cached_beside_the_compiled_grammar(tmp_path, monkeypatch, caplog):
    vocab = get_vocab("smollm2")
    grammar = Grammar.from_lark(EXPR, name="expr")
    clear_caches()
    first = compile(grammar, vocab, cache=tmp_path)
    minimum = first.matcher(max_tokens=50).min_tokens_to_finish()
    compiled_file, budget_file = sorted(tmp_path.iterdir(), key=lambda f: len(f.name))
    assert budget_file.name == compiled_file.name.replace(".npz", f".{BUDGET_KIND}.npz")

    clear_caches()

    def no_build(compiled):
        raise AssertionError("the budget tables should have come from the cache")

    monkeypatch.setattr(grammask.compiled, "build_budget_tables", no_build)
    again = compile(grammar, vocab, cache=tmp_path)
    assert again.matcher(max_tokens=50).min_tokens_to_finish() == minimum
    assert np.array_equal(again._budget_runtime().tables.lexical.lex_cost, first._budget_runtime().tables.lexical.lex_cost)

    monkeypatch.undo()
    budget_file.write_bytes(budget_file.read_bytes()[:100])
    clear_caches()
    with caplog.at_level(logging.WARNING, logger="grammask"):
        rebuilt = compile(grammar, vocab, cache=tmp_path)
        assert rebuilt.matcher(max_tokens=50).min_tokens_to_finish() == minimum
    assert "rebuilding" in caplog.text
    clear_caches()


def test_unique_columns_is_numpys_unique_over_columns():
    """The token groups' key pairs: the same keys and inverse as ``np.unique(axis=1)``, negative widths included."""
    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 5000):
        first, second = rng.integers(-3, 40, n), rng.integers(-9, 9, n)
        keys, inverse = _unique_columns(first, second)
        expected, expected_inverse = np.unique(np.stack([first, second]), axis=1, return_inverse=True)
        assert np.array_equal(keys, expected) and np.array_equal(inverse, expected_inverse.ravel())

