"""Token budgets on grammars users bring from Lark, as ``Grammar.from_lark`` makes them by default: the contextual
lexer, backing up as Lark's lexer does (rule 6 of the lexing rule), and an ``Indenter`` for Python. SynCode's Go,
Java, SQL and Python, and Lark's python.lark.

Budgeted matchers start after a prefix (some end where a lexeme runs on past a complete match: a fallback is
pending) and are driven to the end by a chooser that takes random tokens, half the time one that leaves a fallback
pending where there is one. At every budget tried: no mask is ever empty, every run ends with EOS within the budget
in text Lark accepts, and after each step the claimed minimum (``min_tokens_to_finish``) is realised by always
taking the cheapest token: each lowers the claim by at least one, and the walk ends with EOS, in text Lark accepts.
The default run is CI-sized (SmolLM2); ``-m slow`` runs more prefixes and budgets, and Llama-3.
"""

from __future__ import annotations

import functools
import warnings
import zlib
from pathlib import Path

import lark
import numpy as np
import pytest
from conftest import get_vocab, skip_module_without_syncode
from lark.exceptions import LarkError
from lark.indenter import PythonIndenter

from grammask import Grammar, compile
from grammask.bitmask import allocate_bitmask, bitmask_to_bool
from grammask.budget import INF

skip_module_without_syncode()
import cases  # bench/: on the path once skip_module_without_syncode has run

# Some end where a fallback is pending ("1e", ".."). Go's expressions are all uncounted (conflicts Lark's rules resolve:
# budgets count no completion through them, so a prefix inside one has no finite claim), so Go's prefixes stop before.
PREFIXES = {
    "go": ["", "package main\n\nfunc f(a int) int {\n\t", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println("],
    "java": ["", "class A { double f() { return 1", "class A { double x = 1"],
    "sql": ["", "SELECT 1e", "SELECT a FROM t WHERE b = 1"],
    "python": ["", "def f(x):\n    return 1", "if x:\n    y = (1,\n", "x = 1e"],
    "python.lark": ["", "def f(x):\n    return 1", "x = ..", "x = 1e"],
}
GRAMMARS = list(PREFIXES)


def _source(name: str) -> tuple[str, object, str]:
    """The grammar text, a fresh postlex (or None) and the start rule."""
    if name == "python.lark":
        return (Path(lark.__file__).parent / "grammars" / "python.lark").read_text(), PythonIndenter(), "file_input"
    text = (cases.shared_dir(cases.SYNCODE_SUBDIR) / f"{name}.lark").read_text()
    return text, cases.SynCodePythonIndenter() if name == "python" else None, "start"


@functools.cache
def _compiled(name: str, vocab_name: str):
    text, postlex, start = _source(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the conflicts Lark's rules resolve, fallbacks not kept, uncounted rules
        grammar = Grammar.from_lark(text, postlex=postlex, start=start, name=name)
        compiled = compile(grammar, get_vocab(vocab_name))
    lexer = compiled._engine.lexer
    assert lexer.contextual and lexer.alt is not None  # the two things budgets refused before
    return compiled


@functools.cache
def _judge(name: str):
    """``text -> bool``: Lark (``parser="lalr"``, its contextual lexer, the same postlex) parses ``text``. grammask
    does not check the first line's indentation (documented), so Lark sees that line without it.

    For SynCode's SQL an unbudgeted matcher judges instead: grammask accepts ``SELECT a FROM t window allas``, which
    Lark rejects (expecting ``AS``; main too, with or without budgets), and random runs reach such text."""
    if name == "sql":
        compiled = _compiled(name, "smollm2")

        def grammask_accepts(doc: str) -> bool:
            m = compiled.matcher()
            return all(m.accept_token(t) for t in compiled.vocab.encode(doc)) and m.is_accepting()

        return grammask_accepts
    text, postlex, start = _source(name)
    parser = lark.Lark(text, parser="lalr", lexer="contextual", postlex=postlex, start=start)

    def accepts(doc: str) -> bool:
        if postlex is not None:
            head, sep, rest = doc.partition("\n")
            doc = head.lstrip(" \t\x0c") + sep + rest
        try:
            parser.parse(doc)
        except LarkError:
            return False
        return True

    return accepts


@functools.cache
def _skipped(name: str, vocab_name: str) -> np.ndarray:
    """Tokens the choosers never take: under an indenter, those with a CR (a newline lexeme whose only line break is a
    CR has mask and advance disagreeing there, an engine corner budgets do not touch). Java's ``character_literal``
    holds a CR, so elsewhere none is skipped."""
    vocab = get_vocab(vocab_name)
    out = np.zeros(vocab.n_logits, dtype=bool)
    if _source(name)[1] is not None:
        out[[i for i, t in enumerate(vocab.tokens) if t and b"\r" in t]] = True
    return out


def _falling(m, allowed: np.ndarray) -> np.ndarray:
    """The allowed tokens after which a fallback is pending (from the budget's token groups of the lexer state)."""
    rt = m.compiled._budget_runtime()
    groups = rt.groups(m._lexstate)
    alt = m.compiled._engine.lexer.alt
    out = np.zeros(len(allowed), dtype=bool)
    for g in np.flatnonzero(alt[groups.ends] >= 0).tolist():
        for w in range(groups.tok_ptr[g], groups.tok_ptr[g + 1]):
            bits = int(np.uint32(groups.tok_bits[w]))
            base = int(groups.tok_words[w]) * 32
            out[[base + b for b in range(32) if bits >> b & 1 and base + b < len(out)]] = True
    return out & allowed


def _choose(m, allowed: np.ndarray, rng: np.random.Generator) -> int:
    falling = _falling(m, allowed)
    pick = falling if falling.any() and rng.random() < 0.5 else allowed
    return int(rng.choice(np.flatnonzero(pick)))


def _realise(m, claim: int, head: bytes, judge, skipped: np.ndarray) -> None:
    """Follow ``claim`` from a fork of ``m`` (after the text ``head``), always the cheapest token: each lowers it by
    at least one, and the walk ends with EOS in at most ``claim`` tokens, in text ``judge`` accepts."""
    m = m.fork()
    vocab = m.compiled.vocab
    tokens: list[int] = []
    while not m.is_terminated():
        costs = m.next_token_costs()
        costs[skipped] = -1
        allowed = np.flatnonzero(costs >= 0)
        assert len(allowed), f"no token left after {vocab.decode(tokens)!r}"
        token = int(allowed[np.argmin(costs[allowed])])
        assert costs[token] <= claim - 1, f"after {vocab.decode(tokens)!r} the cheapest token costs {costs[token]}"
        claim = int(costs[token])
        m.advance(token)
        tokens.append(token)
    assert tokens[-1] in vocab.eos_ids
    text = (head + vocab.decode(tokens[:-1])).decode("utf-8")
    assert judge(text), f"Lark rejects the claimed walk's {text!r}"


def _runs(name: str, vocab_name: str, offsets, runs: int, realise_every: int, seed: int = 0) -> None:
    compiled = _compiled(name, vocab_name)
    vocab = compiled.vocab
    judge = _judge(name)
    skipped = _skipped(name, vocab_name)
    rng = np.random.default_rng(zlib.crc32(f"{name} {vocab_name} {seed}".encode()))
    row = allocate_bitmask(1, vocab.n_logits)[0]
    for prefix in PREFIXES[name]:
        minimum = compiled.matcher(prefix=prefix).min_tokens_to_finish()
        assert minimum < INF, prefix
        for offset in offsets:
            for _ in range(runs):
                budget = minimum + offset
                m = compiled.matcher(prefix=prefix, max_tokens=budget)
                tokens: list[int] = []
                while not m.is_terminated():
                    m.fill_mask(row)
                    allowed = bitmask_to_bool(row, vocab.n_logits)
                    allowed[skipped] = False
                    where = f"{name}: after {prefix!r} + {vocab.decode(tokens)!r} with budget {budget}"
                    assert allowed.any(), f"empty mask {where}"
                    claim = m.min_tokens_to_finish()
                    assert m.num_tokens + claim <= budget, where
                    if len(tokens) % realise_every == 0:
                        _realise(m, claim, prefix.encode() + vocab.decode(tokens), judge, skipped)
                    tokens.append(_choose(m, allowed, rng))
                    m.advance(tokens[-1])
                assert len(tokens) <= budget and tokens[-1] in vocab.eos_ids
                text = prefix + vocab.decode(tokens[:-1]).decode("utf-8")
                assert judge(text), f"{name}: Lark rejects {text!r} (budget {budget})"


@pytest.mark.parametrize("name", GRAMMARS)
def test_budgets_on_lark_grammars(name):
    _runs(name, "smollm2", offsets=(0, 4, 15), runs=1, realise_every=3)


@pytest.mark.slow
@pytest.mark.parametrize("vocab_name", ["smollm2", "llama3"])
@pytest.mark.parametrize("name", GRAMMARS)
def test_budgets_on_lark_grammars_full(name, vocab_name):
    _runs(name, vocab_name, offsets=(0, 1, 2, 5, 10, 20, 40), runs=3, realise_every=1)
