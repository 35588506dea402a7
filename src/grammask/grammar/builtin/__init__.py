"""Grammars shipped with grammask, stored as Lark files beside this module."""

from __future__ import annotations

from importlib import resources

from grammask.errors import GrammarError
from grammask.grammar.ir import Grammar
from grammask.grammar.lark_frontend import grammar_from_lark

BUILTIN_NAMES = ("json", "c")


def builtin_source(name: str) -> str:
    """The Lark source text of a built-in grammar; raises :class:`~grammask.errors.GrammarError` for other names."""
    if name not in BUILTIN_NAMES:
        raise GrammarError(f"no built-in grammar named '{name}'; choose one of: {', '.join(BUILTIN_NAMES)}")
    return resources.files(__package__).joinpath(f"{name}.lark").read_text(encoding="utf-8")


def load_builtin(name: str) -> Grammar:
    """A grammar shipped with grammask: ``json`` (RFC 8259) or ``c`` (a C subset).

    Raises :class:`~grammask.errors.GrammarError` for other names.
    """
    return grammar_from_lark(builtin_source(name), name=name)
