"""JSON Schema (draft 2020-12) documents to :class:`Shape` s, keyword by keyword.

Every keyword either constrains the shape exactly or is reported through :class:`Issues`:
in strict mode as an :class:`UnsupportedSchemaError` naming the keyword and its JSON pointer,
otherwise as a note, the keyword then constraining nothing. Annotation keywords (``title``,
``description``, ``default``, ``examples``...) and unknown keywords constrain nothing by the
specification and are skipped.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from grammask.automata.regex import Alt, Concat, Repeat
from grammask.automata.regex import Node as RegexNode
from grammask.errors import (
    NO_DEADLINE,
    Deadline,
    UnsupportedRegexError,
    UnsupportedSchemaError,
)
from grammask.grammar.json_schema.counted import (
    COUNT_ABOVE,
    MAX_UNROLLED_STATES,
    largest_repeat,
    length_states,
)
from grammask.grammar.json_schema.formats import (
    FORMATS,
    UNENFORCEABLE,
    format_automaton,
)
from grammask.grammar.json_schema.numbers import NumberSet
from grammask.grammar.json_schema.shapes import (
    IMPLICIT,
    TRUE_NODE,
    ArrayShape,
    ExtraRule,
    Node,
    ObjectShape,
    Shape,
)
from grammask.grammar.json_schema.strings import StringSet
from grammask.grammar.regex_frontend import (
    ANY_STRING,
    alt,
    concat,
    parse_pattern,
    split_count,
)

# Keywords that never constrain an instance (annotations, identifiers, containers of subschemas
# reached only through $ref).
_ANNOTATIONS = frozenset(
    {
        "$schema", "$id", "$anchor", "$comment", "$defs", "definitions", "$vocabulary", "title",
        "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
        "contentEncoding", "contentMediaType", "contentSchema",
    }
)
# Keywords grammask does not enforce.
_UNSUPPORTED = {
    "multipleOf": "divisibility is not enforced",
    "uniqueItems": "item uniqueness is not context-free",
    "contains": "'contains' is not enforced",
    "minContains": "'contains' is not enforced",
    "maxContains": "'contains' is not enforced",
    "minProperties": "property counts are not enforced",
    "maxProperties": "property counts are not enforced",
    "dependencies": "property dependencies are not enforced",
    "unevaluatedProperties": "'unevaluatedProperties' is not enforced",
    "unevaluatedItems": "'unevaluatedItems' is not enforced",
    "$dynamicRef": "dynamic references are not resolved",
    "$dynamicAnchor": "dynamic references are not resolved",
    "$recursiveRef": "dynamic references are not resolved",
}
_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
MAX_ANY_ORDER = 8
MAX_COUNTED_ITEMS = 1024
"""The most array items ``minItems``/``maxItems`` may count (each count is a grammar rule)."""


class Issues:
    """Collects keywords that cannot be enforced: raises in strict mode, else keeps a note."""

    def __init__(self, strict: bool):
        self.strict = strict
        self.notes: list[str] = []

    def unsupported(self, keyword: str, pointer: str, why: str) -> None:
        """Report ``keyword`` at ``pointer``: raises :class:`UnsupportedSchemaError` when strict, else notes and warns."""
        message = f"'{keyword}' at {pointer or '#'}: {why}"
        if self.strict:
            raise UnsupportedSchemaError(message + " (strict=False ignores it, with a warning)")
        if message not in self.notes:
            self.notes.append(message)
            warnings.warn(f"JSON Schema keyword ignored: {message}", stacklevel=4)

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)


@dataclass(frozen=True)
class _Complement:
    """A synthetic schema: the complement of a node."""

    node: Node


@dataclass(frozen=True)
class _Entry:
    schema: object
    resolver: object
    pointer: str


class SchemaReader:
    """Reads the schemas of one document into shapes, memoized by node.

    ``deadline`` is checked as each shape is read and combined (raises
    :class:`~grammask.errors.CompileTimeoutError` once it has passed). ``count_lengths``: big length bounds
    and counted repeats are counted beside the lexer state where they can be (else all are unrolled).
    """

    def __init__(self, root: object, issues: Issues, deadline: Deadline = NO_DEADLINE, count_lengths: bool = True):
        self.issues = issues
        self.deadline = deadline
        self.count_lengths = count_lengths
        self.entries: list[_Entry] = []
        self._index: dict[int, int] = {}
        self._shapes: dict[Node, Shape] = {}
        self._reading: set[int] = set()
        self._complements: dict[Node, _Complement] = {}
        resource = Resource.from_contents(root, default_specification=DRAFT202012) if isinstance(root, dict) else None
        uri = (resource.id() if resource else None) or ""
        registry = Registry().with_resource(uri, resource) if resource else Registry()
        try:
            registry = registry.crawl()
        except (TypeError, AttributeError):  # `referencing` walks a keyword's value as a schema where a draft-07
            pass  # document holds a list or a boolean there; embedded `$id`s are then entered as the reader meets them
        self.root = self.add(root, registry.resolver(base_uri=uri), "")

    def add(self, schema: object, resolver, pointer: str) -> int:
        """The index of a schema, registering it (and entering its ``$id`` scope) on first sight."""
        found = self._index.get(id(schema))
        if found is not None:
            return found
        if isinstance(schema, dict) and "$id" in schema and resolver is not None:
            resolver = resolver.in_subresource(Resource.from_contents(schema, default_specification=DRAFT202012))
        self._index[id(schema)] = len(self.entries)
        self.entries.append(_Entry(schema, resolver, pointer))
        return len(self.entries) - 1

    def const_node(self, value: object, pointer: str) -> Node:
        """A node matching exactly ``value``."""
        return frozenset({self.add({"const": value}, None, pointer)})

    def complement_node(self, node: Node) -> Node:
        """A node matching exactly the values ``node`` rejects (read like ``{"not": ...}``)."""
        marker = _Complement(node)
        found = self._complements.setdefault(node, marker)
        return frozenset({self.add(found, None, f"not({self.pointer(node)})")})

    def pointer(self, node: Node) -> str:
        return " & ".join(sorted(self.entries[i].pointer or "#" for i in node)) or "#"

    def shape(self, node: Node) -> Shape:
        found = self._shapes.get(node)
        if found is None:
            found = Shape.anything()
            for i in sorted(node):
                self.deadline.check("the JSON Schema shapes")
                found = found.intersect(self._schema_shape(i), self.deadline)
            self._shapes[node] = found
        return found

    def _schema_shape(self, index: int) -> Shape:
        single = frozenset({index})
        if single in self._shapes:
            return self._shapes[single]
        if index in self._reading:
            entry = self.entries[index]
            raise UnsupportedSchemaError(
                f"'$ref' at {entry.pointer or '#'}: the schema refers to itself without any object or array in between"
            )
        self._reading.add(index)
        try:
            shape = _KeywordReader(self, self.entries[index]).read()
        finally:
            self._reading.discard(index)
        self._shapes[single] = shape
        return shape

    def is_anything(self, node: Node) -> bool:
        """Whether the node admits every JSON value (decided on the shape, conservatively)."""
        return node == TRUE_NODE or _is_anything(self.shape(node), self, depth=2)


def _is_anything(shape: Shape, reader: SchemaReader, depth: int) -> bool:
    if not (shape.null and len(shape.booleans) == 2 and shape.numbers == NumberSet.numbers()):
        return False
    if not any(s.is_everything() for s in shape.strings):
        return False
    return any(_any_array(a, reader, depth) for a in shape.arrays) and any(
        _any_object(o, reader, depth) for o in shape.objects
    )


def _any_node(node, reader: SchemaReader, depth: int) -> bool:
    if node is None:
        return False
    if node == TRUE_NODE:
        return True
    return depth > 0 and _is_anything(reader.shape(node), reader, depth - 1)


def _any_array(a: ArrayShape, reader: SchemaReader, depth: int) -> bool:
    return (
        a.min_items == 0
        and a.max_items is None
        and all(_any_node(p, reader, depth) for p in a.prefix)
        and _any_node(a.items, reader, depth)
    )


def _any_object(o: ObjectShape, reader: SchemaReader, depth: int) -> bool:
    return (
        not o.required
        and o.names.is_everything()
        and all(_any_node(n, reader, depth) for _, n in o.props)
        and all(not r.patterns and (r.additional is IMPLICIT or _any_node(r.additional, reader, depth)) for r in o.extras)
    )


class _KeywordReader:
    """Reads one schema object."""

    def __init__(self, reader: SchemaReader, entry: _Entry):
        self.reader = reader
        self.issues = reader.issues
        self.schema = entry.schema
        self.resolver = entry.resolver
        self.pointer = entry.pointer

    def at(self, *parts: object) -> str:
        return self.pointer + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)

    def sub(self, schema: object, *parts: object) -> Node:
        """The node of a subschema found at ``parts`` below this schema."""
        if schema is True or schema == {}:
            return TRUE_NODE
        if not isinstance(schema, (dict, bool)):
            raise UnsupportedSchemaError(f"{self.at(*parts)}: a schema must be an object or a boolean, not {schema!r}")
        return frozenset({self.reader.add(schema, self.resolver, self.at(*parts))})

    def read(self) -> Shape:
        schema = self.schema
        if isinstance(schema, _Complement):
            complement = self._complement(self.reader.shape(schema.node), "not")
            return Shape.anything() if complement is None else complement
        if schema is True:
            return Shape.anything()
        if schema is False:
            return Shape()
        if not isinstance(schema, dict):
            raise UnsupportedSchemaError(f"{self.pointer or '#'}: a schema must be an object or a boolean, not {schema!r}")
        for keyword in schema:
            if keyword in _UNSUPPORTED and not self._trivial(keyword):
                self.issues.unsupported(keyword, self.at(keyword), _UNSUPPORTED[keyword])
        shape = self._by_type()
        if "enum" in schema or "const" in schema:
            shape = shape.intersect(self._enum(), self.reader.deadline)
        if "$ref" in schema:
            shape = shape.intersect(self._ref(), self.reader.deadline)
        for i, member in enumerate(schema.get("allOf", ())):
            shape = shape.intersect(self.reader.shape(self.sub(member, "allOf", i)), self.reader.deadline)
        if "anyOf" in schema:
            shape = shape.intersect(self._union("anyOf"), self.reader.deadline)
        if "oneOf" in schema:
            shape = shape.intersect(self._one_of(shape), self.reader.deadline)
        for keyword in ("dependentRequired", "dependentSchemas"):
            if schema.get(keyword):
                shape = shape.intersect(self._dependencies(keyword), self.reader.deadline)
        if "not" in schema:
            complement = self._complement(self.reader.shape(self.sub(schema["not"], "not")), "not")
            if complement is not None:
                shape = shape.intersect(complement, self.reader.deadline)
        if "if" in schema:
            shape = shape.intersect(self._conditional(), self.reader.deadline)
        return shape

    def _trivial(self, keyword: str) -> bool:
        """Keywords whose value makes them constrain nothing."""
        value = self.schema[keyword]
        if keyword == "uniqueItems":
            return value is False
        if keyword == "minProperties":
            return value == 0
        if keyword == "dependencies":
            return value == {}
        if keyword in ("unevaluatedProperties", "unevaluatedItems"):
            return value is True or value == {}
        return keyword == "$dynamicAnchor"

    # --- types ---------------------------------------------------------------------------

    def _by_type(self) -> Shape:
        schema = self.schema
        types = schema.get("type", list(_TYPES))
        if isinstance(types, str):
            types = [types]
        unknown = [t for t in types if t not in _TYPES]
        if unknown:
            raise UnsupportedSchemaError(f"'type' at {self.at('type')}: unknown type {unknown[0]!r}")
        numbers = NumberSet.empty()
        if "number" in types:
            numbers = NumberSet.numbers()
        elif "integer" in types:
            numbers = NumberSet.integers()
        return Shape(
            null="null" in types,
            booleans=frozenset({True, False}) if "boolean" in types else frozenset(),
            numbers=self._numbers(numbers) if not numbers.is_empty() else numbers,
            strings=(self._strings(),) if "string" in types else (),
            arrays=(self._array(),) if "array" in types else (),
            objects=(self._object(),) if "object" in types else (),
        )

    def _numbers(self, base: NumberSet) -> NumberSet:
        ops = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
        for keyword, op in ops.items():
            if keyword not in self.schema:
                continue
            bound = self.schema[keyword]
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                raise UnsupportedSchemaError(f"'{keyword}' at {self.at(keyword)}: must be a number, not {bound!r}")
            try:
                base = base.intersect(NumberSet.bounded(op, bound))
            except OverflowError as e:
                self.issues.unsupported(keyword, self.at(keyword), str(e))
        return base

    def _strings(self) -> StringSet:
        schema = self.schema
        result = StringSet.everything()
        for keyword in ("minLength", "maxLength"):
            value = schema.get(keyword)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value)):
                raise UnsupportedSchemaError(f"'{keyword}' at {self.at(keyword)}: must be a non-negative integer")
        min_length = int(schema.get("minLength", 0))
        max_length = None if schema.get("maxLength") is None else int(schema["maxLength"])
        if self.reader.count_lengths and length_states(min_length if max_length is None else max_length) > COUNT_ABOVE:
            result = StringSet.length(min_length, max_length, count=True)
        else:
            if max_length is not None and not self._countable("maxLength", max_length, length_states(max_length)):
                max_length = None
            if not self._countable("minLength", min_length, length_states(min_length + 1)):
                min_length = 0
            result = StringSet.length(min_length, max_length)
        if "pattern" in schema:
            try:
                result = self._bounded(result, self._pattern_set(schema["pattern"]))
            except UnsupportedRegexError as e:
                self.issues.unsupported("pattern", self.at("pattern"), str(e))
        if "format" in schema:
            result = self._bounded(result, self._format())
        return result

    def _bounded(self, lengths: StringSet, language: StringSet) -> StringSet:
        """``lengths`` (the length keywords' set) intersected with a pattern's or format's ``language``; where the
        bound cannot be counted with it nor unrolled, the length keywords are reported (and dropped)."""
        try:
            return lengths.intersect(language)
        except UnsupportedSchemaError as e:
            for keyword in ("minLength", "maxLength"):
                if keyword in self.schema:
                    self.issues.unsupported(keyword, self.at(keyword), str(e))
            return language

    def _countable(self, keyword: str, value: int, states: int) -> bool:
        """Whether a count of ``value`` for ``keyword``, unrolling into ``states`` automaton states, is
        within the supported bound; if not, it is reported through :class:`Issues` (raises when strict)."""
        if states <= MAX_UNROLLED_STATES:
            return True
        self.issues.unsupported(
            keyword, self.at(keyword), f"{keyword} {value} would unroll into about {states} automaton states "
            f"(at most {MAX_UNROLLED_STATES} are supported: about {MAX_UNROLLED_STATES // length_states(1)} "
            "characters of any kind)"
        )
        return False

    def _pattern_set(self, pattern: object) -> StringSet:
        """The strings matching an ECMA ``pattern`` (search semantics); raises UnsupportedRegexError for one
        grammask cannot express or whose largest counted repeat would unroll past the supported bound (a repeat
        of single characters amid fixed-length parts is counted beside the lexer state where it can be)."""
        node = _absorb_padding(parse_pattern(pattern, dialect="ecma", search=True))
        repeat, states = largest_repeat(node)
        split = split_count(node) if self.reader.count_lengths and states > COUNT_ABOVE else None
        if split is not None:
            relaxed, lo, hi = split
            try:
                return StringSet.regular(relaxed).cut(lo, hi)
            except UnsupportedSchemaError:
                pass
        if repeat is not None and states > MAX_UNROLLED_STATES:
            bounds = f"{repeat.min}," if repeat.max is None else f"{repeat.min},{repeat.max}"
            raise UnsupportedRegexError(
                f"the counted repeat {{{bounds}}} of {pattern!r} would unroll into about {states} automaton "
                f"states (at most {MAX_UNROLLED_STATES} are supported)"
            )
        return StringSet.regular(node)

    def _format(self) -> StringSet:
        name = self.schema["format"]
        if name in FORMATS:
            return StringSet.regular(*format_automaton(name))
        if name in UNENFORCEABLE:
            self.issues.unsupported("format", self.at("format"), f"format {name!r} is not enforced")
        else:
            self.issues.note(f"'format' at {self.at('format')}: {name!r} is not a format of the specification; it constrains nothing")
        return StringSet.everything()

    def _array(self) -> ArrayShape:
        schema = self.schema
        prefix = tuple(self.sub(s, "prefixItems", i) for i, s in enumerate(schema.get("prefixItems", ())))
        items = schema.get("items", True)
        if isinstance(items, list):
            raise UnsupportedSchemaError(f"'items' at {self.at('items')}: an array of schemas is 'prefixItems' in draft 2020-12")
        items_node = None if items is False else self.sub(items, "items")
        min_items = int(schema.get("minItems", 0))
        max_items = None if schema.get("maxItems") is None else int(schema["maxItems"])
        if max_items is not None and not self._items_countable("maxItems", max_items):
            max_items = None
        if not self._items_countable("minItems", min_items):
            min_items = 0
        return ArrayShape(prefix, items_node, min_items, max_items)

    def _items_countable(self, keyword: str, value: int) -> bool:
        """Whether ``value`` items can be counted by unrolled rules; if not, reported through :class:`Issues`."""
        if value <= MAX_COUNTED_ITEMS:
            return True
        self.issues.unsupported(keyword, self.at(keyword), f"{keyword} {value}: at most {MAX_COUNTED_ITEMS} items are counted")
        return False

    def _object(self) -> ObjectShape:
        schema = self.schema
        properties = schema.get("properties", {})
        patterns = []
        for pattern, sub in schema.get("patternProperties", {}).items():
            try:
                language = self._pattern_set(pattern)
            except UnsupportedRegexError as e:
                self.issues.unsupported("patternProperties", self.at("patternProperties", pattern), str(e))
                continue
            patterns.append((language, self.sub(sub, "patternProperties", pattern)))
        additional = schema.get("additionalProperties", IMPLICIT)
        if additional is not IMPLICIT:
            additional = None if additional is False else self.sub(additional, "additionalProperties")
        rule = ExtraRule(tuple(patterns), additional)
        props = []
        for name, sub in properties.items():
            matched = [node for language, node in patterns if language.contains(name)]
            node = None if sub is False else self.sub(sub, "properties", name).union(*matched)
            props.append((name, node))
        required = frozenset(schema.get("required", ()))
        for name in schema.get("required", ()):
            if name not in properties:
                value = rule.value_for(name)
                props.append((name, TRUE_NODE if value is IMPLICIT else value))
        names = StringSet.everything()
        if "propertyNames" in schema:
            names = self._property_names()
            props = [(n, node if names.contains(n) else None) for n, node in props]
        return ObjectShape(tuple(props), required, (rule,), names)

    def _property_names(self) -> StringSet:
        node = self.sub(self.schema["propertyNames"], "propertyNames")
        shape = self.reader.shape(node)
        if not shape.strings:
            return StringSet("empty")
        result = shape.strings[0]
        for s in shape.strings[1:]:
            if not s.is_subset(result):
                if result.is_subset(s):
                    result = s
                else:
                    self.issues.unsupported("propertyNames", self.at("propertyNames"), "a union of name languages is not enforced")
                    return StringSet.everything()
        return result

    # --- values --------------------------------------------------------------------------

    def _enum(self) -> Shape:
        if "const" in self.schema:
            values, where = [self.schema["const"]], ("const",)
        else:
            values, where = self.schema["enum"], ("enum",)
            if not isinstance(values, list):
                raise UnsupportedSchemaError(f"'enum' at {self.at('enum')}: must be an array")
        return Shape().union(*(self._value(value, self.at(*where, i) if where == ("enum",) else self.at(*where))
                               for i, value in enumerate(values)))

    def _value(self, value: object, pointer: str) -> Shape:
        if value is None:
            return Shape(null=True)
        if isinstance(value, bool):
            return Shape(booleans=frozenset({value}))
        if isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                return Shape()
            return Shape(numbers=NumberSet.equal_to(value))
        if isinstance(value, str):
            return Shape(strings=(StringSet.literal(value),))
        if isinstance(value, list):
            prefix = tuple(self.reader.const_node(v, f"{pointer}/{i}") for i, v in enumerate(value))
            return Shape(arrays=(ArrayShape(prefix, None, len(value), len(value)),))
        if isinstance(value, dict):
            props = tuple((k, self.reader.const_node(v, f"{pointer}/{k}")) for k, v in value.items())
            return Shape(objects=(ObjectShape(props, frozenset(value), (ExtraRule((), None),)),))
        raise UnsupportedSchemaError(f"{pointer}: {value!r} is not a JSON value")

    def _ref(self) -> Shape:
        ref = self.schema["$ref"]
        try:
            resolved = self.resolver.lookup(ref)
        except (Unresolvable, AttributeError, TypeError) as e:
            self.issues.unsupported("$ref", self.at("$ref"), f"cannot resolve {ref!r} within the document ({type(e).__name__})")
            return Shape.anything()
        index = self.reader.add(resolved.contents, resolved.resolver, f"{self.at('$ref')}->{ref}")
        return self.reader.shape(frozenset({index}))

    # --- combinators ---------------------------------------------------------------------

    def _branches(self, keyword: str) -> list[Shape]:
        members = self.schema[keyword]
        if not isinstance(members, list) or not members:
            raise UnsupportedSchemaError(f"'{keyword}' at {self.at(keyword)}: must be a non-empty array of schemas")
        return [self.reader.shape(self.sub(m, keyword, i)) for i, m in enumerate(members)]

    def _union(self, keyword: str) -> Shape:
        return Shape().union(*self._branches(keyword))

    def _one_of(self, context: Shape) -> Shape:
        """Exactly one branch: exact where the branches' complements are expressible, else
        ``anyOf`` where the branches (within what the rest of the schema admits) are disjoint."""
        branches = [context.intersect(b, self.reader.deadline) for b in self._branches("oneOf")]
        overlapping = any(
            _may_overlap(a.intersect(b, self.reader.deadline), self.reader) for i, a in enumerate(branches) for b in branches[i + 1 :]
        )
        complements = [self._complement(b, "oneOf", report=False) for b in branches] if overlapping else []
        if overlapping and all(c is not None for c in complements):
            exclusive = []
            for i, branch in enumerate(branches):
                only = branch
                for j, c in enumerate(complements):
                    if j != i:
                        self.reader.deadline.check("the JSON Schema shapes")
                        only = only.intersect(c, self.reader.deadline)
                exclusive.append(only)
            return Shape().union(*exclusive)
        if overlapping:
            self.issues.unsupported("oneOf", self.at("oneOf"), "its branches may overlap, and exclusivity is not enforced there")
        return Shape().union(*branches)

    def _dependencies(self, keyword: str) -> Shape:
        """Each dependency as "the property is absent, or it is present and the dependency holds"."""
        shape = Shape.anything()
        for name, dependency in self.schema[keyword].items():
            absent = Shape(objects=(ObjectShape(((name, None),)),))
            if keyword == "dependentRequired":
                present = Shape(objects=(ObjectShape(((name, TRUE_NODE),), frozenset([name, *dependency])),))
            else:
                required = Shape(objects=(ObjectShape(((name, TRUE_NODE),), frozenset([name])),))
                present = required.intersect(self.reader.shape(self.sub(dependency, keyword, name)))
            others = Shape.anything()
            others = Shape(others.null, others.booleans, others.numbers, others.strings, others.arrays, ())
            shape = shape.intersect(others.union(absent).union(present))
        return shape

    def _conditional(self) -> Shape:
        condition = self.reader.shape(self.sub(self.schema["if"], "if"))
        then = self.reader.shape(self.sub(self.schema.get("then", True), "then"))
        otherwise = self.reader.shape(self.sub(self.schema.get("else", True), "else"))
        complement = self._complement(condition, "if")
        if complement is None:
            return Shape.anything()
        return condition.intersect(then).union(complement.intersect(otherwise))

    def _complement(self, shape: Shape, keyword: str, report: bool = True) -> Shape | None:
        """The values the shape rejects, where that is expressible; else None (reported)."""
        strings = StringSet.everything()
        try:
            for s in shape.strings:
                strings = strings.minus(s, self.reader.deadline)
        except UnsupportedSchemaError:
            strings = None
        arrays = _array_complement(shape.arrays, self.reader)
        objects = _object_complement(shape.objects, self.reader)
        if arrays is None or objects is None or strings is None:
            if report:
                self.issues.unsupported(keyword, self.at(keyword), "the complement of this string, array or object constraint is not expressible")
            return None
        return Shape(
            not shape.null,
            frozenset({True, False}) - shape.booleans,
            shape.numbers.complement(),
            () if strings.is_empty() else (strings,),
            arrays,
            objects,
        )


def _array_complement(arrays: tuple[ArrayShape, ...], reader: SchemaReader) -> tuple[ArrayShape, ...] | None:
    if not arrays:
        return (ArrayShape(),)
    if any(_any_array(a, reader, 2) for a in arrays):
        return ()
    return None


def _object_complement(objects: tuple[ObjectShape, ...], reader: SchemaReader) -> tuple[ObjectShape, ...] | None:
    """Objects outside one object shape whose undeclared names are unconstrained: some declared
    property present with a value outside its schema, or some required property missing."""
    if not objects:
        return (ObjectShape(),)
    if any(_any_object(o, reader, 2) for o in objects):
        return ()
    if len(objects) > 1:
        return None
    (o,) = objects
    if not o.names.is_everything() or not all(not r.patterns and (r.additional is IMPLICIT or _any_node(r.additional, reader, 2)) for r in o.extras):
        return None
    out = []
    for name, node in o.props:
        if node is None:
            out.append(ObjectShape(((name, TRUE_NODE),), frozenset([name])))
        elif not _any_node(node, reader, 2):
            out.append(ObjectShape(((name, reader.complement_node(node)),), frozenset([name])))
    out += [ObjectShape(((name, None),)) for name in sorted(o.required)]
    return tuple(out)


def _may_overlap(shape: Shape, reader: SchemaReader) -> bool:
    """Whether the shape might admit a value (exact for scalars, conservative for structures)."""
    reader.deadline.check("the JSON Schema shapes")
    if shape.null or shape.booleans or not shape.numbers.is_empty() or shape.strings:
        return True
    if any(_array_possible(a, reader) for a in shape.arrays):
        return True
    return any(_object_possible(o, reader) for o in shape.objects)


def _array_possible(a: ArrayShape, reader: SchemaReader) -> bool:
    if a.max_items is not None and a.min_items > a.max_items:
        return False
    for i in range(a.min_items):
        node = a.node_at(i)
        if node is None or not reader.shape(node).has_values():
            return False
    return True


def _object_possible(o: ObjectShape, reader: SchemaReader) -> bool:
    for name, node in o.props:
        if name in o.required and (node is None or not reader.shape(node).has_values()):
            return False
    return not o.is_unsatisfiable()


def _absorb_padding(node: RegexNode) -> RegexNode:
    """The same search-semantics language with each counted repeat beside the pattern's unanchored padding cut to
    its minimum: ``X{m,n}.*`` matches just what ``X{m}.*`` does."""
    if isinstance(node, Alt):
        return alt(*(_absorb_padding(o) for o in node.options))
    if not isinstance(node, Concat):
        return node
    parts = list(node.parts)
    for i, part in enumerate(parts):
        padded = (i > 0 and parts[i - 1] == ANY_STRING) or (i + 1 < len(parts) and parts[i + 1] == ANY_STRING)
        if padded and isinstance(part, Repeat) and part != ANY_STRING and part.max != part.min:
            parts[i] = Repeat(part.node, part.min, part.min) if part.min > 1 else concat(*[part.node] * part.min)
    return concat(*parts)
