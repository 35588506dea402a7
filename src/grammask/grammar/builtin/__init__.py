"""Grammars shipped with grammask, stored as Lark files beside this module."""

from __future__ import annotations

from importlib import resources

from grammask.errors import GrammarError
from grammask.grammar.ir import Grammar
from grammask.grammar.lark_frontend import grammar_from_lark

BUILTIN_NAMES = ("json", "c")

#: Built-in grammars whose token stream passes through a postlex the grammar IR cannot hold yet,
#: with the postlex (a ``lark.lark.PostLex`` subclass, module:class). Their Lark text is available
#: from :func:`builtin_source` (parse it with Lark's ``parser="lalr", lexer="basic"`` and the
#: postlex); :func:`load_builtin` refuses them until the engine runs the postlex.
POSTLEX_BUILTINS = {"go": "grammask.grammar.builtin.go_semicolons:GoSemicolons"}


def builtin_source(name: str) -> str:
    """The Lark source text of a built-in grammar (``go`` included); raises :class:`~grammask.errors.GrammarError` for other names."""
    if name not in BUILTIN_NAMES and name not in POSTLEX_BUILTINS:
        raise GrammarError(
            f"no built-in grammar named '{name}'; choose one of: {', '.join(BUILTIN_NAMES)}"
        )
    return (
        resources.files(__package__)
        .joinpath(f"{name}.lark")
        .read_text(encoding="utf-8")
    )


def load_builtin(name: str) -> Grammar:
    """A grammar shipped with grammask: ``json`` (RFC 8259) or ``c`` (a C subset).

    Raises :class:`~grammask.errors.GrammarError` for other names, and for ``go``, whose automatic
    semicolons need a postlex the grammar IR cannot express yet (see ``POSTLEX_BUILTINS``).
    """
    if name in POSTLEX_BUILTINS:
        raise GrammarError(
            f"built-in grammar '{name}' needs the postlex {POSTLEX_BUILTINS[name]} (Go's automatic semicolons), "
            f"which grammask's grammar IR cannot hold yet; builtin_source('{name}') gives its Lark text"
        )
    return grammar_from_lark(builtin_source(name), name=name)
