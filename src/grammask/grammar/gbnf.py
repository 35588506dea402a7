"""llama.cpp GBNF grammars to the grammar IR, with exactly the same language.

GBNF is scannerless: its rules describe characters, not tokens. Two conversions keep the
language exact under grammask's lexer:

* A grammar without recursion is regular: it becomes one terminal (as :func:`grammar_from_regex`
  does), so matching needs no parser.
* Otherwise every character is a token: the character sets the grammar uses are split into
  disjoint classes, each a one-character terminal (so lexing is trivially exact), and the rules
  become BNF over those terminals (``*`` and ``+`` as left-recursive lists). The result must be
  LALR(1); a grammar that is not (for instance one that is ambiguous, as GBNF allows) raises
  :class:`GrammarConflictError` naming the conflicting rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from grammask.automata.regex import Alt, Chars, Concat, Node, Repeat
from grammask.automata.utf8 import (
    SCALARS,
    CodeRanges,
    complement,
    difference,
    normalize,
    scalars_only,
)
from grammask.errors import (
    EmptyLanguageError,
    GrammarConflictError,
    GrammarSyntaxError,
    UndefinedSymbolError,
)
from grammask.grammar.ir import Grammar, Rule, Terminal, require_text
from grammask.grammar.json_schema.automaton import dfa_from_ast
from grammask.grammar.regex_frontend import (
    alt,
    concat,
    is_nothing,
    nullable,
    render_ranges,
    render_regex,
    repeat,
    without_empty,
)

# --- GBNF syntax -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """A reference to rule ``name``."""

    name: str
    line: int
    column: int


Expr = Node | Ref  # Chars / Concat / Alt / Repeat over characters, with Ref leaves


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "/": "/"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, message: str) -> GrammarSyntaxError:
        line = self.text.count("\n", 0, self.pos) + 1
        column = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        return GrammarSyntaxError(f"GBNF: {message}", line, column)

    def where(self) -> tuple[int, int]:
        line = self.text.count("\n", 0, self.pos) + 1
        return line, self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def space(self, newlines: bool) -> None:
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == "#":
                while self.pos < len(self.text) and self.text[self.pos] not in "\r\n":
                    self.pos += 1
            elif c in " \t" or (newlines and c in "\r\n"):
                self.pos += 1
            else:
                return

    def _next_is_bar(self) -> bool:
        """Whether an alternative follows, possibly on the next line (``|`` leading the line)."""
        saved = self.pos
        self.space(True)
        found = self.peek() == "|"
        self.pos = saved
        return found

    def name(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isascii() and (self.text[self.pos].isalnum() or self.text[self.pos] in "-_")):
            self.pos += 1
        if start == self.pos:
            raise self.error(f"expected a rule name, found {self.peek()!r}")
        return self.text[start : self.pos]

    def rules(self) -> dict[str, tuple[Expr, tuple[int, int]]]:
        out: dict[str, tuple[Expr, tuple[int, int]]] = {}
        self.space(True)
        while self.pos < len(self.text):
            where = self.where()
            name = self.name()
            self.space(False)
            if not self.text.startswith("::=", self.pos):
                raise self.error(f"expected '::=' after rule name {name!r}")
            self.pos += 3
            self.space(True)
            body = self.alternatives(nested=False)
            if name in out:
                raise GrammarSyntaxError(f"GBNF: rule {name!r} is defined twice", *where)
            out[name] = (body, where)
            if self.pos < len(self.text) and self.peek() not in "\r\n":
                raise self.error(f"unexpected {self.peek()!r}")
            self.space(True)
        return out

    def alternatives(self, nested: bool) -> Expr:
        options = [self.sequence(nested)]
        while self._next_is_bar():
            self.space(True)
            self.pos += 1
            self.space(True)
            options.append(self.sequence(nested))
        return options[0] if len(options) == 1 else _Alt(tuple(options))

    def sequence(self, nested: bool) -> Expr:
        items: list[Expr] = []
        while True:
            c = self.peek()
            if c == '"':
                item = self.literal()
            elif c == "[":
                item = Chars(self.char_class())
            elif c == ".":
                self.pos += 1
                item = Chars(SCALARS)
            elif c == "(":
                self.pos += 1
                self.space(True)
                item = self.alternatives(nested=True)
                if self.peek() != ")":
                    raise self.error("expected ')'")
                self.pos += 1
            elif c and (c.isascii() and (c.isalnum() or c in "-_")):
                line, column = self.where()
                item = Ref(self.name(), line, column)
            else:
                break
            self.space(nested)
            item = self.quantifier(item)
            items.append(item)
            self.space(nested)
        if not items:
            return Concat(())
        return items[0] if len(items) == 1 else _Seq(tuple(items))

    def quantifier(self, item: Expr) -> Expr:
        c = self.peek()
        if c in ("*", "+", "?"):
            self.pos += 1
            return _Rep(item, {"*": 0, "+": 1, "?": 0}[c], None if c != "?" else 1)
        if c == "{":
            end = self.text.find("}", self.pos)
            if end < 0:
                raise self.error("unclosed '{' repetition")
            body = self.text[self.pos + 1 : end].replace(" ", "")
            try:
                if "," in body:
                    lo_text, hi_text = body.split(",", 1)
                    lo, hi = int(lo_text or 0), (int(hi_text) if hi_text else None)
                else:
                    lo = hi = int(body)
            except ValueError:
                raise self.error(f"bad repetition {{{body}}}") from None
            self.pos = end + 1
            self.space(False)
            return _Rep(item, lo, hi)
        return item

    def char(self) -> int:
        c = self.peek()
        if not c:
            raise self.error("unexpected end of grammar")
        self.pos += 1
        if c != "\\":
            return ord(c)
        e = self.peek()
        self.pos += 1
        if e in _ESCAPES:
            return ord(_ESCAPES[e])
        if e in _HEX_ESCAPES:
            digits = self.text[self.pos : self.pos + _HEX_ESCAPES[e]]
            try:
                value = int(digits, 16)
            except ValueError:
                raise self.error(f"bad escape \\{e}{digits}") from None
            self.pos += _HEX_ESCAPES[e]
            return value
        raise self.error(f"unknown escape \\{e}")

    def literal(self) -> Expr:
        self.pos += 1
        chars = []
        while self.peek() != '"':
            if not self.peek():
                raise self.error("unterminated string literal")
            chars.append(self.char())
        self.pos += 1
        return concat(*(Chars(scalars_only(((c, c),))) for c in chars))

    def char_class(self) -> CodeRanges:
        self.pos += 1
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        ranges = []
        while self.peek() != "]":
            if not self.peek():
                raise self.error("unterminated character class")
            lo = self.char()
            hi = lo
            if self.peek() == "-" and self.text[self.pos + 1 : self.pos + 2] not in ("]", ""):
                self.pos += 1
                hi = self.char()
            ranges.append((lo, hi))
        self.pos += 1
        members = scalars_only(normalize(ranges))
        return complement(members) if negate else members


# Structural nodes that may hold rule references (the regex AST holds characters only).
@dataclass(frozen=True)
class _Seq:
    parts: tuple[Expr, ...]


@dataclass(frozen=True)
class _Alt:
    options: tuple[Expr, ...]


@dataclass(frozen=True)
class _Rep:
    node: Expr
    min: int
    max: int | None


# --- conversion ------------------------------------------------------------------------------


def grammar_from_gbnf(text: str, *, start: str = "root", name: str = "gbnf") -> Grammar:
    """Convert a llama.cpp GBNF grammar (start rule ``root``) to a grammar with the same language.

    Raises :class:`~grammask.errors.GrammarSyntaxError` (with line and column) for text that is not
    GBNF or a rule defined twice, :class:`~grammask.errors.UndefinedSymbolError` for a missing start
    rule or a reference to an undefined rule, :class:`~grammask.errors.EmptyLanguageError` for a
    grammar that matches no string, and :class:`~grammask.errors.GrammarConflictError` for a
    recursive grammar that is not LALR(1) once every character is a token.
    """
    rules = _Parser(require_text(text, "a GBNF grammar")).rules()
    if start not in rules:
        raise UndefinedSymbolError(f"GBNF: the grammar has no '{start}' rule")
    reachable = _reachable(rules, start)
    if not _is_recursive(rules, reachable):
        return _regular_grammar(_to_node(rules[start][0], rules), name)
    return _character_grammar(rules, reachable, start, name)


def _refs(expr: Expr):
    if isinstance(expr, Ref):
        yield expr
    elif isinstance(expr, (_Seq, Concat)):
        for p in expr.parts:
            yield from _refs(p)
    elif isinstance(expr, (_Alt, Alt)):
        for o in expr.options:
            yield from _refs(o)
    elif isinstance(expr, (_Rep, Repeat)):
        yield from _refs(expr.node)


def _reachable(rules, start: str) -> list[str]:
    seen = {start: None}
    todo = [start]
    while todo:
        for ref in _refs(rules[todo.pop()][0]):
            if ref.name not in rules:
                raise UndefinedSymbolError(f"GBNF: undefined rule '{ref.name}' (line {ref.line}, column {ref.column})")
            if ref.name not in seen:
                seen[ref.name] = None
                todo.append(ref.name)
    return list(seen)


def _is_recursive(rules, names: list[str]) -> bool:
    state: dict[str, int] = {}

    def visit(n: str) -> bool:
        state[n] = 1
        for ref in _refs(rules[n][0]):
            s = state.get(ref.name, 0)
            if s == 1 or (s == 0 and visit(ref.name)):
                return True
        state[n] = 2
        return False

    return any(state.get(n, 0) == 0 and visit(n) for n in names)


def _to_node(expr: Expr, rules) -> Node:
    """The regex AST of a non-recursive expression, rule references inlined."""
    if isinstance(expr, Ref):
        return _to_node(rules[expr.name][0], rules)
    if isinstance(expr, (_Seq, Concat)):
        return concat(*(_to_node(p, rules) for p in expr.parts))
    if isinstance(expr, (_Alt, Alt)):
        return alt(*(_to_node(o, rules) for o in expr.options))
    if isinstance(expr, (_Rep, Repeat)):
        return repeat(_to_node(expr.node, rules), expr.min, expr.max)
    return expr


def _regular_grammar(node: Node, name: str) -> Grammar:
    if is_nothing(node):
        raise EmptyLanguageError("GBNF: the grammar matches no string")
    body = without_empty(node)
    terminals, rules = (), []
    if not is_nothing(body):
        terminals = (Terminal("ROOT", render_regex(body)),)
        rules.append(Rule("start", ("ROOT",)))
    if nullable(node):
        rules.append(Rule("start", ()))
    return Grammar(terminals, tuple(rules), "start", name=name)


def _char_sets(expr: Expr, out: list[CodeRanges]) -> None:
    if isinstance(expr, Chars):
        out.append(expr.ranges)
    elif isinstance(expr, (_Seq, Concat)):
        for p in expr.parts:
            _char_sets(p, out)
    elif isinstance(expr, (_Alt, Alt)):
        for o in expr.options:
            _char_sets(o, out)
    elif isinstance(expr, (_Rep, Repeat)):
        _char_sets(expr.node, out)


def _atoms(sets: list[CodeRanges]) -> list[CodeRanges]:
    """The coarsest partition of the characters in ``sets`` that each set is a union of."""
    atoms: list[CodeRanges] = []
    for s in dict.fromkeys(sets):
        refined = []
        rest = s
        for a in atoms:
            inside = difference(a, difference(a, s))
            outside = difference(a, s)
            refined += [p for p in (inside, outside) if p]
            rest = difference(rest, a)
        if rest:
            refined.append(rest)
        atoms = refined
    return atoms


class _Bnf:
    """EBNF over one-character terminals to BNF rules.

    Maximal regular stretches of a rule (characters, and references to rules without
    recursion) become one deterministic automaton each, written as left-linear rules over
    non-empty prefixes (``N_t -> N_s c``), so that GBNF's freedom to be ambiguous inside
    regular parts costs no determinism; only the recursive structure is left to the parser.
    """

    def __init__(self, rules, recursive: set[str], atoms: list[CodeRanges], rule_names: dict[str, str]):
        self.source = rules
        self.recursive = recursive
        self.atoms = atoms
        self.terminal = [f"C{i}" for i in range(len(atoms))]
        self.rule_names = rule_names
        self.rules: list[Rule] = []
        self.helpers: dict[object, str] = {}

    def helper(self, key: object, prefix: str) -> tuple[str, bool]:
        name = self.helpers.get(key)
        if name is not None:
            return name, False
        name = self.helpers[key] = f"{prefix}_{len(self.helpers)}"
        return name, True

    def regular(self, expr: Expr) -> bool:
        return all(ref.name not in self.recursive for ref in _refs(expr))

    def symbols(self, expr: Expr) -> list[str]:
        """The symbols of one alternative for ``expr`` (helpers added as needed)."""
        if self.regular(expr):
            return self.segment(_to_node(expr, self.source))
        if isinstance(expr, Ref):
            return [self.rule_names[expr.name]]
        if isinstance(expr, (_Seq, Concat)):
            out: list[str] = []
            run: list[Expr] = []
            for part in expr.parts:
                if self.regular(part):
                    run.append(part)
                    continue
                out += self.segment(concat(*(_to_node(r, self.source) for r in run)))
                run = []
                out += self.symbols(part)
            return out + self.segment(concat(*(_to_node(r, self.source) for r in run)))
        if isinstance(expr, (_Alt, Alt)):
            name, new = self.helper(expr, "group")
            if new:
                regular = [o for o in expr.options if self.regular(o)]
                options = [o for o in expr.options if not self.regular(o)]
                if regular:
                    self.rules.append(Rule(name, tuple(self.segment(alt(*(_to_node(o, self.source) for o in regular))))))
                for option in options:
                    self.rules.append(Rule(name, tuple(self.symbols(option))))
            return [name]
        return [self.repeat(expr)]

    def segment(self, node: Node) -> list[str]:
        """Symbols for a regular language: none for the empty string, else one automaton nonterminal."""
        if node == Concat(()):
            return []
        name, new = self.helper(("segment", node), "segment")
        if new:
            dfa = dfa_from_ast(node)
            prefix = [f"{name}_{q}" for q in range(dfa.n_states)]
            for q, row in enumerate(dfa.rows):
                by_target: dict[int, list[tuple[int, int]]] = {}
                for lo, hi, target in row:
                    by_target.setdefault(target, []).append((lo, hi))
                for target, ranges in by_target.items():
                    for i in self._atoms_in(normalize(ranges)):
                        self.rules.append(Rule(prefix[target], (self.terminal[i],) if q == 0 else (prefix[q], self.terminal[i])))
            self.rules += [Rule(name, (prefix[q],)) for q in sorted(dfa.accepting) if q != 0 or _reenters_start(dfa)]
            if 0 in dfa.accepting:
                self.rules.append(Rule(name, ()))
        return [name]

    def _atoms_in(self, ranges: CodeRanges) -> list[int]:
        return [i for i, a in enumerate(self.atoms) if not difference(a, ranges)]

    def repeat(self, expr) -> str:
        name, new = self.helper(expr, "repeat")
        if not new:
            return name
        item = tuple(self.symbols(expr.node))
        lo, hi = expr.min, expr.max
        if hi is None:
            # item{lo,}: lo copies, then a left-recursive list.
            rest = f"{name}_more"
            self.rules.append(Rule(rest, ()))
            self.rules.append(Rule(rest, (rest,) + item))
            self.rules.append(Rule(name, item * lo + (rest,)))
            return name
        # item{lo,hi}: lo copies, then up to hi-lo optional copies, nested to the right.
        tail = None
        for k in range(hi - lo):
            nxt = f"{name}_opt{k}"
            self.rules.append(Rule(nxt, ()))
            self.rules.append(Rule(nxt, item + ((tail,) if tail else ())))
            tail = nxt
        self.rules.append(Rule(name, item * lo + ((tail,) if tail else ())))
        return name


def _reenters_start(dfa) -> bool:
    return any(target == 0 for row in dfa.rows for _, _, target in row)


def _recursive_rules(rules, names: list[str]) -> set[str]:
    """The rules from which some cycle of references can be reached."""
    graph = {n: {r.name for r in _refs(rules[n][0])} for n in names}
    out: set[str] = set()
    for n in names:
        seen, todo = set(), list(graph[n])
        while todo:
            m = todo.pop()
            if m == n or m in out:
                out.add(n)
                break
            if m not in seen:
                seen.add(m)
                todo += graph[m]
    changed = True
    while changed:
        changed = False
        for n in names:
            if n not in out and graph[n] & out:
                out.add(n)
                changed = True
    return out


def _character_grammar(rules, reachable: list[str], start: str, name: str) -> Grammar:
    sets: list[CodeRanges] = []
    for n in reachable:
        _char_sets(rules[n][0], sets)
    atoms = _atoms([s for s in sets if s])
    recursive = _recursive_rules(rules, reachable)
    rule_names = {n: "rule_" + "".join(c if c.isalnum() else "_" for c in n.lower()) + f"_{i}" for i, n in enumerate(reachable)}
    bnf = _Bnf(rules, recursive, atoms, rule_names)
    out: list[Rule] = []
    for n in reachable:
        if n not in recursive:
            continue
        body = rules[n][0]
        options = body.options if isinstance(body, (_Alt, Alt)) else (body,)
        for option in options:
            out.append(Rule(rule_names[n], tuple(bnf.symbols(option))))
    out += bnf.rules
    out.append(Rule("start", (rule_names[start],)))
    terminals = tuple(Terminal(t, render_ranges(a)) for t, a in zip(bnf.terminal, atoms))
    grammar = Grammar(terminals, tuple(out), "start", name=name)
    _check_lalr(grammar)
    return grammar


def _check_lalr(grammar: Grammar) -> None:
    from lark.exceptions import GrammarError as LarkGrammarError

    from grammask.grammar.lark_export import lark_parser

    try:
        lark_parser(grammar, strict=True)
    except LarkGrammarError as e:
        raise GrammarConflictError(
            "GBNF grammar is not LALR(1) once every character is a token (GBNF allows ambiguous or "
            f"non-deterministic grammars, grammask needs one token of lookahead to decide): {str(e).strip().splitlines()[0]} "
            f"{' '.join(str(e).strip().splitlines()[1:3])}"
        ) from None
