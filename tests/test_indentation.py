"""Grammars with Lark's ``Indenter`` postlex: Lark's own python.lark, exact masks against an oracle running
Lark's indenter, real standard-library code token by token, and clear errors for bad indenters."""

from __future__ import annotations

import random
from pathlib import Path

import lark
import numpy as np
import pytest
from conftest import get_vocab
from lark.indenter import Indenter, PythonIndenter
from postlex_oracle import PostlexOracle, allowed_mask

from grammask import Compiler, Grammar
from grammask.errors import (
    ConfigurationError,
    GrammarError,
    UndefinedSymbolError,
)

LARK_PYTHON = (Path(lark.__file__).parent / "grammars" / "python.lark").read_text()
STDLIB = Path(random.__file__).parent

SNIPPET = """\
import os


def f(x, *args, **kw):
    '''Doc.'''
    if x:  # a comment
        return [i for i in (1,
                2, 3)]
    elif x is None:
        pass
    else:
\t    y = {
    'a': 1}

    # a comment line
    return y


class A(object):
    def g(self):
        while True:
            break
        return lambda: 0
"""


@pytest.fixture(scope="module")
def python_grammar():
    return Grammar.from_lark(LARK_PYTHON, start="file_input", postlex=PythonIndenter(), lexer="basic")


@pytest.fixture(scope="module")
def compiled(python_grammar):
    return Compiler(get_vocab("smollm2"), cache=False).compile(python_grammar)


def _lark_accepts(text: str) -> bool:
    parser = lark.Lark(LARK_PYTHON, parser="lalr", lexer="basic", postlex=PythonIndenter(), start="file_input")
    try:
        parser.parse(text)
    except (lark.exceptions.LarkError, AssertionError, IndexError):
        return False
    return True


def _accepts_text(compiled, text: str) -> bool:
    m = compiled.matcher()
    for t in compiled.vocab.encode(text):
        if not m.accept_token(t):
            return False
    return m.is_accepting()


def test_from_lark_reads_the_indenter(python_grammar):
    rules = python_grammar.indentation
    assert (rules.newline, rules.indent, rules.dedent, rules.tab_len) == ("_NEWLINE", "_INDENT", "_DEDENT", 8)
    assert rules.open_brackets == ("LPAR", "LSQB", "LBRACE")
    assert python_grammar.declared == ("_INDENT", "_DEDENT")


def test_snippet_token_by_token(compiled):
    assert _lark_accepts(SNIPPET)
    m = compiled.matcher()
    for t in compiled.vocab.encode(SNIPPET):
        assert allowed_mask(m)[t], (t, compiled.vocab.tokens[t])
        m.advance(t)
    assert m.is_accepting()


@pytest.mark.parametrize(
    "text",
    [
        "if x:\n    y\n  z\n",  # dedent to a level not on the stack
        "if x:\ny\n",  # missing indent
        "x\n    y\n",  # unexpected indent
        "f(x,\ny)\n",  # fine: newline inside brackets
        "if x:\n\ty\n        z\n",  # tab = 8 columns: the same level
        "if x:\n    y\n\n\n",
        "x = 1  # c\n",
        "def f():\n    return (1,\n  2)\n",
        "if x:\n    pass\n  # comment at another column\n",
    ],
)
def test_verdicts_agree_with_lark(compiled, text):
    assert _accepts_text(compiled, text) == _lark_accepts(text)


def _compare_with_oracle(grammar, compiled, text: str, n_prefixes: int, seed: int) -> int:
    """Compare masks with the oracle at ``n_prefixes`` random token boundaries of ``text``; returns how many."""
    vocab = compiled.vocab
    oracle = PostlexOracle(grammar, vocab, PythonIndenter())
    ids = vocab.encode(text)
    cuts = sorted(random.Random(seed).sample(range(len(ids)), min(n_prefixes, len(ids))))
    m = compiled.matcher()
    done = 0
    for cut in cuts:
        while done < cut:
            m.advance(ids[done])
            done += 1
        want = oracle.mask(vocab.decode(ids[:done]))
        diff = np.flatnonzero(want != allowed_mask(m))
        shown = [(int(t), vocab.tokens[t] if t < len(vocab.tokens) else None, bool(want[t])) for t in diff[:10]]
        assert not len(diff), (vocab.decode(ids[:done])[-60:], shown)
    return len(cuts)


def test_masks_match_the_oracle(python_grammar, compiled):
    assert _compare_with_oracle(python_grammar, compiled, SNIPPET, 12, seed=7) == 12


@pytest.mark.slow
def test_masks_match_the_oracle_on_stdlib(python_grammar, compiled):
    """1,000 prefixes of real modules (50 from each of 20 small ones Lark parses): 0 mismatches."""
    files = sorted(p for p in STDLIB.glob("*.py") if 2_000 < p.stat().st_size < 6_000)
    total = 0
    for i, path in enumerate(f for f in files if _lark_accepts(f.read_text(errors="replace"))):
        if total >= 1000:
            break
        total += _compare_with_oracle(python_grammar, compiled, path.read_text(errors="replace"), 50, seed=i)
    assert total >= 1000


def test_prefix_ending_inside_indentation(compiled):
    m = compiled.matcher(prefix="def f():\n  ")
    for t in compiled.vocab.encode("  return 1\n"):
        m.advance(t)
    assert m.is_accepting()
    m = compiled.matcher(prefix="def f():\n    x = 1\n  ")
    assert not any(m.accept_token(t) for t in compiled.vocab.encode("y"))


@pytest.mark.parametrize("prefix", ["", "def f(x):\n", "def f(x):\n    if x:\n        y = (1,", "class A:\n  x = 1\n"])
@pytest.mark.parametrize("slack", [0, 4])
def test_budgets_count_indents_and_dedents(compiled, prefix, slack):
    """Under python.lark's lexer, which backs up as Lark's does (numbers, ``...``)."""
    from test_budget_guarantee import longest_walk

    text = prefix + longest_walk(compiled, prefix, slack)
    assert _lark_accepts(text.lstrip(" \t\x0c")), text


def test_bad_indenters():
    class Wrong(Indenter):
        NL_type = "_NL"
        OPEN_PAREN_types = ()
        CLOSE_PAREN_types = ()
        INDENT_type = "_INDENT"
        DEDENT_type = "_DEDENT"
        tab_len = 8

    with pytest.raises(UndefinedSymbolError, match="_NL"):
        Grammar.from_lark(LARK_PYTHON, start="file_input", postlex=Wrong())
    with pytest.raises(ConfigurationError, match="Indenter"):
        Grammar.from_lark(LARK_PYTHON, start="file_input", postlex=object())
    with pytest.raises(GrammarError, match="declare"):
        Grammar.from_lark(LARK_PYTHON, start="file_input")


@pytest.mark.slow
def test_stdlib_modules_token_by_token(compiled):
    """Every small stdlib module Lark itself parses is accepted token by token, EOS at the end."""
    files = sorted(p for p in STDLIB.glob("*.py") if p.stat().st_size < 8_000)
    checked = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if not _lark_accepts(text):
            continue
        assert _accepts_text(compiled, text), path.name
        checked += 1
    assert checked >= 20



class _EndsLikeCPython(PythonIndenter):
    tab_rule = "cpython"


@pytest.fixture(scope="module")
def cpython_end():
    grammar = Grammar.from_lark(LARK_PYTHON, start="file_input", postlex=_EndsLikeCPython(), lexer="basic")
    return Compiler(get_vocab("smollm2"), cache=False).compile(grammar)


@pytest.mark.parametrize(
    ("text", "lark_rule", "cpython_rule"),
    [
        ("x = 1", False, True),  # CPython ends the last line itself
        ("def f():\n    return 1", False, True),
        ("x = 1\n", True, True),
        ("if x:\n    y = 1\n   ", False, True),  # the line after the final newline is not measured
        ("", True, True),
        ("f(1,\n", False, False),
    ],
)
def test_end_of_input_as_lark_or_cpython(compiled, cpython_end, text, lark_rule, cpython_rule):
    assert cpython_end.grammar.indentation.eof_newline and not compiled.grammar.indentation.eof_newline
    assert _accepts_text(compiled, text) == lark_rule == _lark_accepts(text)
    assert _accepts_text(cpython_end, text) == cpython_rule
