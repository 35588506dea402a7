"""The budget guarantee, attacked, and the soundness of the costs behind it.

Adversarial runs: at every budget from the grammar's minimum to the minimum + 30, matchers are
driven to the end by random logits and by a "greedy for length" chooser (always a token after
which the most tokens remain needed). Every run must end with EOS within the budget, in text
that an independent parser accepts, and no mask may ever be empty.

Soundness: from random states, the claimed minimum (``min_tokens_to_finish``) is followed token
by token; each step must find a token that lowers the claim by at least one, so the walk ends in
a complete output of at most the claimed length. How far a claim is from the walk it promises,
and from a greedy shortest walk, is printed (``pytest -s``).

The default run is CI-sized; ``pytest -m slow`` runs the full size of the issue's bars (the
adversarial runs at every budget, 50 runs per budget and chooser; at least 1,000 random states).
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import warnings
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from conftest import get_vocab
from lark import Lark
from lark.exceptions import LarkError
from test_budget import CONTEXTUAL as SMALL_CONTEXTUAL
from test_budget import EXPR, contextual_source, lark_judge

from grammask import Grammar, compile
from grammask.bitmask import allocate_bitmask, bitmask_to_bool
from grammask.budget import INF
from grammask.grammar.builtin import builtin_source

JME = Path(__file__).parent.parent.parent / "shared" / "data" / "json-mode-eval"
SCHEMAS = [f"JME_{i}" for i in range(20)]
GRAMMARS = ["json", "c", "expr", *SCHEMAS]
VOCAB = "smollm2"


def _schema(name: str) -> dict:
    path = JME / f"{name}.json"
    if not path.exists():
        pytest.skip(f"JSON-Mode-Eval data not found at {path}")
    return json.loads(path.read_text())


def _grammar(name: str) -> Grammar:
    if name == "expr":
        return Grammar.from_lark(EXPR, name="expr")
    if name.startswith("JME_"):
        schema = _schema(name)["schema"]
        if hasattr(Grammar, "from_json_schema"):
            return Grammar.from_json_schema(schema, name=name)
        from grammask.grammar.json_schema import grammar_from_json_schema

        return grammar_from_json_schema(schema, name=name)
    return Grammar.builtin(name)


@functools.cache
def _compiled(name: str):
    return compile(_grammar(name), get_vocab(VOCAB), cache=False)


@functools.cache
def _checker(name: str):
    """``text -> bool``: an independent judge of complete outputs."""
    if name.startswith("JME_"):
        validator = jsonschema.Draft202012Validator(_schema(name)["schema"])
        return lambda text: validator.is_valid(json.loads(text))
    return lark_judge(EXPR if name == "expr" else builtin_source(name), lexer="basic")


def _random_logits(matcher, allowed: np.ndarray, rng: np.random.Generator, avoid: np.ndarray | None = None) -> int:
    pick = allowed if avoid is None else allowed & ~avoid
    logits = np.where(pick, rng.standard_normal(len(allowed)), -np.inf)
    return int(np.argmax(logits))


def _greedy_for_length(matcher, allowed: np.ndarray, rng: np.random.Generator, avoid: np.ndarray | None = None) -> int:
    costs = matcher.next_token_costs()
    assert np.array_equal(costs >= 0, allowed), "next_token_costs disagrees with the mask"
    if avoid is not None:
        costs[avoid] = -1
    return int(rng.choice(np.flatnonzero(costs == costs.max())))


CHOOSERS = {"random logits": _random_logits, "greedy for length": _greedy_for_length}


def _drive(compiled, budget: int, choose, rng: np.random.Generator, judge, prefix: str = "",
           avoid: np.ndarray | None = None) -> None:
    """One run after ``prefix`` to the end under ``budget``, tokens chosen by ``choose`` (never one of ``avoid``)."""
    vocab = compiled.vocab
    name = compiled.grammar.name
    m = compiled.matcher(max_tokens=budget, prefix=prefix)
    row = allocate_bitmask(1, vocab.n_logits)[0]
    tokens = []
    while not m.is_terminated():
        m.fill_mask(row)
        allowed = bitmask_to_bool(row, vocab.n_logits)
        assert allowed.any(), f"{name}: empty mask after {prefix!r} + {vocab.decode(tokens)!r} with budget {budget}"
        token = choose(m, allowed, rng, avoid)
        m.advance(token)
        tokens.append(token)
    assert len(tokens) <= budget
    assert tokens[-1] in vocab.eos_ids
    text = prefix + vocab.decode(tokens[:-1]).decode("utf-8")
    assert judge(text), f"{name}: the judge rejects {text!r} (budget {budget})"


def longest_walk(compiled, prefix: str = "", slack: int = 0) -> str:
    """The text after ``prefix`` of a run at ``slack`` tokens over the minimum that always takes a token after
    which the most tokens remain needed; asserts it ends with EOS within the budget."""
    budget = compiled.matcher(prefix=prefix).min_tokens_to_finish() + slack
    m = compiled.matcher(prefix=prefix, max_tokens=budget)
    tokens = []
    while not m.is_terminated():
        costs = m.next_token_costs()
        assert (costs >= 0).any(), f"no token allowed after {prefix!r} + {compiled.vocab.decode(tokens)!r}"
        tokens.append(int(np.flatnonzero(costs == costs.max())[0]))
        m.advance(tokens[-1])
    assert len(tokens) <= budget and tokens[-1] in compiled.vocab.eos_ids
    return compiled.vocab.decode(tokens[:-1]).decode("utf-8")


def _adversarial(name: str, offsets, runs: int) -> None:
    minimum = _compiled(name).matcher().min_tokens_to_finish()
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    for offset in offsets:
        for choose in CHOOSERS.values():
            for _ in range(runs):
                _drive(_compiled(name), minimum + offset, choose, rng, _checker(name))


@pytest.mark.parametrize("name", ["json", "c", "expr", *SCHEMAS[:3]])
def test_guarantee_ci(name):
    _adversarial(name, offsets=(0, 1, 2, 5, 13, 30), runs=2)


@pytest.mark.slow
@pytest.mark.parametrize("name", GRAMMARS)
def test_guarantee_full(name):
    _adversarial(name, offsets=range(31), runs=50)


# ---- soundness of the claimed minimum -------------------------------------------------------


def _random_state(name: str, rng: np.random.Generator):
    compiled = _compiled(name)
    n = compiled.vocab.n_logits
    eos = compiled.vocab.eos_ids
    m = compiled.matcher()
    row = allocate_bitmask(1, n)[0]
    for _ in range(int(rng.integers(0, 40))):
        m.fill_mask(row)
        allowed = bitmask_to_bool(row, n)
        allowed[list(eos)] = False
        if not allowed.any():
            break
        m.advance(int(rng.choice(np.flatnonzero(allowed))))
    return m


def _walk(m, claim: int, choose_step) -> int:
    """Follow the claim from ``m`` (a fork): each token must lower it by at least one. Returns the length."""
    m = m.fork()
    n = 0
    while not m.is_terminated():
        costs = m.next_token_costs()
        lower = np.flatnonzero((costs >= 0) & (costs <= claim - 1))
        assert len(lower), f"no token lowers the claim {claim} (after {n} tokens)"
        token = int(choose_step(lower, costs))
        claim = int(costs[token])
        m.advance(token)
        n += 1
    return n


def _soundness(states_per_grammar: dict[str, int]) -> dict[str, tuple[int, float, float, float]]:
    report = {}
    rng = np.random.default_rng(11)
    for name, count in states_per_grammar.items():
        exact, gap, shortest_gap = 0, 0, 0
        for _ in range(count):
            m = _random_state(name, rng)
            claim = m.min_tokens_to_finish()
            # Always the costliest token below the claim: the walk the claim describes.
            length = _walk(m, claim, lambda lower, costs: lower[np.argmax(costs[lower])])
            shortest = _walk(m, claim, lambda lower, costs: lower[np.argmin(costs[lower])])
            assert shortest <= length <= claim
            exact += length == claim
            gap += claim - length
            shortest_gap += claim - shortest
        report[name] = (count, exact / count, gap / count, shortest_gap / count)
    print("\nclaimed minimum vs realised completions (states, share realised at exactly the claim, "
          "mean tokens saved by the claimed walk, by a greedy shortest walk):")
    for name, (count, share, g, s) in report.items():
        print(f"  {name:8s} {count:5d} states  exact {share:6.1%}  claim - walk {g:.3f}  claim - shortest {s:.3f}")
    return report


def test_soundness_ci():
    report = _soundness({"json": 30, "c": 30, "expr": 30, "JME_0": 10})
    assert all(share > 0.5 for _, share, _, _ in report.values())


@pytest.mark.slow
def test_soundness_full():
    counts = {"json": 250, "c": 250, "expr": 200} | {name: 15 for name in SCHEMAS}
    report = _soundness(counts)
    assert sum(c for c, _, _, _ in report.values()) >= 1000


# ---- grammars with a postlex: the built-in Python and Go, Lark's python.lark ------------------------
#
# Matchers start after a prefix too (the code evaluation starts them after the prompt). Judges: Lark with
# the built-in postlex (Python: ``CPythonIndenter``; python.lark: Lark's own ``PythonIndenter``) and, for
# Go, the postlex oracle (grammask's lexing rule, ``GoSemicolons`` itself, Lark's parser); ``gofmt -e``,
# where Go is installed, is asked too and its disagreements printed (random code finds places where the
# grammar is wider than Go's parser: those are the grammar's, not the budget's). Two corners of the engine that budgets do not touch are kept out: grammask does
# not check the first line's indentation (documented), so the judges see that line without it; and a
# newline lexeme whose only line break is a CR has mask and advance disagreeing, so the choosers skip
# tokens with a CR.

POSTLEX = ["python", "go", "python.lark"]
POSTLEX_PREFIXES = {
    "python": ["", "def f(x):\n", "if x:\n    y = (1,\n", "class A:\n    def g(self):\n        return [",
               "for i in range(3):\n    if i:\n        pass\n"],
    "python.lark": ["", "def f(x):\n", "if x:\n    y = (1,\n", "while x:\n    try:\n        x = {1:"],
    "go": ["", "package main\n", "package main\nfunc f(a int) int {\n\tif a > 1 {\n\t\treturn (",
           "package p\nvar x = []int{1,", "package p\nfunc g() {\n\tfor i := 0; i < 3; i++ {\n"],
}


def _python_lark_grammar() -> Grammar:
    """Lark's python.lark under the basic lexer, backing up as Lark's does (numbers, "...")."""
    from lark.indenter import PythonIndenter

    return Grammar.from_lark(_python_lark_grammar_text(), postlex=PythonIndenter(), start="file_input",
                             lexer="basic", name="python.lark")


@functools.cache
def _postlex_compiled(name: str):
    grammar = _python_lark_grammar() if name == "python.lark" else Grammar.builtin(name)
    return compile(grammar, get_vocab(VOCAB), cache=False)


def _first_line_unindented(text: str) -> str:
    head, sep, rest = text.partition("\n")
    return head.lstrip(" \t\x0c") + sep + rest


@functools.cache
def _postlex_judge(name: str):
    """``text -> bool``: whether the reference accepts ``text`` as a whole program."""
    if name == "python":
        from test_python_grammar import lark_accepts, python_lark

        parser = python_lark()
        return lambda text: lark_accepts(parser, _first_line_unindented(text))
    if name == "python.lark":
        from lark.indenter import PythonIndenter

        parser = Lark(_python_lark_grammar_text(), parser="lalr", lexer="basic", postlex=PythonIndenter(),
                      start="file_input")

        def parses(text: str) -> bool:
            try:
                parser.parse(_first_line_unindented(text))
            except LarkError:
                return False
            return True

        return parses
    from postlex_oracle import PostlexOracle

    from grammask.grammar.builtin.go_semicolons import GoSemicolons

    oracle = PostlexOracle(Grammar.builtin("go"), get_vocab(VOCAB), GoSemicolons())
    gofmt = shutil.which("gofmt")

    def go_accepts(text: str) -> bool:
        ok = oracle.accepts(text.encode())
        if ok and gofmt is not None:  # where the grammar is wider than Go's parser (random code): shown, not failed
            found = subprocess.run([gofmt, "-e"], check=False, input=text.encode(), capture_output=True)
            if found.returncode:
                print(f"\n  gofmt -e disagrees with the grammar on {text!r}: {found.stderr.decode()[:120]!r}")
        return ok

    return go_accepts


def _python_lark_grammar_text() -> str:
    import lark

    return (Path(lark.__file__).parent / "grammars" / "python.lark").read_text()


@functools.cache
def _carriage_returns(name: str) -> np.ndarray:
    vocab = get_vocab(VOCAB)
    out = np.zeros(vocab.n_logits, dtype=bool)
    out[[i for i, t in enumerate(vocab.tokens) if t and b"\r" in t]] = True
    return out


def _adversarial_prefixes(compiled, prefixes: list[str], judge, offsets, runs: int,
                          avoid: np.ndarray | None = None) -> None:
    """Runs after each prefix at the minimum plus each offset, by each chooser (never a token of ``avoid``)."""
    rng = np.random.default_rng(abs(hash(compiled.grammar.name)) % 2**32)
    for prefix in prefixes:
        minimum = compiled.matcher(prefix=prefix).min_tokens_to_finish()
        for offset in offsets:
            for choose in CHOOSERS.values():
                for _ in range(runs):
                    _drive(compiled, minimum + offset, choose, rng, judge, prefix, avoid)


def _adversarial_postlex(name: str, offsets, runs: int) -> None:
    _adversarial_prefixes(_postlex_compiled(name), POSTLEX_PREFIXES[name], _postlex_judge(name), offsets, runs,
                          _carriage_returns(name))


@pytest.mark.parametrize("name", POSTLEX)
def test_guarantee_postlex_ci(name):
    _adversarial_postlex(name, offsets=(0, 1, 3, 8, 20), runs=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", POSTLEX)
def test_guarantee_postlex_full(name):
    _adversarial_postlex(name, offsets=range(31), runs=2)


def _prefix_soundness(compiled, prefixes: list[str], count: int, rng: np.random.Generator,
                      avoid: np.ndarray | None = None) -> tuple[float, float]:
    """From ``count`` random states (after a random one of ``prefixes``, then random tokens, never one of ``avoid``):
    every finite claim is followed by a walk of at most its length. Returns the share realised exactly and the mean
    gap (a state budgets cannot finish from, a dead end or text whose completions need a dropped reduction, counts
    as neither)."""
    n = compiled.vocab.n_logits
    eos = list(compiled.vocab.eos_ids)
    row = allocate_bitmask(1, n)[0]
    exact, gap = 0, 0
    for _ in range(count):
        m = compiled.matcher(prefix=prefixes[int(rng.integers(len(prefixes)))])
        for _ in range(int(rng.integers(0, 25))):
            m.fill_mask(row)
            allowed = bitmask_to_bool(row, n)
            if avoid is not None:
                allowed &= ~avoid
            allowed[eos] = False
            if not allowed.any():
                break
            m.advance(int(rng.choice(np.flatnonzero(allowed))))
        claim = m.min_tokens_to_finish()
        if claim >= INF:
            continue
        length = _walk(m, claim, lambda lower, costs: lower[np.argmax(costs[lower])])
        assert length <= claim
        exact += length == claim
        gap += claim - length
    print(f"\n  {compiled.grammar.name}: {count} states, exact {exact / count:.1%}, claim - walk {gap / count:.3f}")
    return exact / count, gap / count


def test_soundness_postlex_ci():
    rng = np.random.default_rng(5)
    for name in POSTLEX:
        _prefix_soundness(_postlex_compiled(name), POSTLEX_PREFIXES[name], 8, rng, _carriage_returns(name))


@pytest.mark.slow
def test_soundness_postlex_full():
    rng = np.random.default_rng(6)
    for name in POSTLEX:
        _prefix_soundness(_postlex_compiled(name), POSTLEX_PREFIXES[name], 100, rng, _carriage_returns(name))


# ---- the contextual lexer (Lark's default for LALR) where it lexes otherwise than the basic one ------------------
#
# The small grammars of tests/test_budget.py (keywords that are names elsewhere, a terminal whose separator depends
# on the mode, branches the stack decides, a lookahead the mode bans) and SynCode's Go and Java; the judge is Lark
# with the same contextual lexer. SynCode's Go and Java have conflicts resolved by Lark's rules, so budgets mask the
# text whose every completion needs a dropped reduction, under either lexer (see README: budgets and conflicts).

SYNCODE = Path(__file__).parent.parent.parent / "shared" / "data" / "syncode-grammars"
CONTEXTUAL = [*SMALL_CONTEXTUAL, "syncode-go", "syncode-java"]
CONTEXTUAL_PREFIXES = {
    "syncode-go": ["", "package main\n\nfunc f(a int) int {\n\t", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println("],
    "syncode-java": ["", "public class A {\n    public static int f(int[] a) {\n        return a[", "class A { void f() { g("],
}


def _contextual_text(name: str) -> str:
    if not name.startswith("syncode-"):
        return contextual_source(name)
    path = SYNCODE / f"{name.removeprefix('syncode-')}.lark"
    if not path.exists():
        pytest.skip(f"SynCode's grammars not found at {SYNCODE}")
    return path.read_text()


@functools.cache
def _contextual_compiled(name: str):
    """``name`` under the contextual lexer, backing up as Lark's does (SynCode's Go and Java have places that do)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the conflicts Lark's rules resolve
        grammar = Grammar.from_lark(_contextual_text(name), lexer="contextual", name=name)
        compiled = compile(grammar, get_vocab(VOCAB), cache=False)
    assert compiled._engine.lexer.contextual
    return compiled


def _adversarial_contextual(name: str, offsets, runs: int) -> None:
    _adversarial_prefixes(_contextual_compiled(name), CONTEXTUAL_PREFIXES.get(name, [""]),
                          lark_judge(_contextual_text(name)), offsets, runs)


@pytest.mark.parametrize("name", CONTEXTUAL)
def test_guarantee_contextual_ci(name):
    _adversarial_contextual(name, offsets=(0, 1, 3, 8, 20), runs=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", CONTEXTUAL)
def test_guarantee_contextual_full(name):
    _adversarial_contextual(name, offsets=range(31), runs=10)


def test_soundness_contextual_ci():
    rng = np.random.default_rng(7)
    for name in CONTEXTUAL:
        _prefix_soundness(_contextual_compiled(name), CONTEXTUAL_PREFIXES.get(name, [""]), 6, rng)


@pytest.mark.slow
def test_soundness_contextual_full():
    rng = np.random.default_rng(8)
    for name in CONTEXTUAL:
        _prefix_soundness(_contextual_compiled(name), CONTEXTUAL_PREFIXES.get(name, [""]), 100, rng)
