"""Lark EBNF to the grammar IR, using lark's own grammar loader (EBNF expansion, imports, priorities)."""

from __future__ import annotations

import re
from contextlib import contextmanager

from lark import exceptions as lark_exc
from lark import lexer as lark_lexer
from lark.lexer import PatternStr
from lark.load_grammar import load_grammar

from grammask.errors import GrammarError, GrammarSyntaxError, UndefinedSymbolError
from grammask.grammar.ir import Grammar, Rule, Terminal

_UNDEFINED = re.compile(r"(?:Rule|Terminal) '?([^' ]+)'? used but not defined|Terminals? used but not defined")


def grammar_from_lark(text: str, *, start: str = "start", name: str = "lark", conflicts: str = "resolve") -> Grammar:
    """Load Lark EBNF text into a :class:`Grammar`; lark errors become grammask errors with line numbers.

    Rule priorities (``name.2: ...``) are kept: they decide reduce/reduce conflicts. ``conflicts``
    is the grammar's shift/reduce policy (``"resolve"`` as Lark, or ``"error"``; see :class:`Grammar`).

    Raises :class:`~grammask.errors.GrammarSyntaxError` (with line and column) for text that is not Lark
    EBNF, :class:`~grammask.errors.UndefinedSymbolError` for a rule or terminal used but not defined (or
    a missing ``start`` rule), and :class:`~grammask.errors.GrammarError` for any other error lark reports,
    for a ``%declare``-d terminal with no pattern and for an unknown ``conflicts``. Terminal regexes are
    checked at compile time.
    """
    try:
        with _no_collision_check():
            loaded, _ = load_grammar(text, "<grammar>", [], False)
        terminal_defs, lark_rules, ignore = loaded.compile([start], set())
    except lark_exc.UnexpectedInput as e:
        raise GrammarSyntaxError(f"Lark grammar syntax error: {_first_line(str(e))}", e.line, e.column) from None
    except lark_exc.GrammarError as e:
        msg = str(e)
        if _UNDEFINED.search(msg) or "not defined" in msg:
            raise UndefinedSymbolError(f"Lark grammar: {msg}") from None
        raise GrammarError(f"Lark grammar: {msg}") from None
    except lark_exc.LarkError as e:
        raise GrammarError(f"Lark grammar: {e}") from None

    terminals = []
    for td in terminal_defs:
        pattern = td.pattern
        if pattern is None:
            raise GrammarError(f"terminal {td.name} is declared (%declare) but has no pattern; grammask needs one")
        terminals.append(
            Terminal(
                name=str(td.name),
                pattern=pattern.to_regexp(),
                literal=pattern.value if isinstance(pattern, PatternStr) else None,
                priority=td.priority,
            )
        )
    rules = tuple(
        Rule(str(r.origin.name), tuple(str(s.name) for s in r.expansion), r.options.priority or 0) for r in lark_rules
    )
    return Grammar(tuple(terminals), rules, start, frozenset(str(i) for i in ignore), name=name, conflicts=conflicts)


@contextmanager
def _no_collision_check():
    """Skip lark's regex-collision check (run with ``interegular`` when installed).

    The first grammar load in a process builds lark's parser for its own grammar language,
    and that check over lark's own terminals takes about 2 s; grammask checks its grammars itself.
    """
    saved = lark_lexer.has_interegular
    lark_lexer.has_interegular = False
    try:
        yield
    finally:
        lark_lexer.has_interegular = saved


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else message
