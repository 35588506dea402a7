"""Grammars shipped with grammask, stored as Lark files beside this module.

``python`` and ``go`` pass their tokens through a postlex (CPython's indentation, Go's automatic
semicolons), given here as the reference Lark ``PostLex`` class whose rules the engine runs itself.
"""

from __future__ import annotations

import dataclasses
from importlib import import_module, resources

from grammask.errors import GrammarError
from grammask.grammar.ir import Grammar
from grammask.grammar.lark_frontend import grammar_from_lark

BUILTIN_NAMES = ("json", "c", "python", "go")

#: Built-in grammars whose tokens pass through a postlex: ``module:class`` of the reference Lark ``PostLex``
#: (parse their text with Lark's ``parser="lalr", lexer="basic"`` and an instance of it).
POSTLEX_BUILTINS = {
    "python": "grammask.grammar.builtin.python_indent:CPythonIndenter",
    "go": "grammask.grammar.builtin.go_semicolons:GoSemicolons",
}


def builtin_source(name: str) -> str:
    """The Lark source text of a built-in grammar; raises :class:`~grammask.errors.GrammarError` for other names."""
    if name not in BUILTIN_NAMES:
        raise GrammarError(f"no built-in grammar named '{name}'; choose one of: {', '.join(BUILTIN_NAMES)}")
    return resources.files(__package__).joinpath(f"{name}.lark").read_text(encoding="utf-8")


def builtin_postlex(name: str):
    """A fresh instance of the reference postlex of built-in grammar ``name``, or None if it has none."""
    target = POSTLEX_BUILTINS.get(name)
    if target is None:
        return None
    module, cls = target.split(":")
    return getattr(import_module(module), cls)()


def load_builtin(name: str) -> Grammar:
    """A grammar shipped with grammask: ``json`` (RFC 8259), ``c`` (a C subset), ``python`` (Python 3.11,
    with CPython's indentation) or ``go`` (Go 1.19 with generics, with Go's automatic semicolons).

    Raises :class:`~grammask.errors.GrammarError` for other names.
    """
    grammar = grammar_from_lark(builtin_source(name), name=name, postlex=builtin_postlex(name), lexer="basic")
    return dataclasses.replace(grammar, backtrack=False)
