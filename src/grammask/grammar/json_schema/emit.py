"""Shapes to grammar rules: values, objects, arrays, whitespace, and the lexer terminals they need."""

from __future__ import annotations

import re
from dataclasses import dataclass

from grammask.errors import (
    Deadline,
    EmptyLanguageError,
    UnsupportedRegexError,
    UnsupportedSchemaError,
)
from grammask.grammar.ir import Rule, Terminal
from grammask.grammar.json_schema.family import Family
from grammask.grammar.json_schema.numbers import NumberSet
from grammask.grammar.json_schema.options import SchemaOptions
from grammask.grammar.json_schema.reader import (
    MAX_ANY_ORDER,
    MAX_COUNTED_ITEMS,
    SchemaReader,
)
from grammask.grammar.json_schema.shapes import (
    ArrayShape,
    ExtraRule,
    Node,
    ObjectShape,
    extras_value,
)
from grammask.grammar.json_schema.strings import StringSet

MAX_INDENT_DEPTH = 16


@dataclass(frozen=True)
class Layout:
    """Where a value sits: ``depth`` levels deep in indented output, or None for compact output."""

    depth: int | None

    def child(self) -> Layout:
        if self.depth is None or self.depth + 1 > MAX_INDENT_DEPTH:
            return COMPACT
        return Layout(self.depth + 1)


COMPACT = Layout(None)


class Punctuation:
    """The structural terminals of one whitespace policy."""

    def __init__(self, whitespace: str | int):
        self.whitespace = whitespace
        self.terminals: dict[str, Terminal] = {}

    def _literal(self, name: str, text: str) -> str:
        if name not in self.terminals:
            self.terminals[name] = Terminal(name, re.escape(text), literal=text)
        return name

    def _regex(self, name: str, pattern: str) -> str:
        if name not in self.terminals:
            self.terminals[name] = Terminal(name, pattern)
        return name

    def ignored(self) -> frozenset[str]:
        if self.whitespace == "any":
            self._regex("WS", "[ \\t\\n\\r]+")
            return frozenset({"WS"})
        return frozenset()

    def _indent(self, layout: Layout) -> int | None:
        return layout.depth if isinstance(self.whitespace, int) else None

    def open(self, kind: str, layout: Layout) -> str:
        depth = self._indent(layout)
        name = "LBRACE" if kind == "{" else "LSQB"
        if depth is None:
            return self._literal(name, kind)
        return self._literal(f"{name}_{depth}", kind + "\n" + " " * (self.whitespace * (depth + 1)))

    def close(self, kind: str, layout: Layout) -> str:
        depth = self._indent(layout)
        name = "RBRACE" if kind == "}" else "RSQB"
        if depth is None:
            return self._literal(name, kind)
        return self._literal(f"{name}_{depth}", "\n" + " " * (self.whitespace * depth) + kind)

    def empty(self, kind: str, layout: Layout) -> tuple[str, ...]:
        """``{}`` or ``[]``: two terminals, or one where indentation makes ``{}`` a lexeme of its own."""
        if isinstance(self.whitespace, int):
            name, text = ("EMPTY_OBJECT", "{}") if kind == "{" else ("EMPTY_ARRAY", "[]")
            return (self._literal(name, text),)
        return (self.open(kind, COMPACT), self.close("}" if kind == "{" else "]", COMPACT))

    def comma(self, layout: Layout) -> str:
        depth = self._indent(layout)
        if self.whitespace == "compact":
            return self._regex("COMMA", ", ?")
        if depth is None:
            return self._literal("COMMA", ",")
        return self._literal(f"COMMA_{depth}", ",\n" + " " * (self.whitespace * (depth + 1)))

    def colon(self) -> str:
        if self.whitespace == "compact":
            return self._regex("COLON", ": ?")
        return self._literal("COLON", ": " if isinstance(self.whitespace, int) else ":")

    def keyword(self, text: str) -> str:
        return self._literal(text.upper(), text)


class Emitter:
    """Builds the rules of one schema grammar; :meth:`finish` returns terminals and rules."""

    def __init__(self, reader: SchemaReader, options: SchemaOptions):
        self.reader = reader
        self.punct = Punctuation(options.whitespace)
        self.property_order = options.property_order
        self.allow_implicit = options.additional_properties
        self.rules: list[Rule] = []
        self.strings = Family(reader.deadline)
        self.numbers = Family(reader.deadline)
        self.strings.add(StringSet.everything())
        self._values: dict[tuple, str] = {}
        self._pending: list[tuple[Node, Layout, str]] = []
        self._string_slots: dict[tuple, str] = {}
        self._number_slots: dict[tuple, str] = {}
        self._extra_slots: dict[tuple, tuple[str, tuple[ExtraRule, ...], tuple, frozenset[str], Layout]] = {}
        self._names: dict[str, int] = {}
        self._terminal_names: dict[tuple, str] = {}
        self.unions: list[str] = []

    # --- naming --------------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        n = self._names.get(prefix, 0)
        self._names[prefix] = n + 1
        return f"{prefix}{n}"

    def rule(self, lhs: str, *rhs: str) -> None:
        self.rules.append(Rule(lhs, tuple(rhs)))

    # --- values --------------------------------------------------------------------------

    def value(self, node: Node, layout: Layout) -> str:
        """The nonterminal for values matching ``node`` at ``layout``."""
        self.reader.deadline.check("the JSON Schema rules")
        if self.reader.is_anything(node):
            return self.any_value(layout)
        key = (_shape_key(self.reader.shape(node)), layout)
        name = self._values.get(key)
        if name is None:
            name = self._values[key] = self.fresh("value")
            self._pending.append((node, layout, name))
        return name

    def member(self, prop: str, value: str) -> str:
        """The nonterminal for ``"prop": value``."""
        key = ("member", prop, value)
        name = self._values.get(key)
        if name is None:
            name = self._values[key] = self.fresh("member")
            self.rule(name, self.string_slot((StringSet.literal(prop),)), self.punct.colon(), value)
        return name

    def drain(self) -> None:
        while self._pending:
            node, layout, name = self._pending.pop()
            self._emit_value(node, layout, name)

    def _emit_value(self, node: Node, layout: Layout, name: str) -> None:
        shape = self.reader.shape(node)
        if shape.null:
            self.rule(name, self.punct.keyword("null"))
        for b in sorted(shape.booleans, reverse=True):
            self.rule(name, self.punct.keyword("true" if b else "false"))
        if not shape.numbers.is_empty():
            self.rule(name, self.number_slot(shape.numbers))
        if shape.strings:
            self.rule(name, self.string_slot(shape.strings))
        for array in shape.arrays:
            self.rule(name, self.array(array, layout, self.reader.pointer(node)))
        for obj in shape.objects:
            self.rule(name, self.object(obj, layout))
        if len(shape.arrays) > 1 or len(shape.objects) > 1:
            self.unions.append(self.reader.pointer(node))

    def string_slot(self, languages: tuple[StringSet, ...]) -> str:
        keys = tuple(sorted({self.strings.add(s) for s in languages}))
        name = self._string_slots.get(keys)
        if name is None:
            name = self._string_slots[keys] = self.fresh("string")
        return name

    def number_slot(self, numbers: NumberSet) -> str:
        key = self.numbers.add(numbers)
        name = self._number_slots.get(key)
        if name is None:
            name = self._number_slots[key] = self.fresh("number")
        return name

    def any_value(self, layout: Layout) -> str:
        """The nonterminal for any JSON value at ``layout``."""
        suffix = "" if layout.depth is None else f"_{layout.depth}"
        name = f"any_value{suffix}"
        if ("any", layout) in self._values:
            return name
        self._values[("any", layout)] = name
        p = self.punct
        inner = self.any_value(layout.child())
        comma, colon = p.comma(layout), p.colon()
        string, number = self.string_slot((StringSet.everything(),)), self.number_slot(NumberSet.numbers())
        obj, arr = f"any_object{suffix}", f"any_array{suffix}"
        members, items = f"any_members{suffix}", f"any_items{suffix}"
        for alt in (obj, arr, string, number):
            self.rule(name, alt)
        for word in ("true", "false", "null"):
            self.rule(name, p.keyword(word))
        self.rule(obj, *p.empty("{", layout))
        self.rule(obj, p.open("{", layout), members, p.close("}", layout))
        self.rule(members, string, colon, inner)
        self.rule(members, members, comma, string, colon, inner)
        self.rule(arr, *p.empty("[", layout))
        self.rule(arr, p.open("[", layout), items, p.close("]", layout))
        self.rule(items, inner)
        self.rule(items, items, comma, inner)
        return name

    # --- arrays --------------------------------------------------------------------------

    def array(self, shape: ArrayShape, layout: Layout, where: str) -> str:
        """The rule of an array shape; raises :class:`UnsupportedSchemaError` past ``MAX_COUNTED_ITEMS`` counted items."""
        name = self.fresh("array")
        inner = layout.child()
        p = self.punct
        comma = p.comma(layout)
        indented = isinstance(p.whitespace, int)
        settled = max(len(shape.prefix), shape.min_items)
        last = settled if shape.max_items is None else shape.max_items
        if last > MAX_COUNTED_ITEMS:
            raise UnsupportedSchemaError(f"'maxItems' at {where}: more than {MAX_COUNTED_ITEMS} counted items")
        if shape.min_items == 0 and indented:
            self.rule(name, *p.empty("[", layout))
        open_, close = p.open("[", layout), p.close("]", layout)
        states = [f"{name}_{i}" for i in range(last + 1)]
        self.rule(name, open_, states[0])
        for i in range(last + 1):
            if i >= shape.min_items and (i > 0 or not indented):
                self.rule(states[i], close)
            node = shape.node_at(i)
            if node is None:
                continue
            sep = () if i == 0 else (comma,)
            element = self.value(node, inner)
            if i < last:
                self.rule(states[i], *sep, element, states[i + 1])
            elif shape.max_items is None:
                tail = f"{name}_tail"
                self.rule(states[i], tail, close)
                self.rule(tail, *sep, element)
                self.rule(tail, tail, comma, element)
        return name

    # --- objects -------------------------------------------------------------------------

    def object(self, shape: ObjectShape, layout: Layout) -> str:
        name = self.fresh("object")
        inner = layout.child()
        p = self.punct
        members = []
        for prop, node in shape.props:
            if node is None:
                continue
            members.append((prop, self.member(prop, self.value(node, inner))))
        for prop, _ in shape.props:
            self.strings.add(StringSet.literal(prop))
        declared = frozenset(prop for prop, _ in shape.props)
        extra = self.extra_slot(shape, declared, inner)
        body = _ObjectBody(self, name, members, shape.required, extra, p.comma(layout), isinstance(p.whitespace, int))
        first = body.any_order() if self.property_order == "any" else body.schema_order()
        if not shape.required and isinstance(p.whitespace, int):
            self.rule(name, *p.empty("{", layout))
        self.rule(name, p.open("{", layout), first, p.close("}", layout))
        return name

    def extra_slot(self, shape: ObjectShape, declared: frozenset[str], layout: Layout) -> str:
        names_key = self.strings.add(shape.names)
        for rule in shape.extras:
            for pattern, _ in rule.patterns:
                self.strings.add(pattern)
        key = (shape.extras, names_key, declared, layout)
        slot = self._extra_slots.get(key)
        if slot is None:
            slot = (self.fresh("extra"), shape.extras, names_key, declared, layout)
            self._extra_slots[key] = slot
        return slot[0]

    def _fill_extras(self) -> list[Rule]:
        """Rules of every extras slot for the current string family (may queue new values)."""
        out = []
        groups: dict[tuple, str] = {}
        colon = self.punct.colon()
        for name, extras, names_key, declared, layout in self._extra_slots.values():
            self.reader.deadline.check("the JSON Schema rules")
            by_value: dict[Node, list[tuple]] = {}
            names = self.strings.within(names_key)
            for member in self.strings.terminal_members():
                if member not in names:
                    continue
                language = self.strings.members[member]
                if language.kind == "literal" and language.text in declared:
                    continue
                node = extras_value(extras, lambda pattern, m=member: self.strings.subset(m, pattern.key), self.allow_implicit)
                if node is not None:
                    by_value.setdefault(node, []).append(member)
            for node, keys in by_value.items():
                group = tuple(sorted(keys))
                key_name = groups.get(group)
                if key_name is None:
                    key_name = groups[group] = self.fresh("extra_key")
                    out += [Rule(key_name, (self.string_terminal(k),)) for k in group]
                out.append(Rule(name, (key_name, colon, self.value(node, layout))))
        return out

    # --- finishing -----------------------------------------------------------------------

    def finish(self, start_node: Node) -> tuple[tuple[Terminal, ...], tuple[Rule, ...], frozenset[str]]:
        """Emit everything reachable from ``start_node``; returns terminals, rules and ignored terminals."""
        start_value = self.value(start_node, Layout(0) if isinstance(self.punct.whitespace, int) else COMPACT)
        self.rule("start", start_value)
        ignored = self.punct.ignored()
        while True:
            self.drain()
            self.strings.close()
            self.numbers.close()
            extra_rules = self._fill_extras()
            if not self._pending and self.strings.closed and self.numbers.closed:
                break
        rules = self.rules + extra_rules
        for keys, slot in self._string_slots.items():
            rules += [Rule(slot, (self.string_terminal(m),)) for m in self.strings.contained_in(keys)]
        for key, slot in self._number_slots.items():
            rules += [Rule(slot, (self.number_terminal(m),)) for m in self.numbers.contained_in([key])]
        used = {s for r in rules for s in r.rhs}
        terminals = list(self.punct.terminals.values()) + self._family_terminals(used)
        return tuple(terminals), tuple(_prune(rules, "start", {t.name for t in terminals}, self.reader.deadline)), ignored

    def string_terminal(self, key: tuple) -> str:
        name = self._terminal_names.get(key)
        if name is None:
            language = self.strings.members[key]
            if language.is_everything():
                name = "STRING"
            elif language.kind == "literal":
                name = f"STRING_{_sanitize(language.text)}_{len(self._terminal_names)}"
            else:
                name = f"STRING_{len(self._terminal_names)}"
            self._terminal_names[key] = name
        return name

    def number_terminal(self, key: tuple) -> str:
        name = self._terminal_names.get(key)
        if name is None:
            numbers = self.numbers.members[key]
            if numbers == NumberSet.numbers():
                name = "NUMBER"
            elif numbers == NumberSet.integers():
                name = "INTEGER"
            else:
                name = f"NUMBER_{len(self._terminal_names)}"
            self._terminal_names[key] = name
        return name

    def _family_terminals(self, used: set[str]) -> list[Terminal]:
        """The terminals of the string and number families; a string member no rule uses is left out (every string
        terminal lexes one whole JSON string, so its lexemes are rejected without it just as with it)."""
        out = []
        for key in self.strings.terminal_members():
            if self._terminal_names.get(key) not in used:
                continue
            language = self.strings.members[key]
            try:
                pattern, literal = language.lexeme(self.reader.deadline)
            except UnsupportedRegexError as e:
                raise UnsupportedSchemaError(f"the strings one place of the schema allows ({language.describe()}: its "
                                             f"'pattern', 'format' and length keywords together) cannot be one "
                                             f"terminal: {e}") from e
            out.append(Terminal(self.string_terminal(key), pattern, literal=literal, priority=self.strings.priority(key),
                                count=language.count()))
        for key in self.numbers.terminal_members():
            numbers = self.numbers.members[key]
            out.append(Terminal(self.number_terminal(key), numbers.lexeme(), priority=self.numbers.priority(key)))
        return out


def _shape_key(shape) -> tuple:
    """Equal keys for shapes that admit the same values by the same means (so they share rules)."""
    objects = tuple(
        (o.props, o.required, tuple((tuple((p.key, n) for p, n in r.patterns), r.additional) for r in o.extras), o.names.key)
        for o in shape.objects
    )
    return (shape.null, shape.booleans, shape.numbers.key, tuple(s.key for s in shape.strings), shape.arrays, objects)


def _sanitize(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper()[:24]


class _ObjectBody:
    """The member sequence of one object: declared properties (schema order or any order) and extras.

    Every separator is shifted before the next member is chosen (``after -> "," choice``), so
    the property name after the comma decides which member comes, as LALR(1) needs.
    """

    def __init__(self, emitter: Emitter, name: str, members, required, extra: str, comma: str, indented: bool):
        self.e = emitter
        self.name = name
        self.members = members
        self.required = required
        self.extra = extra
        self.comma = comma
        self.indented = indented

    def schema_order(self) -> str:
        n = len(self.members)
        # after[i]: some member is written, the next may be declared member i or later.
        # choice[i]: a member at position i or later comes next (its separator is consumed).
        # fresh[i]: nothing written yet.
        after = [f"{self.name}_after{i}" for i in range(n + 1)]
        choice = [f"{self.name}_next{i}" for i in range(n + 1)]
        fresh = [f"{self.name}_first{i}" for i in range(n + 1)]
        self.e.rule(choice[n], self.extra, after[n])
        self.e.rule(after[n])
        self.e.rule(after[n], self.comma, choice[n])
        self.e.rule(fresh[n], self.extra, after[n])
        if not self.indented:
            self.e.rule(fresh[n])
        for i in range(n - 1, -1, -1):
            prop, member = self.members[i]
            optional = prop not in self.required
            self.e.rule(choice[i], member, after[i + 1])
            self.e.rule(fresh[i], member, after[i + 1])
            if optional:
                self.e.rule(choice[i], choice[i + 1])
                self.e.rule(fresh[i], fresh[i + 1])
            if all(p not in self.required for p, _ in self.members[i:]):
                self.e.rule(after[i])
            self.e.rule(after[i], self.comma, choice[i])
        return fresh[0]

    def any_order(self) -> str:
        n = len(self.members)
        if n > MAX_ANY_ORDER:
            raise UnsupportedSchemaError(
                f"property_order='any' handles at most {MAX_ANY_ORDER} declared properties per object, "
                f"an object has {n}; use property_order='schema'"
            )
        required = {i for i, (prop, _) in enumerate(self.members) if prop in self.required}
        for mask in range(1 << n):
            done = {i for i in range(n) if mask & (1 << i)}
            after, choice = self._state("after", mask), self._state("next", mask)
            for i, (_, member) in enumerate(self.members):
                if i not in done:
                    self.e.rule(choice, member, self._state("after", mask | (1 << i)))
            self.e.rule(choice, self.extra, after)
            self.e.rule(after, self.comma, choice)
            if required <= done:
                self.e.rule(after)
        first = self._state("first", 0)
        self.e.rule(first, self._state("next", 0))
        if not required and not self.indented:
            self.e.rule(first)
        return first

    def _state(self, kind: str, mask: int) -> str:
        return f"{self.name}_{kind}{mask}"


def _prune(rules: list[Rule], start: str, terminals: set[str], deadline: Deadline) -> list[Rule]:
    """Drop rules that use a nonterminal deriving no sentence, then rules unreachable from ``start``. Raises
    :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed (checked every 16,384 rules of each
    pass: a schema may make hundreds of thousands)."""

    def checked(items):
        for i, item in enumerate(items):
            if not i & 0x3FFF:
                deadline.check("the JSON Schema rules")
            yield item

    productive: set[str] = set(terminals)
    changed = True
    while changed:
        changed = False
        for r in checked(rules):
            if r.lhs not in productive and all(s in productive for s in r.rhs):
                productive.add(r.lhs)
                changed = True
    if start not in productive:
        raise EmptyLanguageError(
            "the schema admits no JSON value (a false schema, an empty enum, contradictory keywords, "
            "or only values grammask does not spell, such as numbers in exponent form under bounds)"
        )
    rules = [r for r in checked(rules) if all(s in productive for s in r.rhs)]
    by_lhs: dict[str, list[Rule]] = {}
    for r in checked(rules):
        by_lhs.setdefault(r.lhs, []).append(r)
    reachable = {start}
    todo = [start]
    while todo:
        for r in by_lhs.get(todo.pop(), ()):
            for s in r.rhs:
                if s in by_lhs and s not in reachable:
                    reachable.add(s)
                    todo.append(s)
    deadline.check("the JSON Schema rules")
    seen = set()
    out = []
    for r in checked(rules):
        if r.lhs in reachable and r not in seen:
            seen.add(r)
            out.append(r)
    return out
