"""Lark EBNF to the grammar IR, using lark's own grammar loader (EBNF expansion, imports, priorities)."""

from __future__ import annotations

import re
from contextlib import contextmanager

from lark import exceptions as lark_exc
from lark import lexer as lark_lexer
from lark.lexer import PatternStr
from lark.load_grammar import load_grammar

from grammask.errors import (
    ConfigurationError,
    GrammarError,
    GrammarSyntaxError,
    UndefinedSymbolError,
)
from grammask.grammar.ir import (
    Grammar,
    Indentation,
    Rule,
    Semicolons,
    Terminal,
    require_text,
)

_UNDEFINED = re.compile(r"(?:Rule|Terminal) '?([^' ]+)'? used but not defined|Terminals? used but not defined")


def grammar_from_lark(
    text: str, *, start: str = "start", name: str = "lark", conflicts: str = "resolve", postlex: object = None,
    lexer: str = "contextual",
) -> Grammar:
    """Load Lark EBNF text into a :class:`Grammar`; lark errors become grammask errors with line numbers.

    Rule priorities (``name.2: ...``) are kept: they decide reduce/reduce conflicts. ``conflicts``
    is the grammar's shift/reduce policy (``"resolve"`` as Lark, or ``"error"``; see :class:`Grammar`).
    ``postlex`` takes an instance of Lark's ``lark.indenter.Indenter`` (e.g. ``PythonIndenter()``):
    its terminal names, brackets and ``tab_len`` are read, and grammask runs the same indentation
    rules itself (:class:`~grammask.grammar.ir.Indentation`); or a semicolon-insertion postlex that
    states its rule as the attributes ``nl_types``, ``semicolon_type``, ``trigger_types`` and
    ``insert_at_eof`` (:class:`~grammask.grammar.ir.Semicolons`, e.g. the built-in Go grammar's). Its
    ``always_accept`` terminals are kept although no rule uses them, as Lark keeps them. ``lexer`` is Lark's lexer name
    for LALR: ``"contextual"`` (Lark's default: only the terminals the parser's state accepts compete for a
    lexeme) or ``"basic"`` (all of them); see :attr:`Grammar.lexer`.

    Raises :class:`~grammask.errors.GrammarSyntaxError` (with line and column) for text that is not Lark
    EBNF, :class:`~grammask.errors.UndefinedSymbolError` for a rule or terminal used but not defined (or
    a missing ``start`` rule or a postlex terminal the grammar lacks), :class:`~grammask.errors.GrammarError`
    for any other error lark reports, for a ``%declare``-d terminal used without an indenter that produces it and
    for an unknown ``conflicts``, and :class:`~grammask.errors.ConfigurationError` for a ``postlex`` of neither kind or
    another ``lexer``. Terminal regexes are checked at compile time.
    """
    require_text(text, "a Lark grammar")
    if lexer not in ("basic", "contextual"):
        raise ConfigurationError(
            f"lexer={lexer!r}: grammask builds Lark's LALR lexers, 'contextual' and 'basic' (Earley's 'dynamic' "
            f"lexers have no LALR parser to go with)"
        )
    indentation, semicolons = _postlex_rules(postlex)
    keep = {str(t) for t in getattr(postlex, "always_accept", ())}
    try:
        with _no_collision_check():
            loaded, _ = load_grammar(text, "<grammar>", [], False)
        terminal_defs, lark_rules, ignore = loaded.compile([start], keep)
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
    declared = [str(n) for n, (tree, _) in loaded.term_defs if tree is None and _used(n, lark_rules)]
    for td in terminal_defs:
        pattern = td.pattern
        terminals.append(
            Terminal(
                name=str(td.name),
                pattern=_regexp(pattern),
                literal=pattern.value if isinstance(pattern, PatternStr) else None,
                priority=td.priority,
            )
        )
    rules = tuple(
        Rule(str(r.origin.name), tuple(str(s.name) for s in r.expansion), r.options.priority or 0) for r in lark_rules
    )
    produced = set() if indentation is None else {indentation.indent, indentation.dedent}
    unproduced = [d for d in declared if d not in produced]
    if unproduced:
        raise GrammarError(
            f"terminal(s) {', '.join(unproduced)} are declared (%declare) with no pattern and no postlex produces "
            f"them; pass postlex= (a lark.indenter.Indenter) or give them a pattern"
        )
    return Grammar(tuple(terminals), rules, start, frozenset(str(i) for i in ignore), name=name, conflicts=conflicts,
                   declared=tuple(declared), indentation=indentation, semicolons=semicolons, lexer=lexer,
                   first_match=True, backtrack=True)


def _regexp(pattern) -> str:
    """Lark's ``pattern.to_regexp()`` with the flags nested in sorted order (lark nests them in set order, which
    changes between processes and would change the grammar's fingerprint, i.e. its cache key)."""
    value = re.escape(pattern.value) if isinstance(pattern, PatternStr) else pattern.value
    for flag in sorted(pattern.flags):
        value = f"(?{flag}:{value})"
    return value


def _used(terminal: str, lark_rules) -> bool:
    return any(s.name == terminal for r in lark_rules for s in r.expansion)


def _postlex_rules(postlex: object) -> tuple[Indentation | None, Semicolons | None]:
    """The postlex's rules as IR data: (indentation, semicolons), at most one of them set."""
    from lark.indenter import Indenter

    if postlex is None:
        return None, None
    if isinstance(postlex, Indenter):
        return _indentation_of(postlex), None
    if all(hasattr(postlex, a) for a in ("nl_types", "semicolon_type", "trigger_types")):
        return None, Semicolons(
            newlines=tuple(str(t) for t in postlex.nl_types),
            semicolon=str(postlex.semicolon_type),
            triggers=tuple(sorted(str(t) for t in postlex.trigger_types)),
            at_end=bool(getattr(postlex, "insert_at_eof", True)),
        )
    raise ConfigurationError(
        f"postlex must be an instance of lark.indenter.Indenter (e.g. PythonIndenter()) or a semicolon-insertion "
        f"postlex with nl_types, semicolon_type and trigger_types, not {type(postlex).__name__}: grammask runs "
        f"a postlex's rules itself and knows no other kind"
    )


def _indentation_of(postlex) -> Indentation:
    """The indentation rules of a Lark ``Indenter`` instance, read from its attributes."""
    cpython = getattr(postlex, "tab_rule", "lark") == "cpython"
    try:
        return Indentation(
            newline=str(postlex.NL_type),
            indent=str(postlex.INDENT_type),
            dedent=str(postlex.DEDENT_type),
            open_brackets=tuple(str(t) for t in postlex.OPEN_PAREN_types),
            close_brackets=tuple(str(t) for t in postlex.CLOSE_PAREN_types),
            tab_len=int(postlex.tab_len),
            line_breaks="\n\r" if cpython else "\n",
            eof_newline=cpython,
        )
    except (AttributeError, NotImplementedError, TypeError, ValueError) as e:
        raise ConfigurationError(f"postlex {type(postlex).__name__} does not define the Indenter attributes: {e}") from None


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
