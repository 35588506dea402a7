"""The grammar IR back to Lark text, so that Lark's LALR parser can serve as a reference in tests."""

from __future__ import annotations

import re

from grammask.errors import NO_DEADLINE, Deadline, GrammarError
from grammask.grammar.ir import Grammar, Terminal

_LARK_RULE = re.compile(r"_?[a-z][_a-z0-9]*")
_LARK_TERMINAL = re.compile(r"_?[A-Z][_A-Z0-9]*")


def lark_rule_name(name: str) -> str:
    """``name`` as Lark accepts a rule name (unchanged when it already is one)."""
    return name if _LARK_RULE.fullmatch(name) else "x" + re.sub(r"[^_a-z0-9]", "_", name.lower())


def lark_terminal_name(name: str) -> str:
    """``name`` as Lark accepts a terminal name (unchanged when it already is one); feed tokens by it."""
    return name if _LARK_TERMINAL.fullmatch(name) else "X" + re.sub(r"[^_A-Z0-9]", "_", name.upper())


def to_lark_text(grammar: Grammar) -> str:
    """Lark EBNF for ``grammar``: terminals and rules with priorities, rules as BNF alternatives, ``%ignore``.

    Load it with ``Lark(text, parser="lalr", start=lark_rule_name(grammar.start))``. Names Lark
    would not accept (such as the ``__object_star_0`` rules Lark's own loader invents) are
    renamed by :func:`lark_rule_name` and :func:`lark_terminal_name`.
    Lark's own basic lexer tries terminals in priority order rather than by maximal munch, so a
    reference that must lex exactly like grammask feeds Lark the terminals lexed by grammask's
    lexer instead. Raises :class:`~grammask.errors.GrammarError` when alternatives of one rule have
    different priorities (Lark gives a priority to a rule name, not to one alternative).
    """
    lines = [_terminal_line(t) for t in grammar.terminals]
    alternatives: dict[str, list[str]] = {}
    priority: dict[str, int] = {}
    terminals = set(grammar.terminal_names) | set(grammar.declared)
    for rule in grammar.rules:
        rhs = (lark_terminal_name(s) if s in terminals else lark_rule_name(s) for s in rule.rhs)
        lhs = lark_rule_name(rule.lhs)
        alternatives.setdefault(lhs, []).append(" ".join(rhs))
        if priority.setdefault(lhs, rule.priority) != rule.priority:
            raise GrammarError(f"rule '{rule.lhs}' has alternatives of different priorities; Lark cannot express that")
    for lhs, alts in alternatives.items():
        head = lhs if priority[lhs] == 0 else f"{lhs}.{priority[lhs]}"
        lines.append(f"{head}: " + "\n    | ".join(alts))
    lines.extend(f"%ignore {lark_terminal_name(name)}" for name in sorted(grammar.ignore))
    if grammar.declared:
        lines.append("%declare " + " ".join(lark_terminal_name(name) for name in grammar.declared))
    return "\n".join(lines) + "\n"


def _terminal_line(t: Terminal) -> str:
    name = lark_terminal_name(t.name)
    name = name if t.priority == 0 else f"{name}.{t.priority}"
    if t.literal is not None and not t.flags:
        return f"{name}: {_string_literal(t.literal)}"
    return f"{name}: /{_regex_body(t.pattern)}/{t.flags}"


def _string_literal(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _regex_body(pattern: str) -> str:
    """The pattern as the body of a Lark ``/.../`` literal: unescaped slashes and raw control characters escaped."""
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append("\\" + (nxt if ord(nxt) >= 0x20 else f"x{ord(nxt):02x}"))
            i += 2
            continue
        if ch == "/":
            out.append("\\/")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def lark_parser(grammar: Grammar, *, strict: bool = False):
    """A Lark LALR parser for ``grammar`` that is fed terminals (``parse_interactive``), not text.

    Feed ``Token(lark_terminal_name(name), ...)`` for each terminal the lexer emits.
    It builds no lexer, so terminal regexes Lark's lexer cannot digest quickly (large Unicode
    classes) cost nothing. ``strict=True`` makes Lark reject shift/reduce conflicts as well as
    reduce/reduce ones (it raises ``lark.exceptions.GrammarError``).
    """
    from lark import Lark
    from lark.lexer import Lexer

    class _FedTerminals(Lexer):
        def __init__(self, conf):
            pass

        def lex(self, data):
            return iter(())

    return Lark(to_lark_text(grammar), parser="lalr", lexer=_FedTerminals, strict=strict, start=lark_rule_name(grammar.start))


def check_lalr(grammar: Grammar, deadline: Deadline = NO_DEADLINE) -> None:
    """Raise ``lark.exceptions.GrammarError`` where ``grammar`` is not LALR(1), shift/reduce conflicts
    included: where building ``lark_parser(grammar, strict=True)`` raises, without its grammar text.

    Identical rules count once (as Lark's grammar loader has them). The integer construction of
    :mod:`grammask.parser.lalr` decides (in milliseconds where Lark's analyzer may take minutes) and names the
    first conflict; the grammars it leaves undecided go to Lark's analyzer. ``deadline`` is checked between the steps
    of the LALR construction (raises :class:`~grammask.errors.CompileTimeoutError`).
    """
    from lark.exceptions import GrammarError as LarkGrammarError

    from grammask.parser.tables import lalr_conflict

    conflict = lalr_conflict(grammar, deadline)
    if conflict:
        raise LarkGrammarError(conflict)
    if conflict == "":
        return
    from lark.common import ParserConf
    from lark.grammar import NonTerminal, Terminal
    from lark.grammar import Rule as LarkRule
    from lark.parsers.lalr_analysis import LALR_Analyzer

    terminals = {t.name for t in grammar.terminals}
    unique = dict.fromkeys((r.lhs, tuple(r.rhs)) for r in grammar.rules)
    rules = [
        LarkRule(NonTerminal(lhs), [Terminal(s) if s in terminals else NonTerminal(s) for s in rhs], order=i)
        for i, (lhs, rhs) in enumerate(unique)
    ]
    deadline.check("the LALR check of the grammar")
    analyzer = LALR_Analyzer(ParserConf(rules, {}, [grammar.start]), strict=True)
    for step in (analyzer.compute_lr0_states, analyzer.compute_reads_relations, analyzer.compute_includes_lookback,
                 analyzer.compute_lookaheads, analyzer.compute_lalr1_states):
        deadline.check("the LALR check of the grammar")
        step()
