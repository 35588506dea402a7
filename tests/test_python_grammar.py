"""The built-in Python grammar against CPython 3.11's ``ast.parse``, with Lark as the parser.

``python.lark`` with ``lark.Lark(parser="lalr", lexer="basic", postlex=CPythonIndenter())`` must
accept exactly what ``ast.parse`` of this machine's CPython accepts:

* real files: CPython's ``Lib/`` (no ``site-packages``), files under 20 KB that ``ast.parse``
  accepts, drawn with a fixed seed: Lark accepts every one;
* mutated copies of them (a line deleted, re-indented or duplicated; a character deleted or
  inserted; fixed seed): Lark's verdict equals ``ast.parse``'s;
* targeted cases (``tests/python_cases.py``): equal verdicts, except the documented
  ``KNOWN_DIFFERENCES``, which must still differ (so that a fix updates the list).

grammask's own lexing rule (maximal munch without backtracking, ``automata/lexer.py``) must split
every one of those texts into the same tokens as Lark's basic lexer, so that the grammar means the
same to grammask's engine once it runs the postlex.

The default run takes a slice (25 files, 100 mutations); ``-m slow`` takes the full 200 and 1,000.
"""

from __future__ import annotations

import ast
import os
import random
import warnings
from functools import cache

import pytest
from conftest import get_vocab
from lark import Lark
from lark.exceptions import GrammarError as LarkGrammarError
from lark.exceptions import LarkError
from lark.lexer import LexerThread
from python_cases import TARGETED

import grammask
from grammask.automata.lexer import build_lexer
from grammask.grammar.builtin import POSTLEX_BUILTINS, builtin_source
from grammask.grammar.builtin.python_indent import (
    CPythonIndenter,
    PythonIndentationError,
    measure,
)
from grammask.grammar.lark_frontend import _no_collision_check

FILES_SEED = 0
MUTATION_SEED = 1
INSERTED = [chr(c) for c in range(32, 127)] + ["\t", "\n", "    "]

# Cases where Lark with this grammar and ast.parse disagree, with the cause. The tests check that
# each still disagrees.
KNOWN_DIFFERENCES = {
    # match statements: an LALR(1) parser must decide after `match` and one token whether a
    # statement is a match statement (see the top of python.lark)
    "match -x, y := 1:\n    case 1:\n        pass\n": "walrus item after a `match -x` subject's comma",
    "match *x, y := 1:\n    case 1:\n        pass\n": "walrus item after a `match *x` subject's comma",
    "match (x).y:\n    case 1:\n        pass\n": "bracketed match subject followed by more (read as a call)",
    "match [x][0]:\n    case 1:\n        pass\n": "bracketed match subject followed by more (read as a subscript)",
    "match (a) + 1:\n    case 1:\n        pass\n": "bracketed match subject followed by more (read as a call)",
    "match (*a):\n    case 1:\n        pass\n": "`match (...)` subject checked as call arguments",
    "match (yield x):\n    case 1:\n        pass\n": "`match (...)` subject checked as call arguments",
    "match [a:b]:\n    case 1:\n        pass\n": "`match [...]` subject checked as a subscript",
    "match [x for x in y]:\n    case 1:\n        pass\n": "`match [...]` subject checked as a subscript",
    # parenthesised with-items: those before the first `as` are read as tuple elements
    "with (*a, b as c): pass\n": "starred item before the first `as` in parenthesised with-items",
    "with (a := 1, b as c): pass\n": "walrus item before the first `as` in parenthesised with-items",
    # f-strings: lexed as CPython 3.11's tokenizer does; in single-quoted ones the braces are
    # checked (literal `{{` `}}`, non-blank fields, one level of nested fields), not the fields
    "x = f'{x y}'\n": "f-string field expression not parsed",
    "x = f'{x!z}'\n": "f-string conversion not checked",
    "x = f'{lambda x: 1}'\n": "f-string field expression not parsed",
    "x = f'{x#}'\n": "f-string field: `#` not checked",
    "x = f'{*a}'\n": "f-string field expression not parsed",
    "x = f'{x!r }'\n": "f-string conversion not checked",
    "x = f'{x! r}'\n": "f-string conversion not checked",
    "x = f'{a:\\n}'\n": "f-string field: a backslash is rejected anywhere in a field (CPython allows one in the spec)",
    "x = f'{x:\"<10}'\n": "f-string field: a lone quote of the other kind (a fill character) is rejected",
    "x = f'{10:#{3 != {4:5} and width}x}'\n": "f-string field: braces nested two deep (a dict in a nested field)",
    "x = f'''{'''\n": "triple-quoted f-strings are checked lexically only",
    # lexical
    "x€ = 1\n": "any non-ASCII character is accepted in a name (CPython: XID_Start/XID_Continue)",
    "x = 1\\\n": "backslash continuation at the end of the input",
    "\\\n": "backslash continuation at the end of the input",
    # the first line: Lark's lexer drops its leading whitespace, the postlex sees only a column
    "\x0cx = 1": "first line indented by form feeds only (CPython: column 0)",
    "  \\\nx = 1\n": "first line's indentation followed by a backslash continuation",
}

# Where grammask's lexing rule (no backtracking) splits differently from Lark's basic lexer:
# `1e` is a prefix of a float, so `1else` cannot be `1` `else` (CPython and Lark accept it).
LEXING_DIFFERENCES = {"x = 1 if 1else 2\n"}


def cpython_accepts(text: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            return False
    return True


def lark_accepts(parser: Lark, text: str) -> bool:
    try:
        parser.parse(text)
    except LarkError:
        return False
    return True


@cache
def python_lark() -> Lark:
    with _no_collision_check():  # Lark's regex-collision check takes minutes on these terminals
        parser = Lark(builtin_source("python"), parser="lalr", lexer="basic", postlex=CPythonIndenter())
        parser.parse("pass\n")  # Lark builds its lexer (and would run the check) on first use
        return parser


@cache
def lark_basic_lexer():
    """Lark's basic lexer for the grammar, built once (``Lark.lex`` would build one per call)."""
    with _no_collision_check():
        return Lark(builtin_source("python"), parser="lalr", lexer="basic")._build_lexer()


@cache
def grammask_lexer():
    """grammask's lexer automaton for the grammar."""
    return build_lexer(grammask.Grammar.builtin("python"))


def stdlib_files(count: int) -> list[tuple[str, str]]:
    """``count`` files of CPython's ``Lib/`` under 20 KB that ``ast.parse`` accepts, drawn with a fixed seed."""
    return _stdlib_files()[:count]


@cache
def _stdlib_files() -> list[tuple[str, str]]:
    lib = os.path.dirname(os.__file__)
    paths = []
    for root, dirs, names in os.walk(lib):
        dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "__pycache__"))
        paths += [os.path.join(root, n) for n in sorted(names) if n.endswith(".py")]
    paths = [p for p in paths if os.path.getsize(p) < 20_000]
    random.Random(FILES_SEED).shuffle(paths)
    out = []
    for path in paths:
        if len(out) == 200:
            break
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        if cpython_accepts(text):
            out.append((os.path.relpath(path, lib), text))
    return out


def mutate(text: str, rng: random.Random) -> tuple[str, str]:
    """One mutation of ``text``: a line deleted, re-indented or duplicated, or a character deleted or inserted."""
    kind = rng.choice(["delete line", "reindent line", "duplicate line", "delete char", "insert char"])
    lines = text.splitlines(keepends=True)
    if kind.endswith("line") and lines:
        i = rng.randrange(len(lines))
        if kind == "delete line":
            lines[i : i + 1] = []
        elif kind == "duplicate line":
            lines[i : i + 1] = [lines[i], lines[i]]
        else:
            indent = rng.choice(["", " ", "  ", "    ", "        ", "\t", "\t    ", "     "])
            lines[i] = indent + lines[i].lstrip(" \t")
        return kind, "".join(lines)
    i = rng.randrange(len(text) + 1)
    if kind == "delete char" and text:
        i = min(i, len(text) - 1)
        return kind, text[:i] + text[i + 1 :]
    return "insert char", text[:i] + rng.choice(INSERTED) + text[i:]


def mutations(count: int) -> list[tuple[str, str, str]]:
    """``count`` mutated copies of the 200 files (file after file), with a fixed seed."""
    files = stdlib_files(200)
    rng = random.Random(MUTATION_SEED)
    out = []
    for k in range(count):
        name, text = files[k % len(files)]
        kind, mutated = mutate(text, rng)
        out.append((name, kind, mutated))
    return out


def grammask_tokens(text: str) -> list[str] | None:
    lexer = grammask_lexer()
    stepped = lexer.step(0, text.encode("utf-8"))
    if stepped is None:
        return None
    emitted, state = stepped
    final = lexer.finish(state)
    if final is None:
        return None
    return [lexer.terminals[i] for i in emitted + final if not lexer.ignored[i]]


def lexing_agrees(text: str) -> bool:
    """Whether grammask's lexing rule gives Lark's parser the same verdict on ``text`` as Lark's lexer.

    Where grammask's lexer splits the text, the tokens must be Lark's; where it rejects the text
    (a lexeme that is no complete token, e.g. `0x` or `1_`: Lark backtracks and splits it into
    tokens that cannot follow each other), Lark must reject the text too.
    """
    tokens = grammask_tokens(text)
    if tokens is None:
        return not lark_accepts(python_lark(), text)
    return tokens == lark_tokens(text)


def lark_tokens(text: str) -> list[str] | None:
    try:
        return [t.type for t in LexerThread.from_text(lark_basic_lexer(), text).lex(None)]
    except LarkError:
        return None


# ------------------------------------------------------------------ the grammar itself


def test_grammar_loads_with_shift_reduce_conflicts_resolved_as_python_means():
    python_lark()
    with pytest.raises(LarkGrammarError, match="Shift/Reduce conflict for terminal (COLON|MINUS|PLUS|NOT|STAR)"):
        Lark(builtin_source("python"), parser="lalr", lexer="basic", postlex=CPythonIndenter(), strict=True)
    # the conflicts are after `match` at the start of a statement (`:` after `match[x]`; `-`, `+`,
    # `not` after `match`): shifting leads to rules that read both meanings
    parser = python_lark()
    for text in (
        "match[x]: int = 1\n", "match [x]:\n    case 1: pass\n",
        "match - x\n", "match -x:\n    case 1: pass\n", "match + x, y\n", "match +x, y:\n    case 1: pass\n",
        "match not in x\n", "match not x:\n    case 1: pass\n", "match * a, b\n", "match *a, b:\n    case 1: pass\n",
    ):
        assert lark_accepts(parser, text) and cpython_accepts(text), text


def test_grammask_loads_the_grammar_text():
    # The IR refuses a %declare-d terminal without a pattern until the engine has postlex support.
    with pytest.raises(grammask.GrammaskError, match="_INDENT|_DEDENT"):
        grammask.Grammar.from_lark(builtin_source("python"))
    lexer = grammask_lexer()
    assert {"NAME", "NUMBER", "IMAG_NUMBER", "STRING", "BYTES", "FSTRING", "_NEWLINE", "MATCH", "CASE"} <= set(
        lexer.terminals
    )


def test_builtin_python_is_registered_with_its_postlex():
    assert POSTLEX_BUILTINS["python"].endswith("CPythonIndenter")
    rules = grammask.Grammar.builtin("python").indentation
    assert (rules.newline, rules.indent, rules.dedent, rules.tab_len, rules.eof_newline) == (
        "_NEWLINE", "_INDENT", "_DEDENT", 8, True)


def test_indenter_declares_cpython_rules():
    indenter = CPythonIndenter()
    assert indenter.tab_rule == "cpython" and indenter.tab_len == 8
    assert indenter.NL_type == "_NEWLINE" and (indenter.INDENT_type, indenter.DEDENT_type) == ("_INDENT", "_DEDENT")
    assert measure("") == (0, 0)
    assert measure("    ") == (4, 4)
    assert measure("\t") == (8, 1)
    assert measure("  \t") == (8, 3)
    assert measure("\t  ") == (10, 3)
    assert measure("        \t") == (16, 9)
    assert measure("   \x0c  ") == (2, 2)


def test_indentation_errors_are_lark_errors():
    parser = python_lark()
    for text in ("if x:\n\ta\n        b\n", "if x:\n    a\n  b\n", "  x\n"):
        with pytest.raises(PythonIndentationError):
            parser.parse(text)


# ------------------------------------------------------------------ targeted cases


def test_targeted_cases_cover_both_verdicts():
    verdicts = [cpython_accepts(text) for text in TARGETED]
    assert sum(verdicts) > 250 and len(verdicts) - sum(verdicts) > 250


def test_targeted_cases_agree_with_cpython():
    parser = python_lark()
    disagreements = [
        text for text in TARGETED if text not in KNOWN_DIFFERENCES and lark_accepts(parser, text) != cpython_accepts(text)
    ]
    assert disagreements == []


def test_known_differences_still_differ():
    parser = python_lark()
    fixed = [text for text in KNOWN_DIFFERENCES if lark_accepts(parser, text) == cpython_accepts(text)]
    assert fixed == [], "update KNOWN_DIFFERENCES (and python.lark's list)"


def test_targeted_cases_lex_the_same_under_grammask_rule():
    differ = [text for text in TARGETED if text not in LEXING_DIFFERENCES and not lexing_agrees(text)]
    assert differ == []


def test_known_lexing_differences():
    for text in LEXING_DIFFERENCES:
        assert lark_accepts(python_lark(), text) and cpython_accepts(text)
        assert not lexing_agrees(text)


# ------------------------------------------------------------------ real files and mutations


def _check_files(count: int):
    parser = python_lark()
    files = stdlib_files(count)
    assert len(files) == count
    rejected = [name for name, text in files if not lark_accepts(parser, text)]
    assert rejected == []
    lexed_differently = [name for name, text in files if not lexing_agrees(text)]
    assert lexed_differently == []


def _check_mutations(count: int):
    parser = python_lark()
    disagreements = []
    lexed_differently = []
    accepted = 0
    for name, kind, text in mutations(count):
        reference = cpython_accepts(text)
        accepted += reference
        if lark_accepts(parser, text) != reference:
            disagreements.append((name, kind, reference))
        if not lexing_agrees(text):
            lexed_differently.append((name, kind))
    assert disagreements == []
    assert lexed_differently == []
    assert 0.1 * count < accepted < 0.9 * count


def test_stdlib_files_slice():
    _check_files(25)


def test_mutations_slice():
    _check_mutations(100)


@pytest.mark.slow
def test_stdlib_files_full():
    _check_files(200)


@pytest.mark.slow
def test_mutations_full():
    _check_mutations(1000)


@pytest.mark.parametrize("text", [
    " x = 1\n", "\tx = 1\n", "  # c\nx = 1\n", "# c\n  x = 1\n", "  \n", "   # c", "", "x = 1\n y = 2\n",
    "  \\\nx = 1\n", "\x0cx = 1\n",
])
def test_engine_measures_the_first_line_as_cpython(text):
    _check_engine_against_cpython(text)


@pytest.mark.parametrize("text", [
    "x = 1\ry = 2\r", "if x:\r    y\r", "x\r y\n", "if x:\r\n    y\r  z\n", "x\r\r  \ry\n",
    "if x:\n  y\r\n\r  z\r", "if x:\r  y\r z\r",
])
def test_engine_ends_lines_at_a_lone_carriage_return_as_cpython(text):
    _check_engine_against_cpython(text)


def _check_engine_against_cpython(text: str) -> None:
    """The built-in's verdict on ``text`` fed token by token, and as a prefix, is CPython's."""
    compiled = grammask.Compiler(get_vocab("smollm2")).compile(grammask.Grammar.builtin("python"))
    vocab = compiled.vocab
    m = compiled.matcher()
    accepted = all(m.accept_token(t) for t in vocab.encode(text)) and m.is_accepting()
    assert accepted == cpython_accepts(text)
    try:
        compiled.matcher(prefix=text)
        prefix_ok = True
    except grammask.errors.TextRejectedError:
        prefix_ok = False
    assert prefix_ok or not cpython_accepts(text)
