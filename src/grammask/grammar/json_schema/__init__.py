"""JSON Schema (draft 2020-12) to the grammar IR: exactly the JSON documents a schema accepts.

The grammar admits only documents the schema accepts, spelled in a documented JSON style
(:func:`grammar_from_json_schema`); a keyword grammask cannot enforce is never ignored in
silence. The pipeline: :mod:`.reader` turns the schema into per-type :mod:`.shapes`;
:mod:`.emit` turns shapes into rules and lexer terminals, string and number languages
(:mod:`.strings`, :mod:`.numbers`, :mod:`.formats`) becoming terminals whose overlaps
:mod:`.family` resolves.
"""

from __future__ import annotations

import dataclasses
import json

from lark.exceptions import GrammarError as LarkGrammarError

from grammask.errors import (
    ConfigurationError,
    Deadline,
    GrammarError,
    UnsupportedSchemaError,
    check_timeout,
)
from grammask.gc_pause import collector_paused
from grammask.grammar.ir import Grammar
from grammask.grammar.json_schema.emit import Emitter
from grammask.grammar.json_schema.options import SchemaOptions
from grammask.grammar.json_schema.reader import Issues, SchemaReader
from grammask.grammar.lark_export import check_lalr

__all__ = ["SchemaOptions", "grammar_from_json_schema"]


@collector_paused()
def grammar_from_json_schema(
    schema: object, options: SchemaOptions | None = None, *, name: str = "json_schema", timeout: float | None = None,
    **settings: object,
) -> Grammar:
    """The grammar of the JSON documents ``schema`` accepts (a dict, a bool, or JSON text).

    ``options`` (or the same fields as keywords: ``whitespace``, ``property_order``,
    ``additional_properties``, ``strict``, ``count_lengths``; see :class:`SchemaOptions`) say how documents are
    spelled and how length bounds are kept.

    Strings are admitted in the spellings JSON encoders use (printable ASCII never
    ``\\u``-escaped); numbers with ``minimum``-like bounds without an exponent. ``oneOf`` is
    exact where its branches' complements can be expressed, and treated as ``anyOf`` only
    where the branches are disjoint. Keywords dropped with ``strict=False`` and unknown formats
    are listed in the grammar's ``notes``. ``timeout``: the seconds reading the schema may take
    (None: no limit; checked as shapes are read and rules emitted).

    Raises :class:`~grammask.errors.UnsupportedSchemaError` for a keyword that cannot be enforced
    exactly (naming it and its JSON pointer) when strict, :class:`~grammask.errors.GrammarError`
    for schema text that is not JSON or a schema no document satisfies,
    :class:`~grammask.errors.CompileTimeoutError` when the time is up, and
    :class:`~grammask.errors.ConfigurationError` for a bad or unknown option.
    """
    unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(SchemaOptions)})
    if unknown:
        known = ", ".join(f.name for f in dataclasses.fields(SchemaOptions))
        raise ConfigurationError(f"unknown JSON Schema option(s) {', '.join(unknown)}; the options are: {known}")
    if options is None:
        options = SchemaOptions(**settings)
    elif settings:
        options = SchemaOptions(**{**options.__dict__, **settings})
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise GrammarError(f"the JSON Schema text is not JSON: {e}") from None
    issues = Issues(options.strict)
    reader = SchemaReader(schema, issues, Deadline(check_timeout(timeout), name), options.count_lengths)
    emitter = Emitter(reader, options)
    terminals, rules, ignored = emitter.finish(frozenset({reader.root}))
    grammar = Grammar(terminals, rules, "start", ignored, name=name, notes=tuple(issues.notes))
    if emitter.unions:
        _check_lalr(grammar, emitter.unions, reader.deadline)
    return grammar


def _check_lalr(grammar: Grammar, unions: list[str], deadline: Deadline) -> None:
    """Raise a schema-level error where alternatives of several objects or arrays conflict."""
    try:
        check_lalr(grammar, deadline)
    except LarkGrammarError as e:
        where = ", ".join(dict.fromkeys(unions))
        raise UnsupportedSchemaError(
            f"'anyOf'/'oneOf' at {where}: its object or array alternatives cannot be told apart "
            f"by a deterministic (LALR(1)) parser ({str(e).splitlines()[0]})"
        ) from None
