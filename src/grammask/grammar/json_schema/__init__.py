"""JSON Schema (draft 2020-12) to the grammar IR: exactly the JSON documents a schema accepts.

The grammar admits only documents the schema accepts, spelled in a documented JSON style
(:func:`grammar_from_json_schema`); a keyword grammask cannot enforce is never ignored in
silence. The pipeline: :mod:`.reader` turns the schema into per-type :mod:`.shapes`;
:mod:`.emit` turns shapes into rules and lexer terminals, string and number languages
(:mod:`.strings`, :mod:`.numbers`, :mod:`.formats`) becoming terminals whose overlaps
:mod:`.family` resolves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from grammask.errors import GrammarError, UnsupportedSchemaError
from grammask.grammar.ir import Grammar
from grammask.grammar.json_schema.emit import Emitter
from grammask.grammar.json_schema.reader import Issues, SchemaReader

WHITESPACE_POLICIES = ("compact", "any")
PROPERTY_ORDERS = ("schema", "any")


@dataclass(frozen=True)
class SchemaGrammar(Grammar):
    """A grammar compiled from a JSON Schema; ``notes`` lists keywords that constrain nothing
    (ignored with ``strict=False``, or unknown formats) with their JSON pointers."""

    notes: tuple[str, ...] = field(default=(), compare=False)


def grammar_from_json_schema(
    schema: object,
    *,
    whitespace: str | int = "compact",
    property_order: str = "schema",
    additional_properties: bool = True,
    strict: bool = True,
    name: str = "json_schema",
) -> SchemaGrammar:
    """The grammar of the JSON documents ``schema`` accepts (a dict, a bool, or JSON text).

    ``whitespace``: ``"compact"`` (default) admits no whitespace except one optional space
    after ``,`` and ``:`` (so both ``json.dumps`` styles are accepted and output can never run
    on in whitespace); ``"any"`` admits RFC 8259 whitespace between tokens; an ``int`` n admits
    exactly the ``json.dumps(doc, indent=n)`` layout down to 16 levels of nesting (deeper values
    are written as ``json.dumps(value, separators=(",", ": "))`` does).

    ``property_order``: ``"schema"`` (default) admits declared properties in the order the
    schema lists them, then undeclared ones; ``"any"`` admits any order (each property at most
    once; at most 8 declared properties per object).

    ``additional_properties=False`` forbids undeclared properties where the schema leaves
    ``additionalProperties`` unset (the specification allows them).

    Strings are admitted in the spellings JSON encoders use (printable ASCII never
    ``\\u``-escaped); numbers with ``minimum``-like bounds without an exponent. ``oneOf`` is
    exact where its branches' complements can be expressed, and treated as ``anyOf`` only
    where the branches are disjoint. A keyword that cannot be enforced exactly raises
    :class:`UnsupportedSchemaError` naming it and its JSON pointer; with ``strict=False`` it is
    dropped instead, listed in a warning and in :attr:`SchemaGrammar.notes`.
    """
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise GrammarError(f"the JSON Schema text is not JSON: {e}") from None
    if whitespace not in WHITESPACE_POLICIES and not (isinstance(whitespace, int) and not isinstance(whitespace, bool) and whitespace >= 0):
        raise ValueError(f"whitespace must be one of {WHITESPACE_POLICIES} or an indent width, not {whitespace!r}")
    if property_order not in PROPERTY_ORDERS:
        raise ValueError(f"property_order must be one of {PROPERTY_ORDERS}, not {property_order!r}")
    issues = Issues(strict)
    reader = SchemaReader(schema, issues)
    emitter = Emitter(reader, whitespace=whitespace, property_order=property_order, additional_properties=additional_properties)
    terminals, rules, ignored = emitter.finish(frozenset({reader.root}))
    grammar = SchemaGrammar(terminals, rules, "start", ignored, name=name, notes=tuple(issues.notes))
    if emitter.unions:
        _check_lalr(grammar, emitter.unions)
    return grammar


def _check_lalr(grammar: Grammar, unions: list[str]) -> None:
    """Raise a schema-level error where alternatives of several objects or arrays conflict."""
    from lark.exceptions import GrammarError as LarkGrammarError

    from grammask.grammar.lark_export import lark_parser

    try:
        lark_parser(grammar, strict=True)
    except LarkGrammarError as e:
        where = ", ".join(dict.fromkeys(unions))
        raise UnsupportedSchemaError(
            f"'anyOf'/'oneOf' at {where}: its object or array alternatives cannot be told apart "
            f"by a deterministic (LALR(1)) parser ({str(e).splitlines()[0]})"
        ) from None
