"""The model-free parts of evals/code_syntax.py (evals/code_programs.py): program assembly, stops, the
parser checks, running and classifying programs, and the summary tables. Tiny fixtures, no model."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

EVALS = Path(__file__).resolve().parent.parent / "evals"


def _load():
    spec = importlib.util.spec_from_file_location("code_programs", EVALS / "code_programs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["code_programs"] = module
    spec.loader.exec_module(module)
    return module


cp = _load()

PY = cp.Problem(
    "humaneval_python", "python", "T/0",
    'def add(a, b):\n    """Add two numbers."""\n',
    "\n\ndef check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(0, 0) == 0\n",
    "add",
)

GO_TEST = (
    "\n\nfunc deepCompare(a interface{}, b interface{}, msg string) bool {\n"
    "\taJSON, _ := json.Marshal(a)\n\tbJSON, _ := json.Marshal(b)\n"
    "\tif !reflect.DeepEqual(aJSON, bJSON) {\n\t\tpanic(msg)\n\t}\n\treturn true\n}\n\n"
    "func main() {\n\tactual_1 := add(2, 3)\n\texpected_1 := 5\n"
    '\tdeepCompare(actual_1, expected_1, "Exception --- test case 0 failed to pass")\n}'
)
GO = cp.Problem(
    "humaneval_go", "go", "T_go/0",
    'package main\n\nimport (\n\t"encoding/json"\n\t"reflect"\n)\n// Add two numbers.\nfunc add (a int, b int) int {\n',
    GO_TEST, "add",
)

needs_go = pytest.mark.skipif(shutil.which("go") is None or shutil.which("gofmt") is None,
                              reason="go and gofmt are not installed (Debian: apt-get install golang-go)")


# ---- assembly and stops ---------------------------------------------------------------------------


def test_python_program_is_prompt_completion_test_and_check_call():
    program = cp.assemble(PY, "    return a + b")
    assert program == PY.prompt + "    return a + b\n" + PY.test + "\ncheck(add)\n"


def test_go_program_is_prompt_completion_test():
    assert cp.assemble(GO, "\treturn a + b\n}") == GO.prompt + "\treturn a + b\n}" + GO_TEST


def test_stop_cuts_python_before_the_next_top_level_statement():
    text = b"    return 1\n\nprint(add(1, 2))\ndef other():"
    assert cp.stop_cuts(text, cp.STOPS["python"]) == [text.index(b"\nprint("), text.index(b"\ndef ")]
    assert cp.stop_cuts(b"    return 1\n", cp.STOPS["python"]) == []
    # only stops that end after byte ``since`` (what the last token added)
    assert cp.stop_cuts(text, cp.STOPS["python"], since=text.index(b"\ndef ") + 2) == [text.index(b"\ndef ")]


def test_stop_cuts_go_keep_the_closing_brace():
    text = b"\tif a {\n\t\treturn 1\n\t}\n\treturn 2\n}\n\nfunc main() {"
    end = text.index(b"\n}\n") + 2
    assert cp.stop_cuts(text, cp.STOPS["go"]) == [end, text.index(b"\nfunc ")]
    assert text[:end].endswith(b"return 2\n}")
    assert cp.stop_cuts(b"\treturn 2\n}", cp.STOPS["go"]) == []  # the newline after it is not there yet
    assert "'\\n}' before '\\n'" in cp.describe_stops("go")


# ---- parser checks --------------------------------------------------------------------------------


def test_python_parse_tells_syntax_from_indentation():
    assert cp.python_parse(PY.prompt + "    return a + b\n").ok
    bad = cp.python_parse(PY.prompt + "    return a +\n")
    assert (bad.ok, bad.kind) == (False, "syntax")
    dedent = cp.python_parse(PY.prompt + "  return a + b\n")
    assert (dedent.ok, dedent.kind) == (False, "indentation")
    tabs = cp.python_parse("if x:\n        a = 1\n\tb = 2\n")
    assert (tabs.ok, tabs.kind) == (False, "indentation")  # TabError is an IndentationError


@needs_go
def test_gofmt_parse():
    assert cp.gofmt_parse(GO.prompt + "\treturn a + b\n}\n").ok
    cut = cp.gofmt_parse(GO.prompt + "\treturn a +")
    assert not cut.ok and cut.kind == "syntax"


# ---- running and classifying ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "outcome"),
    [
        ("    return a + b", "pass"),
        ("    return a - b", "wrong"),
        ("    return a +", "syntax"),
        ("  return a + b\n    x = 1", "indentation"),
        ("    return a / 0", "runtime"),
        ("    while True:\n        pass", "timeout"),
        ("    while True:\n        print('x' * 65536)", "timeout"),  # stdout is dropped, not kept in memory
        ("    import sys\n    while True:\n        sys.stderr.write('x' * 65536)", "runtime"),  # stderr file capped
    ],
)
def test_python_outcomes(completion, outcome):
    assert cp.run_program(PY, completion, timeout=2).outcome == outcome


def test_python_classification_from_exit_and_stderr():
    assert cp.classify_python_run(0, "").outcome == "pass"
    assert cp.classify_python_run(1, "Traceback (most recent call last):\n  ...\nAssertionError\n").outcome == "wrong"
    assert cp.classify_python_run(1, "Traceback ...\nNameError: name 'x' is not defined\n").outcome == "runtime"


@needs_go
@pytest.mark.parametrize(
    ("completion", "outcome"),
    [
        ("\treturn a + b\n}\n", "pass"),
        ("\treturn a - b\n}\n", "wrong"),
        ("\treturn a +\n", "syntax"),
        ("\tx := 1\n\treturn a + b\n}\n", "compile"),  # declared and not used
        ("\tvar s []int\n\treturn s[a]\n}\n", "runtime"),
        ("\tfor {\n\t}\n}\n", "timeout"),
    ],
)
def test_go_outcomes(completion, outcome):
    assert cp.run_program(GO, completion, timeout=3).outcome == outcome


def test_go_classification_from_messages():
    assert cp.classify_go_build("# command-line-arguments\n./main.go:9:2: syntax error: unexpected }\n", False).outcome == "syntax"
    assert cp.classify_go_build("./main.go:9:10: newline in string\n", False).outcome == "syntax"
    assert cp.classify_go_build("./main.go:9:2: undefined: sum\n", False).outcome == "compile"
    assert cp.classify_go_build("./main.go:9:2: undefined: sum\n", True).outcome == "syntax"
    assert cp.classify_go_run(2, "panic: Exception --- test case 0 failed to pass\n\ngoroutine 1").outcome == "wrong"
    assert cp.classify_go_run(2, "panic: runtime error: index out of range [3] with length 0\n").outcome == "runtime"
    assert cp.classify_go_run(0, "").outcome == "pass"


# ---- data sets ------------------------------------------------------------------------------------


def test_mxeval_problems_load_when_the_shared_data_is_there():
    if not (cp.MXEVAL / "HumanEval_go_v1.jsonl").is_file():
        pytest.skip(f"no mxeval data at {cp.MXEVAL}")
    go = cp.load_problems("humaneval_go")
    assert len(go) == 160 and go[0].prompt.startswith("package main") and "func main()" in go[0].test
    mb = cp.load_problems("mbxp_python")
    assert len(mb) == 200 and "def check(candidate)" in mb[0].test
    assert len(cp.load_problems("mbxp_go", limit=3)) == 3


# ---- summaries ------------------------------------------------------------------------------------


def _record(condition, outcome, ended_by="eos", parse_ok=True, steps=10, decode=0.5, mask=0.01, task="T/0"):
    return cp.Record("m", "humaneval_python", "python", condition, task, "", ended_by, steps - 1, steps, 20,
                     decode, mask, outcome, "", parse_ok, "" if parse_ok else "syntax", "", 200)


def test_summary_counts_reductions_and_timings():
    records = [
        _record("unconstrained", "syntax", "max_tokens", parse_ok=False, task="T/0"),
        _record("unconstrained", "indentation", parse_ok=False, task="T/1"),
        _record("unconstrained", "pass", "stop", task="T/2"),
        _record("unconstrained", "wrong", task="T/3"),
        _record("grammar", "syntax", "max_tokens", parse_ok=False, mask=0.02, task="T/0"),
        _record("grammar", "pass", task="T/1"),
        _record("grammar", "pass", "stop", task="T/2"),
        _record("grammar", "wrong", task="T/3"),
        _record("budget", "pass", task="T/0"),
        _record("budget", "pass", task="T/1"),
        _record("budget", "pass", task="T/2"),
        _record("budget", "runtime", task="T/3"),
    ]
    rows = {r["condition"]: r for r in cp.summarize(records)}
    a, b, c = rows["unconstrained"], rows["grammar"], rows["budget"]
    assert [r["condition"] for r in cp.summarize(records[::-1])] == list(cp.CONDITIONS)
    assert a["outcomes"]["syntax"] == 1 and a["outcomes"]["indentation"] == 1 and a["syntax_errors"] == 2
    assert a["parser_syntax_errors"] == 2 and a["syntax_errors_at_limit"] == 1
    assert a["ended_by"] == {"eos": 2, "stop": 1, "max_tokens": 1, "no_matcher": 0, "error": 0}
    assert a["pass_at_1"] == 0.25 and b["pass_at_1"] == 0.5 and c["pass_at_1"] == 0.75
    assert b["syntax_reduction"] == "50.0%" and c["syntax_reduction"] == "100.0%"
    assert c["parser_syntax_reduction"] == "100.0%"
    assert a["ms_per_token"] == pytest.approx(50.0) and b["mask_ms_per_token"] == pytest.approx(1.25)  # 50 ms over 40 steps
    assert b["mask_share_of_unconstrained"] == pytest.approx(1.25 / 50.0)
    table = cp.markdown(cp.summarize(records), "header")
    assert table.startswith("header") and "(c) grammar + budget" in table and "| 50.0% |" in table


def test_reduction_without_baseline_errors():
    assert cp._reduction(0, 0) == "-"
    assert cp._reduction(0, 2) == "+2"
    assert cp._reduction(4, 1) == "75.0%"


def test_test_cases_count_asserts_and_deep_compares():
    assert cp.test_cases(PY) == 2
    assert cp.test_cases(GO) == 1
    assert cp.test_cases(cp.Problem("d", "python", "t", "", "def check(c):\n    pass\n", "f")) == 1


def test_syntax_errors_by_test_case_and_problems_without_matcher():
    r1 = _record("grammar", "syntax", parse_ok=False, task="T/0")
    r1.extra["tests"] = 7
    r2 = _record("grammar", "indentation", ended_by="no_matcher", task="T/1")
    row = cp.summarize([r1, r2])[0]
    assert row["syntax_errors_by_test_case"] == 7 + 1  # a record without a count is one test case
    assert row["ended_by"]["no_matcher"] == 1 and row["n"] == 2 and row["syntax_errors"] == 2
    assert "| 1 | 8 |" in cp.markdown([row])


def test_prompt_stop_rule_checks_prompt_plus_completion_with_a_grammar():
    spec = importlib.util.spec_from_file_location("code_syntax", EVALS / "code_syntax.py")
    cs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cs)

    class Balanced:  # stands in for a compiled grammar: whole when the braces balance
        def matcher(self, prefix=b""):
            whole = prefix.count(b"{") == prefix.count(b"}") and prefix.rstrip().endswith(b"}")
            return type("M", (), {"is_accepting": lambda self: whole})()

    prompt = "func f() int {\n"
    data = b"\tif x {\n}\n\treturn 1\n}\n\nfunc main() {"
    first = data.index(b"\n}\n") + 2
    assert cs.prompt_stop_rule(cp.STOPS["go"], None, prompt).cut(data) == first  # unconstrained: the first stop
    ruled = cs.prompt_stop_rule(cp.STOPS["go"], Balanced(), prompt).cut(data)
    assert data[:ruled] == b"\tif x {\n}\n\treturn 1\n}"
