"""The seeds' benchmark programs (bench/data/seeds/) are sentences of their SynCode grammars: Lark's
LALR parser with the basic lexer (Python: with SynCode's indenter as postlex) accepts each one."""

from __future__ import annotations

import lark
import pytest
from conftest import skip_module_without_syncode

skip_module_without_syncode()

import cases

SEEDS = {name: cases.load_seed_grammar(name) for name in cases.SEED_GRAMMARS}
PROGRAMS = [(name, program) for name, seed in SEEDS.items() for program, _ in seed.programs]


@pytest.mark.parametrize("grammar", cases.SEED_GRAMMARS)
def test_each_grammar_has_at_least_five_programs(grammar):
    assert len(SEEDS[grammar].programs) >= 5


@pytest.mark.parametrize(("grammar", "program"), PROGRAMS)
def test_lark_accepts_the_program(grammar, program):
    seed = SEEDS[grammar]
    text = dict(seed.programs)[program]
    cases.lark_parser(seed.lark_text, seed.postlex).parse(text)


def test_python_programs_need_the_indenter_on_nl():
    """With Lark's stock PythonIndenter (newline terminal ``_NEWLINE``) SynCode's Python grammar never
    gets an ``_INDENT``: a program with a nested block is refused. The benchmark's indenter fixes that."""
    seed = SEEDS["python"]
    stock = lark.Lark(seed.lark_text, parser="lalr", lexer="basic", postlex=lark.indenter.PythonIndenter())
    with pytest.raises(lark.exceptions.UnexpectedInput):
        stock.parse("def f(x):\n    for i in x:\n        y = i\n    return y\n")
    cases.lark_parser(seed.lark_text, seed.postlex).parse("def f(x):\n    for i in x:\n        y = i\n    return y\n")


def test_python_programs_compile_as_python():
    for program, text in SEEDS["python"].programs:
        compile(text, program, "exec")
