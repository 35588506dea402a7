"""The grammar IR every front end produces: terminals as regexes, rules over names, a start symbol."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

from grammask.errors import ConfigurationError, GrammarError, UndefinedSymbolError

COUNT_UNITS = ("codepoints", "json")
"""What a counted terminal counts: the code points of its lexeme, or the characters of the JSON string value its
lexeme spells (between the quotes, an escape counting as the character it stands for, a surrogate pair as one)."""


@dataclass(frozen=True)
class Count:
    """A bound on the length of a terminal's lexemes: between ``lo`` and ``hi`` (None: no upper bound) ``unit`` s.

    Raises :class:`~grammask.errors.GrammarError` for an unknown unit or bounds out of order.
    """

    lo: int
    hi: int | None
    unit: str = "codepoints"

    def __post_init__(self) -> None:
        if self.unit not in COUNT_UNITS:
            raise GrammarError(f"a count's unit must be one of {', '.join(COUNT_UNITS)}, not {self.unit!r}")
        if self.lo < 0 or (self.hi is not None and self.hi < self.lo):
            raise GrammarError(f"a count needs 0 <= lo <= hi, not {self.lo}..{self.hi}")

    def contains(self, n: int) -> bool:
        return self.lo <= n and (self.hi is None or n <= self.hi)


@dataclass(frozen=True)
class Terminal:
    """A grammar-level token.

    ``pattern`` is a regex in Python ``re`` syntax, matched against text and compiled to a
    byte-level automaton over its UTF-8 encoding. ``flags`` holds inline flag letters
    (``i``, ``s``, ``m``, ``x``, ``u``, ``a``) as Lark passes them. ``literal`` is set when the
    terminal is a string literal: a literal wins a tie against a pattern terminal of equal
    priority that matches the same lexeme (as Lark's lexer does for keywords). With ``count``, the
    terminal's lexemes are those of ``pattern`` whose length lies within it: the lexer keeps the
    length beside its state instead of unrolling it (:mod:`grammask.automata.counted`).
    """

    name: str
    pattern: str
    flags: str = ""
    literal: str | None = None
    priority: int = 0
    count: Count | None = None


@dataclass(frozen=True)
class Rule:
    """One production ``lhs -> rhs``; ``rhs`` names terminals and nonterminals (empty for epsilon).

    ``priority`` decides reduce/reduce conflicts as in Lark: the rule of highest priority wins.
    """

    lhs: str
    rhs: tuple[str, ...]
    priority: int = 0


@dataclass(frozen=True)
class Indentation:
    """Indentation as Lark's ``Indenter`` postlex does it, as data the engine runs itself.

    The lexer's ``newline`` terminal (which must never be ``%ignore``-d) reaches the parser, then
    its last line's indentation (spaces count 1, tabs ``tab_len``) is compared with a stack of
    levels (initially ``[0]``): deeper pushes it and adds ``indent``; shallower pops levels, adding
    one ``dedent`` each, down to a level equal to it (none equal: the text is rejected, Lark's
    ``DedentError``). Inside brackets (``open_brackets`` minus ``close_brackets`` seen so far above
    zero) the newline is dropped. At the end of input one ``dedent`` per level above 0 comes before
    the end. ``indent`` and ``dedent`` are declared terminals: the lexer never produces them.
    """

    newline: str
    indent: str
    dedent: str
    open_brackets: tuple[str, ...] = ()
    close_brackets: tuple[str, ...] = ()
    tab_len: int = 8
    line_breaks: str = "\n"
    """The characters after which a line's indentation is measured: Lark's ``Indenter`` measures after the last
    ``\n``; CPython's tokenizer also ends a line at a lone ``\r``."""
    eof_newline: bool = False
    """CPython's ends of input: a newline is added when the last terminal is not one, the line after a final
    newline is not measured (trailing blank lines never indent), and the first line is measured as if a line
    break came before the input (an indented first line is an unexpected indent)."""


@dataclass(frozen=True)
class Semicolons:
    """Semicolon insertion as Go's specification states it, as data the lexer runs itself.

    The ``newlines`` terminals (a line break; a comment holding one) never reach the parser as
    themselves: right after a terminal of ``triggers`` (the last one the parser got) one becomes a
    ``semicolon``; anywhere else it is dropped. With ``at_end``, the end of input after a trigger also
    gets a semicolon.
    """

    newlines: tuple[str, ...]
    semicolon: str
    triggers: tuple[str, ...]
    at_end: bool = True


@dataclass(frozen=True)
class Grammar:
    """A context-free grammar with a separate lexer: the one shape all front ends compile to.

    Terminals in ``ignore`` are consumed by the lexer between other terminals and never
    reach the parser. ``conflicts`` says what the LALR(1) parser does with a shift/reduce
    conflict: ``"resolve"`` shifts (as Lark does), ``"error"`` refuses the grammar. Build one with a
    front end (``Grammar.from_lark``, ``Grammar.builtin``, ..., attached by :mod:`grammask.grammar`)
    rather than by hand; the constructor checks that every name is defined and raises
    :class:`~grammask.errors.GrammarError` otherwise (and for another ``conflicts``). ``notes`` do
    not change the language, so they are left out of equality and the fingerprint.
    """

    terminals: tuple[Terminal, ...]
    rules: tuple[Rule, ...]
    start: str
    ignore: frozenset[str] = frozenset()
    name: str = field(default="grammar", compare=False)
    notes: tuple[str, ...] = field(default=(), compare=False)
    """What the front end could not enforce (e.g. schema keywords dropped with ``strict=False``)."""
    conflicts: str = "resolve"
    declared: tuple[str, ...] = ()
    """Terminals the parser sees that no lexer rule produces (Lark's ``%declare``), e.g. indentation's."""
    indentation: Indentation | None = None
    semicolons: Semicolons | None = None
    lexer: str = "basic"
    """``"basic"``: all terminals compete for every lexeme; ``"contextual"``: only those the parser's state
    accepts, and the ignored ones (Lark's two lexers for LALR)."""
    first_match: bool = False
    """Lex as Lark's lexer tries its terminals, first match in its order: a string some earlier terminal
    matches a proper prefix of (and not whole) is no lexeme of a later one (:mod:`grammask.automata.first_match`).
    Set by the Lark front end; grammars grammask writes itself keep the plain lexing rule."""
    backtrack: bool = False
    """Back up as Lark's lexer (Python's ``re``) does: a lexeme that runs on past a complete match and then dies
    falls back to that match, and the text after it is lexed again (:mod:`grammask.automata.fallback`). Set by
    the Lark front end; the built-in grammars (whose reference is CPython, gofmt or the RFC, not Lark) and grammars
    grammask writes itself keep the plain lexing rule."""

    def __post_init__(self) -> None:
        term_names = [t.name for t in self.terminals]
        if len(set(term_names)) != len(term_names):
            dup = sorted({n for n in term_names if term_names.count(n) > 1})
            raise GrammarError(f"terminal defined twice: {', '.join(dup)}")
        terms = set(term_names)
        clash = terms & set(self.declared)
        if clash:
            raise GrammarError(f"terminal both defined and declared: {', '.join(sorted(clash))}")
        terms |= set(self.declared)
        nonterms = {r.lhs for r in self.rules}
        both = terms & nonterms
        if both:
            raise GrammarError(f"name used both as terminal and rule: {', '.join(sorted(both))}")
        if self.start not in nonterms:
            raise UndefinedSymbolError(f"start rule '{self.start}' is not defined")
        for rule in self.rules:
            for sym in rule.rhs:
                if sym not in terms and sym not in nonterms:
                    raise UndefinedSymbolError(f"rule '{rule.lhs}' uses undefined symbol '{sym}'")
        missing = self.ignore - terms
        if missing:
            raise UndefinedSymbolError(f"%ignore names undefined terminal(s): {', '.join(sorted(missing))}")
        if self.lexer not in ("basic", "contextual"):
            raise ConfigurationError(f"lexer must be 'basic' or 'contextual', not {self.lexer!r}")
        if self.conflicts not in ("resolve", "error"):
            raise GrammarError(f"conflicts must be 'resolve' or 'error', not {self.conflicts!r}")
        if self.indentation is not None:
            self._check_indentation(self.indentation, set(term_names))
        if self.semicolons is not None:
            self._check_semicolons(self.semicolons, set(term_names))
        units = {t.count.unit for t in self.terminals if t.count is not None}
        if len(units) > 1:
            raise GrammarError(f"counted terminals must all count the same unit, not {' and '.join(sorted(units))}")

    def _check_semicolons(self, rules: Semicolons, lexed: set[str]) -> None:
        if self.indentation is not None:
            raise GrammarError("a grammar has at most one postlex: indentation or semicolon insertion, not both")
        missing = [n for n in (*rules.newlines, rules.semicolon, *rules.triggers) if n not in lexed]
        if missing:
            raise UndefinedSymbolError(
                f"the semicolon postlex names terminal(s) the grammar lacks: {', '.join(dict.fromkeys(missing))}"
            )
        ignored = [n for n in (*rules.newlines, rules.semicolon) if n in self.ignore]
        if ignored:
            raise GrammarError(f"the semicolon postlex's terminal(s) {', '.join(ignored)} must not be %ignore-d")

    def _check_indentation(self, rules: Indentation, lexed: set[str]) -> None:
        missing = [n for n in (rules.newline,) if n not in lexed]
        missing += [n for n in (rules.indent, rules.dedent) if n not in self.declared]
        if missing:
            raise UndefinedSymbolError(
                f"the indenter names terminal(s) the grammar lacks: {', '.join(missing)} (the newline must be a "
                f"terminal with a pattern; indent and dedent must be %declare-d)"
            )
        if rules.newline in self.ignore:
            raise GrammarError(f"the indenter's newline terminal {rules.newline} must not be %ignore-d")
        if rules.tab_len < 1:
            raise GrammarError(f"the indenter's tab_len must be at least 1, not {rules.tab_len}")

    @property
    def terminal_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.terminals)

    @property
    def nonterminals(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for r in self.rules:
            seen.setdefault(r.lhs, None)
        return tuple(seen)

    def terminal(self, name: str) -> Terminal:
        """The terminal named ``name``; raises :class:`~grammask.errors.UndefinedSymbolError` if there is none."""
        for t in self.terminals:
            if t.name == name:
                return t
        raise UndefinedSymbolError(f"no terminal named '{name}'")

    def fingerprint(self) -> str:
        """A stable hash of everything that affects compilation (not the display name)."""
        doc = {
            "terminals": [[t.name, t.pattern, t.flags, t.literal, t.priority]
                          + ([] if t.count is None else [dataclasses.astuple(t.count)]) for t in self.terminals],
            "rules": [[r.lhs, list(r.rhs), r.priority] for r in self.rules],
            "start": self.start,
            "ignore": sorted(self.ignore),
            "conflicts": self.conflicts,
        }
        if self.declared or self.indentation is not None:
            doc["declared"] = list(self.declared)
            doc["indentation"] = None if self.indentation is None else dataclasses.asdict(self.indentation)
        if self.semicolons is not None:
            doc["semicolons"] = dataclasses.asdict(self.semicolons)
        if self.lexer != "basic":
            doc["lexer"] = self.lexer
        if self.first_match:
            doc["first_match"] = True
        if self.backtrack:
            doc["backtrack"] = True
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def require_text(text: object, what: str) -> str:
    """``text``, checked to be a str.

    Raises :class:`GrammarError` naming ``what`` otherwise (bytes included: decode them first).
    """
    if not isinstance(text, str):
        raise GrammarError(f"{what} must be text (a str), got {type(text).__name__}")
    return text
