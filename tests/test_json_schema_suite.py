"""The JSON-Schema-Test-Suite bar: 0 false positives and at least 1,100 passes of 2,225 cases.

The default run decides acceptance with grammask's lexer and Lark's LALR parser (same
language as the matcher, much faster); ``-m slow`` feeds every instance token by token
through the real matcher with the SmolLM2 vocabulary. ``tests/json_schema_suite.py`` prints the
per-file table.
"""

from __future__ import annotations

import re

import pytest
from json_schema_suite import DEFAULT_SUITE, MatcherChecker, ReferenceChecker, run_suite

pytestmark = pytest.mark.skipif(not DEFAULT_SUITE.is_dir(), reason=f"test suite not found at {DEFAULT_SUITE}")

# Keyword-free compile errors: schemas that admit no value at all (false, empty enum, contradictions).
_EMPTY = "admits no JSON value"


def _check(checker) -> None:
    table, errors = run_suite(DEFAULT_SUITE, checker)
    total = {k: sum(c[k] for c in table.values()) for k in ("pass", "false_positive", "false_negative", "compile_error")}
    assert sum(total.values()) == 2225
    assert total["false_positive"] == 0, {name: dict(c) for name, c in table.items() if c["false_positive"]}
    assert total["pass"] >= 1100, total
    for line in errors:
        assert re.search(r"'[$\w/]+'( at |/)", line) or _EMPTY in line, line


def test_suite_reference():
    _check(ReferenceChecker())


@pytest.mark.slow
def test_suite_matcher():
    _check(MatcherChecker("smollm2"))
