"""The sampler on grammars with indentation: sampled documents are real, indented Python that Lark
(``parser="lalr"``, ``lexer="basic"``, the same Indenter) parses."""

from __future__ import annotations

import random
from pathlib import Path

import lark
import pytest
from lark.indenter import Indenter, PythonIndenter

from grammask import Grammar
from grammask.grammar.lark_frontend import _no_collision_check
from grammask.sampler import SentenceSampler

LARK_PYTHON = (Path(lark.__file__).parent / "grammars" / "python.lark").read_text()
SYNCODE_PYTHON = next(
    (p / "shared/data/syncode-grammars/python.lark" for p in Path(__file__).resolve().parents if (p / "shared/data").is_dir()),
    None,
)
"""SynCode's Python grammar, in ``shared/`` in the repository or a folder above it (None: not there)."""


class _SynCodeIndenter(Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types = ("LPAR", "LSQB", "LBRACE")
    CLOSE_PAREN_types = ("RPAR", "RSQB", "RBRACE")
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 4


def _grammars():
    yield pytest.param(LARK_PYTHON, "file_input", PythonIndenter, id="lark-python")
    if SYNCODE_PYTHON is not None and SYNCODE_PYTHON.exists():
        yield pytest.param(SYNCODE_PYTHON.read_text(), "start", _SynCodeIndenter, id="syncode-python")


@pytest.mark.parametrize(("text", "start", "indenter"), list(_grammars()))
def test_sampled_python_parses_with_lark(text, start, indenter):
    grammar = Grammar.from_lark(text, start=start, postlex=indenter())
    with _no_collision_check():
        parser = lark.Lark(text, parser="lalr", lexer="basic", postlex=indenter(), start=start, keep_all_tokens=True)
    sampler = SentenceSampler(grammar, max_depth=8)
    rng = random.Random(3)
    indented = 0
    for _ in range(150):
        doc = sampler.sample(rng)
        tree = parser.parse(doc)
        indented += any(tree.scan_values(lambda v: isinstance(v, lark.Token) and v.type == "_INDENT"))
    assert indented >= 10, indented


def test_indentation_has_several_levels():
    grammar = Grammar.from_lark(LARK_PYTHON, start="file_input", postlex=PythonIndenter())
    sampler = SentenceSampler(grammar, max_depth=8)
    rng = random.Random(5)
    docs = [sampler.sample(rng) for _ in range(100)]
    widths = {len(line) - len(line.lstrip(" ")) for doc in docs for line in doc.split("\n") if line.strip()}
    assert {0, 2, 4} <= widths and max(widths) >= 6
