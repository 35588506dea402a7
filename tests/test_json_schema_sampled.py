"""Documents sampled from schema grammars validate against their schema (``jsonschema``, formats asserted).

Bar: 200 schemas (the 100 JSON-Mode-Eval ones and the 100 below, which exercise every supported
keyword), 0 violations.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import pytest

from grammask.grammar.json_schema import grammar_from_json_schema
from grammask.sampler import SentenceSampler

STR = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}

KEYWORD_SCHEMAS = [
    True,
    {},
    {"type": "null"},
    {"type": "boolean"},
    {"type": ["string", "null"]},
    {"type": ["integer", "boolean"]},
    INT,
    NUM,
    {"type": "integer", "minimum": -5, "maximum": 5},
    {"type": "integer", "exclusiveMinimum": 0},
    {"type": "integer", "exclusiveMaximum": -100},
    {"type": "number", "minimum": 0.5},
    {"type": "number", "maximum": 1e-3},
    {"type": "number", "exclusiveMinimum": -2.25, "exclusiveMaximum": 3.75},
    {"type": "number", "minimum": 100, "maximum": 100},
    {"minimum": 10},
    {"type": "string", "minLength": 2},
    {"type": "string", "maxLength": 3},
    {"type": "string", "minLength": 1, "maxLength": 1},
    {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
    {"type": "string", "pattern": "ab"},
    {"type": "string", "pattern": "^(foo|bar)+$", "maxLength": 7},
    {"type": "string", "pattern": "\\d$", "minLength": 3},
    {"type": "string", "pattern": "^[\\u00e0-\\u00ff]+$"},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "time"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "uri"},
    {"type": "string", "format": "ipv4"},
    {"type": "string", "format": "ipv6"},
    {"type": "string", "format": "hostname"},
    {"type": "string", "format": "duration"},
    {"type": "string", "format": "date", "pattern": "^2024"},
    {"enum": ["red", "green", "blue"]},
    {"enum": [1, "1", None, True, [1], {"a": 1}]},
    {"const": "fixed"},
    {"const": 3.5},
    {"const": {"a": [1, 2], "b": None}},
    {"type": "string", "enum": ["a", "bb", "ccc"], "maxLength": 2},
    {"type": "array", "items": INT},
    {"type": "array", "items": STR, "minItems": 2},
    {"type": "array", "items": STR, "maxItems": 2},
    {"type": "array", "minItems": 1, "maxItems": 3},
    {"type": "array", "prefixItems": [INT, STR]},
    {"type": "array", "prefixItems": [INT, STR], "items": False},
    {"type": "array", "prefixItems": [{"const": "x"}], "items": {"type": "boolean"}, "minItems": 2},
    {"type": "array", "items": {"type": "array", "items": NUM}},
    {"type": "array", "uniqueItems": False},
    {"type": "object"},
    {"type": "object", "properties": {"a": INT, "b": STR}},
    {"type": "object", "properties": {"a": INT, "b": STR}, "required": ["a", "b"]},
    {"type": "object", "properties": {"a": INT}, "additionalProperties": False},
    {"type": "object", "properties": {"a": INT}, "additionalProperties": STR},
    {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}},
    {"type": "object", "patternProperties": {"^s_": STR, "^n_": NUM}, "additionalProperties": False},
    {"type": "object", "patternProperties": {"^x": INT}, "properties": {"xa": {"minimum": 5}}},
    {"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}},
    {"type": "object", "required": ["id"]},
    {"type": "object", "properties": {"nested": {"type": "object", "properties": {"deep": {"type": "array", "items": {"type": "object", "properties": {"v": NUM}, "required": ["v"]}}}}}},
    {"type": "object", "properties": {"a": False, "b": True}},
    {"anyOf": [STR, INT]},
    {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "string", "pattern": "^z"}]},
    {"anyOf": [{"type": "integer", "maximum": 0}, {"type": "integer", "minimum": 10}]},
    {"oneOf": [INT, {"minimum": 2}]},
    {"oneOf": [{"type": "string", "minLength": 2}, {"type": "string", "maxLength": 3}]},
    {"oneOf": [{"type": "object", "properties": {"k": {"const": "a"}, "x": INT}, "required": ["k"]}, {"type": "object", "properties": {"k": {"const": "b"}, "y": STR}, "required": ["k"]}]},
    {"allOf": [{"type": "string"}, {"maxLength": 4}, {"pattern": "^a"}]},
    {"allOf": [{"properties": {"a": INT}}, {"properties": {"a": {"minimum": 3}}, "required": ["a"]}]},
    {"allOf": [{"type": "array", "prefixItems": [INT]}, {"items": STR}]},
    {"not": {"type": "string"}},
    {"type": "integer", "not": {"enum": [1, 2, 3]}},
    {"type": "string", "not": {"pattern": "^a"}},
    {"not": {"type": "object", "properties": {"a": {"const": 1}}}},
    {"if": {"type": "string"}, "then": {"maxLength": 2}, "else": {"type": "integer"}},
    {"if": {"properties": {"t": {"const": "n"}}}, "then": {"properties": {"v": NUM}}, "else": {"properties": {"v": STR}}, "type": "object", "required": ["t", "v"]},
    {"type": "object", "dependentRequired": {"a": ["b"]}, "properties": {"a": INT, "b": INT}},
    {"type": "object", "dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}, "properties": {"a": INT}},
    {"$defs": {"pos": {"type": "integer", "minimum": 1}}, "type": "array", "items": {"$ref": "#/$defs/pos"}},
    {"$defs": {"node": {"type": "object", "properties": {"v": INT, "next": {"$ref": "#/$defs/node"}}, "required": ["v"]}}, "$ref": "#/$defs/node"},
    {"$defs": {"t": {"anyOf": [INT, {"type": "array", "items": {"$ref": "#/$defs/t"}}]}}, "$ref": "#/$defs/t"},
    {"$id": "http://example.com/root.json", "$defs": {"a": {"$id": "a.json", "type": "string"}}, "properties": {"x": {"$ref": "a.json"}}},
    {"$defs": {"s": {"$anchor": "short", "type": "string", "maxLength": 2}}, "items": {"$ref": "#short"}},
    {"type": "object", "properties": {"date": {"type": "string", "format": "date"}, "count": {"type": "integer", "minimum": 0}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}, "required": ["date", "count"]},
    {"type": "object", "properties": {"name": STR, "email": {"type": "string", "format": "email"}, "age": {"type": "integer", "minimum": 18, "maximum": 130}}, "required": ["name", "email"], "additionalProperties": False},
    {"type": "object", "properties": {"price": {"type": "number", "exclusiveMinimum": 0}, "currency": {"enum": ["USD", "EUR"]}}, "required": ["price", "currency"]},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}, "ip": {"anyOf": [{"type": "string", "format": "ipv4"}, {"type": "string", "format": "ipv6"}]}}},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "until": {"type": ["string", "null"], "format": "date-time"}}},
    {"type": "array", "items": {"type": "object", "properties": {"k": STR, "v": {"type": ["number", "string", "boolean", "null"]}}, "required": ["k", "v"], "additionalProperties": False}, "maxItems": 5},
    {"type": "object", "properties": {"matrix": {"type": "array", "items": {"type": "array", "items": INT, "minItems": 2, "maxItems": 2}}}},
    {"type": "object", "properties": {"a": {"type": "string", "minLength": 3}, "b": {"type": "string", "minLength": 3, "pattern": "^b"}}},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}, "alt": {"type": "string", "pattern": "^[A-Z0-9]{3}$"}}},
    {"type": "object", "properties": {"s": {"type": "string", "maxLength": 5}, "t": {"type": "string", "pattern": "^[a-z]+$"}}},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}, "m": {"type": "number", "maximum": 10}}},
    {"type": "object", "properties": {"host": {"type": "string", "format": "hostname"}, "port": {"type": "integer", "minimum": 1, "maximum": 65535}}, "required": ["host"]},
    {"type": "object", "properties": {"meta": True, "data": {"type": "array"}}},
    {"type": "object", "properties": {"ref": {"type": "string", "format": "uri"}, "dur": {"type": "string", "format": "duration"}}},
    {"type": "array", "prefixItems": [{"type": "string", "format": "date"}, {"type": "integer", "minimum": 0, "maximum": 23}], "items": False, "minItems": 2},
    {"type": "object", "properties": {"x": {"oneOf": [{"type": "null"}, {"type": "number", "minimum": 0}, {"type": "string", "enum": ["n/a"]}]}}, "required": ["x"]},
]
assert len(KEYWORD_SCHEMAS) == 100, len(KEYWORD_SCHEMAS)

JME_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "json-mode-eval"
JME_SCHEMAS = [json.loads(p.read_text(encoding="utf-8"))["schema"] for p in sorted(JME_DIR.glob("JME_*.json"))]
DOCS_PER_SCHEMA = 20


def _violations(schema, seed: int) -> list[tuple[str, str]]:
    grammar = grammar_from_json_schema(schema)
    sampler = SentenceSampler(grammar, max_depth=10)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    rng = random.Random(seed)
    out = []
    for _ in range(DOCS_PER_SCHEMA):
        text = sampler.sample(rng, ignored_rate=0.0)
        errors = list(validator.iter_errors(json.loads(text)))
        if errors:
            out.append((text, errors[0].message))
    return out


@pytest.mark.parametrize("index", range(len(KEYWORD_SCHEMAS)))
def test_sampled_documents_validate_keyword_schemas(index):
    assert _violations(KEYWORD_SCHEMAS[index], index) == []


@pytest.mark.parametrize("index", range(len(JME_SCHEMAS)))
def test_sampled_documents_validate_jme_schemas(index):
    assert _violations(JME_SCHEMAS[index], index) == []
