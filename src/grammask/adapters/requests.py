"""What serving engines ask for, as grammask grammars.

SGLang and vLLM describe a request's constraint as a kind and a string: a JSON Schema, any JSON value or
object, a regex, an EBNF grammar (GBNF as llama.cpp and xgrammar write it, or Lark) or a list of
choices. :func:`grammar_for_request` turns one into a :class:`~grammask.grammar.ir.Grammar`. It needs no
engine and no torch.
"""

from __future__ import annotations

import json
import re

from grammask.errors import ConfigurationError, GrammarError
from grammask.grammar import Grammar, SchemaOptions

KINDS = ("json", "json_object", "regex", "ebnf", "choice", "structural_tag")
ANY_JSON = "$$ANY$$"  # SGLang's key for "any JSON value"

_GBNF_RULE = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_-]*\s*::=", re.MULTILINE)


def is_gbnf(text: str) -> bool:
    """True iff ``text`` defines its rules with ``::=`` (GBNF, xgrammar's EBNF) rather than Lark's ``:``."""
    return _GBNF_RULE.search(text) is not None


def grammar_for_request(kind: str, spec: str, *, any_whitespace: bool = False) -> Grammar:
    """The grammar of one engine request.

    ``kind`` is one of :data:`KINDS`: ``json`` (a JSON Schema as text, or ``$$ANY$$`` for any JSON
    value), ``json_object`` (any JSON object; ``spec`` is ignored), ``regex`` (a whole-match Python
    regex), ``ebnf`` (GBNF when its rules use ``::=``, else Lark), ``choice`` (a JSON list of strings:
    exactly one of them). ``any_whitespace`` lets JSON Schema output have RFC 8259 whitespace between
    tokens; without it the schema's output is compact (see :class:`~grammask.grammar.SchemaOptions`).

    Raises :class:`~grammask.errors.ConfigurationError` for an unknown kind, a schema or choice list
    that is not valid JSON, or a choice list that is not a non-empty list of strings;
    :class:`~grammask.errors.GrammarError` for ``structural_tag`` (not supported) and, from the front
    ends, for a grammar, schema or regex they refuse.
    """
    whitespace = "any" if any_whitespace else "compact"
    if kind == "json":
        if spec == ANY_JSON:
            return Grammar.builtin("json")
        return Grammar.from_json_schema(_load_json(spec, "JSON Schema"), SchemaOptions(whitespace=whitespace))
    if kind == "json_object":
        return Grammar.from_json_schema({"type": "object"}, SchemaOptions(whitespace=whitespace))
    if kind == "regex":
        return Grammar.from_regex(spec)
    if kind == "ebnf":
        return Grammar.from_gbnf(spec) if is_gbnf(spec) else Grammar.from_lark(spec)
    if kind == "choice":
        return Grammar.from_regex(_choice_regex(_load_json(spec, "choice list")))
    if kind == "structural_tag":
        raise GrammarError("structural tags are not supported by grammask; use a JSON Schema, regex or grammar")
    raise ConfigurationError(f"unknown request kind {kind!r}; expected one of {', '.join(KINDS)}")


def _load_json(text: str, what: str) -> object:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"the {what} is not valid JSON: {exc}") from exc


def _choice_regex(choices: object) -> str:
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
        raise ConfigurationError(f"a choice constraint needs a non-empty list of strings, got {choices!r}")
    return "|".join(re.escape(c) for c in dict.fromkeys(choices))
