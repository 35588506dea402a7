"""``Grammar.from_json_schema``: exact languages, whitespace and order policies, honest errors."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from json_schema_suite import ReferenceChecker

from grammask.compiler import compile
from grammask.errors import (
    NO_DEADLINE,
    CompileTimeoutError,
    ConfigurationError,
    Deadline,
    EmptyLanguageError,
    TokenRejectedError,
    UnsupportedSchemaError,
)
from grammask.grammar.json_schema import grammar_from_json_schema
from grammask.grammar.json_schema.automaton import dfa_to_ast
from grammask.grammar.json_schema.formats import FORMATS
from grammask.grammar.json_schema.numbers import NumberSet
from grammask.grammar.json_schema.strings import StringSet
from grammask.grammar.regex_frontend import parse_pattern

JME_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "json-mode-eval"
JME = sorted(JME_DIR.glob("JME_*.json"), key=lambda p: int(p.stem.split("_")[1]))


def accepts(schema, text: str, **options) -> bool:
    return ReferenceChecker().prepare(grammar_from_json_schema(schema, **options))(text)


# --- JSON-Mode-Eval: every valid instance accepted -------------------------------------------


def _jme(path: Path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    return doc["schema"], doc["tests"][0]["data"]


@pytest.mark.parametrize("path", JME, ids=lambda p: p.stem)
def test_jme_valid_instance_accepted(path):
    schema, data = _jme(path)
    assert accepts(schema, json.dumps(data))
    assert accepts(schema, json.dumps(data, separators=(",", ":")))
    assert accepts(schema, json.dumps(data, indent=2), whitespace="any")
    assert accepts(schema, json.dumps(data, indent=2), whitespace=2)


def _matcher_accepts(compiled, vocab, text: str) -> bool:
    tokens = vocab.encode(text)
    assert b"".join(vocab.tokens[t] for t in tokens) == text.encode("utf-8")
    matcher = compiled.matcher()
    try:
        for t in tokens:
            matcher.advance(t)
    except TokenRejectedError:
        return False
    return matcher.is_accepting()


def _jme_matcher(vocab, paths):
    from grammask.compiler import compile as compile_grammar

    for path in paths:
        schema, data = _jme(path)
        for whitespace, text in (("compact", json.dumps(data)), ("any", json.dumps(data, indent=2))):
            compiled = compile_grammar(grammar_from_json_schema(schema, whitespace=whitespace), vocab)
            assert _matcher_accepts(compiled, vocab, text), (path.stem, whitespace)


def test_jme_valid_instances_through_the_matcher(vocab):
    _jme_matcher(vocab("smollm2"), JME[::20])


@pytest.mark.slow
@pytest.mark.parametrize("tokenizer", ["smollm2", "llama3"])
def test_jme_valid_instances_through_the_matcher_all(vocab, tokenizer):
    _jme_matcher(vocab(tokenizer), JME)


# --- exactness of the pieces -----------------------------------------------------------------

OPS = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b}
number_lexemes = st.from_regex(r"-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,22})?([eE][+-]?[0-9]{1,3})?", fullmatch=True)
bounds = st.one_of(st.integers(-(10**20), 10**20), st.floats(-1e20, 1e20, allow_nan=False), st.sampled_from([0, 0.1, 1.5, -2.25, 1e-7]))


@settings(max_examples=300, deadline=None)
@given(op=st.sampled_from(sorted(OPS)), bound=bounds, integer=st.booleans(), lexemes=st.lists(number_lexemes, min_size=1, max_size=20))
def test_bounded_numbers_never_admit_a_violation(op, bound, integer, lexemes):
    base = NumberSet.integers() if integer else NumberSet.numbers()
    pattern = re.compile(base.intersect(NumberSet.bounded(op, bound)).lexeme() or "(?!)")
    for lexeme in lexemes:
        value = json.loads(lexeme)
        if pattern.fullmatch(lexeme):
            assert OPS[op](value, bound), (lexeme, op, bound)
            assert not integer or float(value).is_integer()
        elif "e" not in lexeme.lower() and "." not in lexeme:
            # Integer lexemes are compared exactly: never rejected when valid.
            assert not OPS[op](value, bound), (lexeme, op, bound)


@settings(max_examples=200, deadline=None)
@given(value=st.one_of(st.integers(-(10**12), 10**12), st.floats(-1e12, 1e12, allow_nan=False)), lexemes=st.lists(number_lexemes, max_size=10))
def test_const_numbers(value, lexemes):
    pattern = re.compile(NumberSet.equal_to(value).lexeme())
    assert pattern.fullmatch(json.dumps(value)) or "e" in json.dumps(value)
    for lexeme in lexemes:
        if pattern.fullmatch(lexeme):
            assert json.loads(lexeme) == value


def _spellings(text: str) -> list[str]:
    upper_hex = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), json.dumps(text))
    return [json.dumps(text), json.dumps(text, ensure_ascii=False), upper_hex]


STRING_SETS = {
    "length 2..4": StringSet.length(2, 4),
    "pattern ^[a-c]+x?$": StringSet.regular(parse_pattern("^[a-c]+x?$", dialect="ecma", search=True)),
    "pattern é|😀": StringSet.regular(parse_pattern("é|😀", dialect="ecma", search=True)),
    "not a, length <= 3": StringSet.length(0, 3).minus(StringSet.literal("a")),
}


@pytest.mark.parametrize("name", sorted(STRING_SETS))
@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet="abcx\"\\/\n\té😀\x01 ", max_size=6))
def test_string_lexemes_spell_exactly_the_members(name, text):
    language = STRING_SETS[name]
    pattern = re.compile(language.lexeme()[0])
    for spelled in _spellings(text):
        if json.loads(spelled) != text:
            continue
        assert bool(pattern.fullmatch(spelled)) == language.contains(text), (spelled,)


def test_printable_ascii_is_never_u_escaped():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert accepts(schema, '{"a": 1}')
    assert not accepts(schema, '{"\\u0061": "not an integer"}')
    assert accepts(schema, '{"\\u00e9": "x"}')


FORMAT_CASES = {
    "date": (["2024-02-29", "2000-02-29", "1999-12-31"], ["2023-02-29", "1900-02-29", "2021-04-31", "0000-01-01", "2021-1-01"]),
    "time": (["23:59:59Z", "08:30:00.5+02:00", "00:00:00z"], ["24:00:00Z", "12:00:00", "12:60:00Z", "23:59:60Z"]),
    "date-time": (["2021-06-01T12:00:00Z", "2021-06-01t12:00:00-05:30"], ["2021-06-01 12:00:00Z", "2021-06-31T00:00:00Z"]),
    "email": (["a.b+c@example.com", "x@[127.0.0.1]"], ["a..b@example.com", "a@", "@b.com", "a.@b.com"]),
    "uuid": (["2EB8AA08-AA98-11EA-B4AA-73B441D16380"], ["2eb8aa08-aa98-11ea-b4aa-73b441d1638", "2eb8aa08aa9811eab4aa73b441d16380"]),
    "ipv4": (["192.168.0.1", "0.0.0.0"], ["256.0.0.1", "01.2.3.4", "1.2.3"]),
    "ipv6": (["::1", "::", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4", "1::"], ["1:2:3:4:5:6:7:8:9", "1::2::3", ":1", "12345::"]),
    "hostname": (["example.com", "a-b.c", "x"], ["-a.com", "a..b", "a" * 64, "xn--abc.com", "ab--cd"]),
    "uri": (["http://example.com/a?b#c", "urn:isbn:0451450523", "mailto:a@b.c"], ["//example.com", "http://a b", "1http://x"]),
    "duration": (["P1D", "PT1H30M", "P1Y2M3DT4H5M6S", "P2W"], ["P", "PT", "P1H", "1D"]),
}


@pytest.mark.parametrize("name", sorted(FORMAT_CASES))
def test_formats(name):
    good, bad = FORMAT_CASES[name]
    schema = {"type": "string", "format": name}
    for value in good:
        assert accepts(schema, json.dumps(value)), value
    for value in bad:
        assert not accepts(schema, json.dumps(value)), value
    assert name in FORMATS


# --- whitespace, order, extra properties -----------------------------------------------------

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name"],
}


def test_compact_whitespace_is_bounded():
    assert accepts(PERSON, '{"name": "x", "age": 3}')
    assert accepts(PERSON, '{"name":"x","age":3}')
    for text in ('{"name":  "x"}', '{ "name": "x"}', '{"name": "x"}\n', '{"name":\n"x"}'):
        assert not accepts(PERSON, text), text


def test_any_whitespace():
    assert accepts(PERSON, ' {\n\t"name" :\r\n "x" ,"tags":[ ] }\n', whitespace="any")


def test_indent_is_exactly_json_dumps():
    doc = {"name": "x", "tags": ["a", "b"]}
    assert accepts(PERSON, json.dumps(doc, indent=4), whitespace=4)
    assert not accepts(PERSON, json.dumps(doc, indent=2), whitespace=4)
    assert not accepts(PERSON, json.dumps(doc), whitespace=4)
    assert accepts(PERSON, json.dumps({"name": "x", "tags": []}, indent=4), whitespace=4)


def test_property_order():
    out_of_order = '{"age": 3, "name": "x"}'
    assert not accepts(PERSON, out_of_order)
    assert accepts(PERSON, out_of_order, property_order="any")
    assert not accepts(PERSON, '{"name": "x", "name": "y"}', property_order="any")
    assert not accepts(PERSON, '{"age": 3}', property_order="any")


def test_additional_properties():
    assert accepts(PERSON, '{"name": "x", "extra": {"any": [1, null]}}')
    assert not accepts(PERSON, '{"name": "x", "extra": 1}', additional_properties=False)
    closed = dict(PERSON, additionalProperties={"type": "integer"})
    assert accepts(closed, '{"name": "x", "n": 1}')
    assert not accepts(closed, '{"name": "x", "n": "1"}')


def test_pattern_properties_and_property_names():
    schema = {"patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False, "propertyNames": {"maxLength": 4}}
    assert accepts(schema, '{"x-a": 1, "x-bc": 2}')
    assert not accepts(schema, '{"x-a": "1"}')
    assert not accepts(schema, '{"y": 1}')
    assert not accepts(schema, '{"x-abc": 1}')


# --- combinators -----------------------------------------------------------------------------


def test_one_of_is_exact_where_branches_overlap_on_scalars():
    schema = {"oneOf": [{"type": "integer"}, {"minimum": 2}]}
    assert accepts(schema, "1")
    assert accepts(schema, "2.5")
    assert not accepts(schema, "3")


def test_tagged_union_of_objects():
    schema = {
        "oneOf": [
            {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
            {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind"]},
        ]
    }
    assert accepts(schema, '{"kind": "a", "x": 1}')
    assert accepts(schema, '{"kind": "b", "y": "s"}')
    assert not accepts(schema, '{"kind": "a", "x": "s"}')


def test_all_of_merges_objects_and_strings():
    schema = {"allOf": [{"properties": {"a": {"type": "string", "maxLength": 3}}}, {"properties": {"a": {"pattern": "^x"}}, "required": ["a"]}]}
    assert accepts(schema, '{"a": "xy"}')
    assert not accepts(schema, '{"a": "yy"}')
    assert not accepts(schema, '{"a": "xyzw"}')
    assert not accepts(schema, "{}")


def test_recursive_refs():
    tree = {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}, "$ref": "#/$defs/node"}
    assert accepts(tree, '{"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3}]}')
    assert not accepts(tree, '{"v": 1, "kids": [{"kids": []}]}')


def test_a_document_the_reference_crawler_trips_on_gets_a_clear_verdict():
    # `referencing` walks every value of a draft-07 `dependencies` as a schema; a list there made it raise
    # AttributeError from deep inside (MaskBench's JsonSchemaStore---tmlanguage.json)
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "$id": "https://example.com/s",
              "properties": {"p": {"dependencies": {"a": {"required": ["c"]}, "b": ["a"]}},
                             "q": {"$ref": "#/definitions/q"}},
              "definitions": {"q": {"type": "integer"}}}
    with pytest.raises(UnsupportedSchemaError, match="dependencies"):
        grammar_from_json_schema(schema)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the dependencies, dropped
        assert accepts(schema, '{"q": 1}', strict=False) and not accepts(schema, '{"q": "x"}', strict=False)


def test_if_then_else_and_dependencies():
    schema = {"if": {"properties": {"m": {"const": True}}}, "then": {"required": ["n"]}, "else": {"not": {"required": ["n"]}}}
    assert accepts(schema, '{"m": true, "n": 1}')
    assert not accepts(schema, '{"m": true}')
    assert not accepts(schema, '{"m": false, "n": 1}')
    deps = {"dependentRequired": {"a": ["b"]}}
    assert accepts(deps, '{"b": 1}')
    assert not accepts(deps, '{"a": 1}')


# --- errors and notes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer"),
    [
        ({"properties": {"n": {"type": "integer", "multipleOf": 3}}}, "multipleOf", "/properties/n/multipleOf"),
        ({"items": {"type": "string"}, "uniqueItems": True}, "uniqueItems", "/uniqueItems"),
        ({"type": "string", "format": "idn-email"}, "format", "/format"),
        ({"type": "string", "pattern": "(a)\\1"}, "pattern", "/pattern"),
        ({"$ref": "http://example.com/other.json"}, "$ref", "/$ref"),
        ({"oneOf": [{"items": {"type": "integer"}}, {"maxItems": 2}]}, "oneOf", "/oneOf"),
    ],
)
def test_strict_mode_names_keyword_and_pointer(schema, keyword, pointer):
    with pytest.raises(UnsupportedSchemaError) as info:
        grammar_from_json_schema(schema)
    assert f"'{keyword}' at {pointer}" in str(info.value)
    if keyword == "oneOf":
        return  # as anyOf, the overlapping array alternatives are not LALR(1) either
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grammar = grammar_from_json_schema(schema, strict=False)
    assert any(f"'{keyword}' at {pointer}" in note for note in grammar.notes)
    assert any(keyword in str(w.message) for w in caught)


def test_unknown_format_is_a_note_not_an_error():
    grammar = grammar_from_json_schema({"type": "string", "format": "currency"})
    assert any("currency" in note for note in grammar.notes)


def test_empty_language():
    with pytest.raises(EmptyLanguageError):
        grammar_from_json_schema(False)
    with pytest.raises(EmptyLanguageError):
        grammar_from_json_schema({"type": "integer", "minimum": 5, "maximum": 4})


def test_bad_options():
    with pytest.raises(ValueError):
        grammar_from_json_schema({}, whitespace="lots")
    with pytest.raises(ValueError):
        grammar_from_json_schema({}, property_order="random")
    with pytest.raises(ConfigurationError, match="unknown JSON Schema option"):
        grammar_from_json_schema({}, indent=2)


def test_json_text_is_accepted_as_schema():
    assert accepts('{"const": "x"}', '"x"')


def test_dropped_keywords_are_listed_on_the_compiled_grammar(vocab, tmp_path):
    smollm2 = vocab("smollm2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loose = grammar_from_json_schema({"type": "integer", "multipleOf": 3}, strict=False)
    compiled = compile(loose, smollm2, cache=tmp_path)
    assert any("'multipleOf' at /multipleOf" in note for note in compiled.notes)
    exact = compile(grammar_from_json_schema({"type": "integer"}), smollm2, cache=tmp_path)
    assert exact.notes == () and compiled.notes  # same language, so one compiled table, but its own notes


def test_a_union_of_many_shapes_is_the_pairwise_one():
    from functools import reduce

    from grammask.grammar.json_schema.shapes import ArrayShape, ObjectShape, Shape

    parts = [
        Shape(null=True), Shape(booleans=frozenset({True})), Shape(numbers=NumberSet.equal_to(3)),
        Shape(strings=(StringSet.literal("a"),)), Shape(strings=(StringSet.literal("a"), StringSet.literal("b"))),
        Shape(numbers=NumberSet.equal_to(2.5), booleans=frozenset({False})), Shape(arrays=(ArrayShape(),)),
        Shape(objects=(ObjectShape(),)), Shape(objects=(ObjectShape(),)), Shape(strings=(StringSet.everything(),)),
        Shape(),
    ]
    for k in range(len(parts) + 1):
        assert Shape().union(*parts[:k]) == reduce(Shape.union, parts[:k], Shape())


class _PassesAfter(Deadline):
    """A deadline that passes after ``checks`` checks, counting them by phase."""

    def __init__(self, checks: int):
        super().__init__(None, "g")
        self.left, self.phases = checks, []

    def check(self, phase: str) -> None:
        self.phases.append(phase)
        self.left -= 1
        if self.left < 0:
            raise CompileTimeoutError("g", phase, 1.0)


def test_family_overlaps_check_the_deadline_inside_the_languages_questions():
    """Closing a family hands its deadline to each intersection and inclusion question (two schemas spent 0.28 s
    inside one inclusion question between two checks)."""
    from grammask.grammar.json_schema.family import Family

    languages = [StringSet.regular(parse_pattern(p)) for p in (r"[a-z]{1,9}@[a-z]{2,9}\.(com|org|net)",
                                                                 r"[a-m]+@[a-z]+\.[a-z]{3}", r"[a-z]+[0-9]*")]

    def close(deadline: Deadline) -> set:
        family = Family(deadline)
        for language in languages:
            family.add(language)
        family.close()
        return set(family.members)

    counter = _PassesAfter(1 << 30)
    expected = close(NO_DEADLINE)
    assert close(counter) == expected and len(expected) > len(languages)
    assert "the JSON Schema string languages" in counter.phases  # checked inside the questions, not only between
    with pytest.raises(CompileTimeoutError):
        close(_PassesAfter(len(counter.phases) - 2))


@pytest.mark.parametrize("operation", ["intersect", "minus", "is_subset", "cut", "to_ast"])
def test_string_language_operations_check_the_deadline(operation):
    """Products, minimizing, length questions and the way back to a regex check the deadline (a schema's products
    ran 1.6 s between two checks) and answer as without one when it does not pass."""
    a = StringSet.regular(parse_pattern(r"[a-z]{1,9}@[a-z]{2,9}\.(com|org|net)"))
    b = StringSet.regular(parse_pattern(r"[a-m]+@[a-z]+\.[a-z]{3}"))
    words, alnum = (StringSet.regular(parse_pattern(p)) for p in (r"[a-z]+[0-9]*", r"[a-z0-9]+"))
    run = {
        "intersect": lambda d: a.intersect(b, d).key,
        "minus": lambda d: a.minus(b, d).key,
        "is_subset": lambda d: words.cut(3, 20).is_subset(alnum.cut(2, 30), d),
        "cut": lambda d: words.cut(3, 20, d).key,
        "to_ast": lambda d: dfa_to_ast(a.minus(b).dfa, d),
    }[operation]
    counter = _PassesAfter(1 << 30)
    expected = run(NO_DEADLINE)
    assert run(counter) == expected and counter.phases
    assert set(counter.phases) == {"the JSON Schema string languages"}
    with pytest.raises(CompileTimeoutError, match="string languages"):
        run(_PassesAfter(len(counter.phases) // 2))
