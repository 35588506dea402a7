"""Grammars shipped with grammask, stored as Lark files beside this module."""

from __future__ import annotations

from importlib import resources

from grammask.errors import GrammarError
from grammask.grammar.ir import Grammar
from grammask.grammar.lark_frontend import grammar_from_lark

BUILTIN_NAMES = ("json", "c")
"""The built-in grammars ``Grammar.builtin`` compiles today."""

POSTLEX_BUILTINS = {"python": "grammask.grammar.builtin.python_indent.CPythonIndenter"}
"""Built-in grammars whose token stream goes through a postlex (by import path).

Their Lark source is available (:func:`builtin_source`); ``Grammar.builtin`` needs the grammar IR
to carry the postlex first. ``python`` is Python 3.11 with CPython's indentation rules
(:class:`~grammask.grammar.builtin.python_indent.CPythonIndenter`).
"""


def builtin_source(name: str) -> str:
    """The Lark source text of a built-in grammar; raises :class:`~grammask.errors.GrammarError` for other names."""
    if name not in BUILTIN_NAMES and name not in POSTLEX_BUILTINS:
        choices = ", ".join((*BUILTIN_NAMES, *POSTLEX_BUILTINS))
        raise GrammarError(f"no built-in grammar named '{name}'; choose one of: {choices}")
    return resources.files(__package__).joinpath(f"{name}.lark").read_text(encoding="utf-8")


def load_builtin(name: str) -> Grammar:
    """A grammar shipped with grammask: ``json`` (RFC 8259) or ``c`` (a C subset).

    ``python`` (Python 3.11) is registered but needs an indentation postlex that the grammar IR
    does not carry yet: it raises :class:`~grammask.errors.GrammarError` saying so; its Lark
    source is :func:`builtin_source` ``("python")``, with the postlex
    :class:`~grammask.grammar.builtin.python_indent.CPythonIndenter`.
    Raises :class:`~grammask.errors.GrammarError` for other names.
    """
    if name in POSTLEX_BUILTINS:
        raise GrammarError(
            f"the built-in grammar '{name}' needs the postlex {POSTLEX_BUILTINS[name]} (indentation), "
            "which grammask's engine does not support yet; its Lark source is builtin_source('" + name + "')"
        )
    return grammar_from_lark(builtin_source(name), name=name)
