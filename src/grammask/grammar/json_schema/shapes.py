"""The normalized form of a schema: for each JSON type, exactly which values it admits.

A :class:`Shape` says, type by type, what a schema accepts: whether ``null``, which booleans,
a :class:`NumberSet`, a union of :class:`StringSet` s, and unions of array and object
alternatives. Array and object shapes refer to their members' schemas by :data:`Node`
(a set of schema indices that all apply, i.e. their ``allOf``), so recursive schemas stay
finite. Shapes are closed under intersection (``allOf``) and union (``anyOf``), and under
complement where the complement is expressible (``not``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grammask.errors import NO_DEADLINE, Deadline
from grammask.grammar.json_schema.numbers import NumberSet
from grammask.grammar.json_schema.strings import StringSet

# A node: the schemas (indices into the schema table) that all apply to one value. The empty
# node is the schema ``true``.
Node = frozenset[int]
TRUE_NODE: Node = frozenset()


class Implicit:
    """Marker for ``additionalProperties`` left unset (allowed by the specification, unless the
    compiler is asked to forbid undeclared properties)."""

    def __repr__(self) -> str:
        return "IMPLICIT"


IMPLICIT = Implicit()
# What an undeclared property may hold: a node, IMPLICIT, or None (not allowed).
Additional = Node | Implicit | None


def join(a: Node | None, b: Node | None) -> Node | None:
    """Both nodes at once (None, 'nothing allowed', absorbs)."""
    return None if a is None or b is None else a | b


@dataclass(frozen=True)
class ArrayShape:
    """Arrays whose item ``i`` matches ``prefix[i]`` (then ``items``; None: no more items), of ``min..max`` items."""

    prefix: tuple[Node, ...] = ()
    items: Node | None = TRUE_NODE
    min_items: int = 0
    max_items: int | None = None

    def node_at(self, i: int) -> Node | None:
        return self.prefix[i] if i < len(self.prefix) else self.items

    def merge(self, other: ArrayShape) -> ArrayShape:
        max_items = _min_bound(self.max_items, other.max_items)
        prefix = []
        for i in range(max(len(self.prefix), len(other.prefix))):
            node = join(self.node_at(i), other.node_at(i))
            if node is None:
                max_items = _min_bound(max_items, i)
                break
            prefix.append(node)
        return ArrayShape(tuple(prefix), join(self.items, other.items), max(self.min_items, other.min_items), max_items)


def _min_bound(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


@dataclass(frozen=True)
class ExtraRule:
    """One schema's rule for undeclared properties: the nodes of the ``patternProperties`` a name
    matches, or ``additional`` when it matches none."""

    patterns: tuple[tuple[StringSet, Node], ...] = ()
    additional: Additional = IMPLICIT

    def value_for(self, name: str) -> Additional:
        matched = [node for pattern, node in self.patterns if pattern.contains(name)]
        if matched:
            return frozenset().union(*matched)
        return self.additional


@dataclass(frozen=True)
class ObjectShape:
    """Objects with declared properties (in order; node None: the name is not allowed),
    ``required`` names, rules for other names (all apply), and the set all names must be in."""

    props: tuple[tuple[str, Node | None], ...] = ()
    required: frozenset[str] = frozenset()
    extras: tuple[ExtraRule, ...] = (ExtraRule(),)
    names: StringSet = field(default_factory=StringSet.everything)

    def value_for(self, name: str) -> Node | None:
        """The node a property ``name`` must match (None: it may not appear; unset
        ``additionalProperties`` allow it, as the specification says)."""
        if not self.names.contains(name):
            return None
        for prop, node in self.props:
            if prop == name:
                return node
        return _extras_value(self.extras, lambda rule: rule.value_for(name), allow_implicit=True)

    def merge(self, other: ObjectShape) -> ObjectShape:
        names = [p for p, _ in self.props] + [p for p, _ in other.props if p not in dict(self.props)]
        props = tuple((n, join(self.value_for(n), other.value_for(n))) for n in names)
        return ObjectShape(props, self.required | other.required, _unique(self.extras + other.extras),
                           self.names.intersect(other.names))

    def is_unsatisfiable(self) -> bool:
        allowed = {n for n, node in self.props if node is not None}
        return bool(self.required - allowed)


def _extras_value(extras, value_of, allow_implicit: bool) -> Node | None:
    out: Node = frozenset()
    for rule in extras:
        value = value_of(rule)
        if value is None or (value is IMPLICIT and not allow_implicit):
            return None
        if value is not IMPLICIT:
            out |= value
    return out


def extras_value(extras: tuple[ExtraRule, ...], in_pattern, allow_implicit: bool) -> Node | None:
    """The node for undeclared names that ``in_pattern(pattern)`` says match exactly those patterns."""

    def value_of(rule: ExtraRule) -> Additional:
        matched = [node for pattern, node in rule.patterns if in_pattern(pattern)]
        return frozenset().union(*matched) if matched else rule.additional

    return _extras_value(extras, value_of, allow_implicit)


@dataclass(frozen=True)
class Shape:
    """The values a schema admits, type by type."""

    null: bool = False
    booleans: frozenset[bool] = frozenset()
    numbers: NumberSet = field(default_factory=NumberSet.empty)
    strings: tuple[StringSet, ...] = ()
    arrays: tuple[ArrayShape, ...] = ()
    objects: tuple[ObjectShape, ...] = ()

    @classmethod
    def anything(cls) -> Shape:
        return cls(True, frozenset({True, False}), NumberSet.numbers(), (StringSet.everything(),), (ArrayShape(),), (ObjectShape(),))

    def intersect(self, other: Shape, deadline: Deadline = NO_DEADLINE) -> Shape:
        """The values both admit; ``deadline`` is checked before each pair of object shapes is merged and in the
        string languages' products."""
        strings = [a.intersect(b, deadline) for a in self.strings for b in other.strings]
        objects = []
        for a in self.objects:
            for b in other.objects:
                deadline.check("the JSON Schema shapes")
                merged = a.merge(b)
                if not merged.is_unsatisfiable():
                    objects.append(merged)
        return Shape(
            self.null and other.null,
            self.booleans & other.booleans,
            self.numbers.intersect(other.numbers),
            _unique_strings(s for s in strings if not s.is_empty()),
            _unique(a.merge(b) for a in self.arrays for b in other.arrays),
            _unique(objects),
        )

    def union(self, *others: Shape) -> Shape:
        """The values of this shape or of any of ``others`` (in one pass: an enum may list thousands)."""
        every = (self, *others)
        numbers = self.numbers
        for other in others:
            numbers = numbers.union(other.numbers)
        return Shape(
            any(s.null for s in every),
            frozenset().union(*(s.booleans for s in every)),
            numbers,
            _unique_strings(x for s in every for x in s.strings),
            _unique(x for s in every for x in s.arrays),
            _unique(x for s in every for x in s.objects),
        )

    def has_values(self) -> bool:
        """False only if no value of any type is admitted by the shape's own constraints."""
        return bool(self.null or self.booleans or not self.numbers.is_empty() or self.strings or self.arrays or self.objects)


def _unique(items) -> tuple:
    return tuple(dict.fromkeys(items))


def _unique_strings(items) -> tuple[StringSet, ...]:
    seen: dict[tuple, StringSet] = {}
    for s in items:
        seen.setdefault(s.key, s)
    if ("all",) in seen:
        return (seen[("all",)],)
    return tuple(seen.values())
