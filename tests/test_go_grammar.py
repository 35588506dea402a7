"""The built-in Go grammar (``go.lark`` with the ``GoSemicolons`` postlex) against Go's own parser.

The reference is ``gofmt -e`` (go/parser: what it accepts is syntax, whatever the type checker says
later). Two parsers of ours are compared with it: Lark's LALR parser with its basic lexer and the
postlex (the grammar's reference semantics), and the same parse tables fed by grammask's lexing
rule (maximal munch, no backtracking: ``automata/lexer.py``) through the same postlex, which is
how the engine will lex once it runs the postlex.

Data, with fixed seeds: standard-library files from ``$(go env GOROOT)/src`` (under 20 KB, no
``testdata`` directories, only files gofmt accepts) and mutated copies (a line deleted or
duplicated, a character deleted, or one of printable ASCII, tab and newline inserted). The default
run takes 25 files and 150 mutations; ``-m slow`` takes 200 files and 1,000 mutations. Tests that
need Go are skipped, with the reason, where ``gofmt``/``go`` are not installed.

Known differences (each asserted below, in ``KNOWN_DIFFERENCES``): go/parser decodes escapes in an
import path (``import "\x41"``), the grammar does not; in ``type T[P *X ...]`` go/parser takes
a type literal X in an array length (``type T[P * []int + 1]int``) and reads ``[P *C | D, R any]``
as type parameters (it decides from what follows the first parameter), the grammar does not; Lark's
backtracking lexer splits ``0x1.f`` into ``0x1`` ``.f`` where go/scanner and grammask's lexer reject.
A byte order mark is accepted by go/scanner at the start of a file (only there); the grammar has
none.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
from lark import Lark, Token
from lark.exceptions import UnexpectedInput

import grammask
from grammask.automata.lexer import build_lexer
from grammask.grammar.builtin import POSTLEX_BUILTINS, builtin_source
from grammask.grammar.builtin.go_semicolons import GoSemicolons
from grammask.grammar.ir import Grammar
from grammask.grammar.lark_frontend import _no_collision_check
from grammask.mask_tables import build_front

GOFMT = shutil.which("gofmt")
GO = shutil.which("go")
needs_go = pytest.mark.skipif(
    GOFMT is None or GO is None,
    reason="gofmt and go are not installed (Debian golang-go): gofmt -e is the Go grammar's reference",
)

FAST_FILES, FAST_MUTANTS = 25, 150
SLOW_FILES, SLOW_MUTANTS = 200, 1000


@pytest.fixture(scope="module")
def go_lark() -> Lark:
    with _no_collision_check():
        return Lark(
            builtin_source("go"), parser="lalr", lexer="basic", postlex=GoSemicolons()
        )


@pytest.fixture(scope="module")
def go_ir() -> Grammar:
    """The Go grammar as grammask's IR without its postlex: the lexer here emits the newline terminals themselves."""
    return dataclasses.replace(Grammar.builtin("go"), semicolons=None)


@pytest.fixture(scope="module")
def munch(go_ir, go_lark):
    """Accepts a text iff grammask's lexing rule, the postlex and the LALR tables accept it."""
    lexer = build_lexer(go_ir)
    post = GoSemicolons()

    def accepts(text: str) -> bool:
        stepped = lexer.step(0, text.encode("utf-8"))
        if stepped is None:
            return False
        emitted, state = stepped
        last = lexer.finish(state)
        if last is None:
            return False
        tokens = [
            Token(lexer.terminals[i], "")
            for i in emitted + last
            if not lexer.ignored[i]
        ]
        interactive = go_lark.parse_interactive("")
        try:
            for token in post.process(iter(tokens)):
                interactive.feed_token(token)
            interactive.feed_eof()
        except UnexpectedInput:
            return False
        return True

    return accepts


def lark_accepts(parser: Lark, text: str) -> bool:
    try:
        parser.parse(text)
    except UnexpectedInput:
        return False
    return True


def gofmt_verdicts(texts: list[str]) -> list[bool]:
    """Whether ``gofmt -e`` accepts each text: one gofmt run per 100 files, each file alone where an
    error message does not name its file (a ``//line`` directive renames it)."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k, text in enumerate(texts):
            path = os.path.join(tmp, f"m{k:05d}.go")
            Path(path).write_text(text, encoding="utf-8")
            paths.append(path)
        verdicts = []
        for start in range(0, len(paths), 100):
            chunk = paths[start : start + 100]
            result = subprocess.run(
                [GOFMT, "-e", "-l", *chunk], capture_output=True, text=True, check=False
            )
            bad = {line.split(":", 1)[0] for line in result.stderr.splitlines()}
            if bad <= set(chunk):
                verdicts += [p not in bad for p in chunk]
            else:
                verdicts += [
                    subprocess.run(
                        [GOFMT, "-e", "-l", p], capture_output=True, check=False
                    ).returncode
                    == 0
                    for p in chunk
                ]
        return verdicts


@lru_cache(maxsize=1)
def _goroot_candidates() -> tuple[str, ...]:
    root = (
        Path(
            subprocess.run(
                [GO, "env", "GOROOT"], capture_output=True, text=True, check=True
            ).stdout.strip()
        )
        / "src"
    )
    files = []
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "testdata")
        files += [
            os.path.join(directory, n) for n in sorted(names) if n.endswith(".go")
        ]
    files = [f for f in files if os.path.getsize(f) < 20_000]
    random.Random(1419).shuffle(files)
    return tuple(files)


def stdlib_texts(n: int) -> list[str]:
    """The first ``n`` standard-library files (fixed shuffle) that are UTF-8 and that gofmt accepts."""
    texts: list[str] = []
    candidates = iter(_goroot_candidates())
    while len(texts) < n:
        batch = []
        for path in candidates:
            try:
                batch.append(Path(path).read_text(encoding="utf-8"))
            except UnicodeDecodeError:
                continue
            if len(batch) == 2 * (n - len(texts)):
                break
        if not batch:
            break
        texts += [t for t, ok in zip(batch, gofmt_verdicts(batch)) if ok][
            : n - len(texts)
        ]
    return texts


INSERTED = [chr(c) for c in range(32, 127)] + ["\t", "\n"]


def mutate(text: str, rng: random.Random) -> str:
    """One mutation: a line deleted or duplicated, a character deleted, or a character inserted."""
    kind = rng.randrange(4)
    if kind < 2:
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        if kind == 0:
            del lines[i]
        else:
            lines.insert(i, lines[i])
        return "\n".join(lines)
    if kind == 2:
        i = rng.randrange(len(text))
        return text[:i] + text[i + 1 :]
    i = rng.randrange(len(text) + 1)
    return text[:i] + rng.choice(INSERTED) + text[i:]


# ------------------------------------------------------------------ the postlex


def _kinds(types: list[str], eof: bool = True) -> list[str]:
    post = GoSemicolons()
    if not eof:
        post = type("NoEof", (GoSemicolons,), {"insert_at_eof": False})()
    return [t.type for t in post.process(iter(Token(k, "x") for k in types))]


def test_postlex_inserts_after_trigger_tokens_only():
    assert _kinds(["NAME", "_NL", "NAME"]) == ["NAME", "SEMICOLON", "NAME", "SEMICOLON"]
    assert _kinds(["NAME", "PLUS", "_NL", "NAME"]) == [
        "NAME",
        "PLUS",
        "NAME",
        "SEMICOLON",
    ]
    for trigger in sorted(GoSemicolons.trigger_types):
        assert _kinds([trigger, "_NL"], eof=False) == [trigger, "SEMICOLON"]
    for other in (
        "LPAR",
        "LSQB",
        "LBRACE",
        "COMMA",
        "DOT",
        "PLUS",
        "FUNC",
        "IF",
        "SEMICOLON",
        "GOTO",
    ):
        assert _kinds([other, "_NL"], eof=False) == [other]


def test_postlex_one_semicolon_per_line_end_and_at_eof():
    assert _kinds(["NAME", "_NL", "_NL", "_ML_COMMENT", "_NL"]) == ["NAME", "SEMICOLON"]
    assert _kinds(["RPAR", "_ML_COMMENT", "NAME"]) == [
        "RPAR",
        "SEMICOLON",
        "NAME",
        "SEMICOLON",
    ]
    assert _kinds(["NAME", "SEMICOLON", "_NL"]) == ["NAME", "SEMICOLON"]
    assert _kinds(["RBRACE"]) == ["RBRACE", "SEMICOLON"]
    assert _kinds(["LBRACE"]) == ["LBRACE"]
    assert _kinds([]) == []
    assert _kinds(["_NL"]) == []


def test_postlex_configuration_names_the_grammar_terminals(go_lark, go_ir):
    names = set(go_ir.terminal_names)
    assert set(GoSemicolons.nl_types) <= names
    assert GoSemicolons.semicolon_type in names
    assert GoSemicolons.trigger_types <= names
    assert set(GoSemicolons.always_accept) <= names
    assert {t.name for t in go_lark.terminals} == names
    used = {s for r in go_ir.rules for s in r.rhs}
    # the parser never sees the newline and error terminals; it sees every other non-ignored one
    assert names - used - set(go_ir.ignore) == set(GoSemicolons.always_accept)
    literals = {t.literal: t.name for t in go_ir.terminals if t.literal}
    for spelling, name in {
        ")": "RPAR",
        "]": "RSQB",
        "}": "RBRACE",
        "++": "INC",
        "--": "DEC",
        ";": "SEMICOLON",
        "break": "BREAK",
        "continue": "CONTINUE",
        "fallthrough": "FALLTHROUGH",
        "return": "RETURN",
    }.items():
        assert literals[spelling] == name


# ------------------------------------------------------------------ the grammar


def test_go_is_a_postlex_builtin():
    assert "go" in POSTLEX_BUILTINS
    assert builtin_source("go").startswith("// Go 1.19")
    rules = grammask.Grammar.builtin("go").semicolons
    assert rules.newlines == GoSemicolons.nl_types and rules.semicolon == GoSemicolons.semicolon_type
    assert set(rules.triggers) == set(GoSemicolons.trigger_types) and rules.at_end


def test_grammar_size_and_conflicts(go_ir):
    """grammask's own front end builds the grammar; its conflicts are the documented ones, resolved as Go does."""
    assert len(go_ir.terminals) == 86
    with pytest.warns(UserWarning, match="11 LALR"):
        tables = build_front(go_ir).tables
    shifts = [n for n in tables.notes if n.startswith("shift/reduce")]
    priorities = [n for n in tables.notes if n.startswith("reduce/reduce")]
    assert len(shifts) == 5 and len(priorities) == 6
    assert all("resolved as shift" in n for n in shifts)
    assert all("(highest priority)" in n for n in priorities)
    for rule in (
        "recv_chan_type",
        "_complit_type -> array_type",
        "_complit_type -> slice_type",
        "_complit_type -> map_type",
        "_complit_type -> struct_type",
        "type_switch_guard",
    ):
        assert any(f"reduce by {rule}" in n for n in priorities), rule


# ------------------------------------------------------------------ against gofmt

CASES = [
    "package p; var c5 <- chan <- chan int = (<-chan (<-chan int))(nil)",
    "package p; var x = <-chan <-chan int(nil)",
    "package p; var x = (<-chan <-chan int)(nil)",
    "package p; var x = <-chan chan<- int(nil)",
    "package p; var x = <-chan<- chan int(nil)",
    "package p; var x chan<- <-chan int",
    "package p; var x <-chan <-chan <-chan int",
    "package p; var x = <-<-c",
    "package p; var x = <-chan int(nil) + 1",
    "package p; func f() { _: _: }",
    "package p; func f() { L: M: x++ }",
    "package p; func f() { switch { case 1: L: M: case 2: } }",
    "package p; func f() { switch { case 1: L: M: } }",
    "//line a.go:10\npackage p; import 42",
    "package p\n//line x.go:1\nvar x",
    "package p; type T[P *C | []int] int",
    "package p; type T[P + []int]int",
    "package p; type T[P (C) | []int] int",
    "package p; type T[P *~int] int",
    "package p; type T[P.x + []int]int",
    "package p; type T[P | []int]int",
    "package p; type T[P | Q, R any]int",
    "package p; type T[P *C | ~D]int",
    "package p; type T[P (C), ]int",
    "package p; type T[P *struct{} | D]int",
    "package p; type T[P * C - []int]int",
    "package p; type T[P - -[]int]int",
    "package p; type T[P + x.([]int)]int",
    "package p; type T[P / (func())]int",
    "package p; type T[[]int + P]int",
    "package p; type T[1 + []int]int",
    "package p; func f() { for a, b, c := range x {} }",
    "package p; func f() { select { case a, b, c := <-c: } }",
    "package p; func f() { for a, b.c = range x {} }",
    "package p; func f() { for a.b, c = range x {} }",
    "package p; func f() { for a, b, c = range x {} }",
    "package p; func f() { for a, b.c, d = range x {} }",
    "package p; func f() { for a, b, c.d = range x {} }",
    "package p; func f() { for a, b := range x {} }",
    "package p; func f() { for a, b, c := 1, 2, 3; ; {} }",
    "package p; func f() { for a, b.c, d = 1, 2, 3; ; {} }",
    "package p; func f() { if a, b, c := 1, 2, 3; a {} }",
    "package p; func f() { if a.b, c = 1, 2; a {} }",
    "package p; func f() { select { case a, b = <-c: } }",
    "package p; func f() { select { case a.b, c = <-c: } }",
    "package p; func f() { select { case a, b.c = <-c: } }",
    "package p; func f() { select { case a, b, c = <-c: } }",
    "package p; func f() { select { case a.b, c := <-c: } }",
    "package p; func f() { select { case x, y: } }",
    "package p; func f() { select { case a, b <- c: } }",
    "package p",
    "package _",
    'package p; import "fmt"',
    'package p; import ( "fmt"; "os" )',
    'package p; import ( "fmt"; "os"; )',
    "package p; import ()",
    'package p; import f "fmt"',
    'package p; import . "fmt"',
    'package p; import _ "fmt"',
    'package p; import "a b"',
    'package p; import ""',
    "package p; import `fmt`",
    'package p; import "é/ü"',
    'package p; import "a!b"',
    "package p; import fmt",
    "package p; var x int",
    "package p; var x",
    "package p; var x = 1",
    "package p; var x, y int = 1, 2",
    "package p; var ( x int; y = 2 )",
    "package p; var ()",
    "package p; const x",
    "package p; const x = 1",
    "package p; const x int",
    "package p; const ( a = iota; b; c )",
    "package p; const ( a; b )",
    "package p; const ( a = 1; b int )",
    "package p; const ( a int = 1; b, c )",
    "package p; type T int",
    "package p; type T = int",
    "package p; type T[P any] struct{}",
    "package p; type T[P any,] struct{}",
    "package p; type T[P, Q any] struct{}",
    "package p; type T[P any, Q comparable] struct{}",
    "package p; type T[P interface{ ~int | ~string }] int",
    "package p; type T[P ~int | ~string] int",
    "package p; type T[P *C] int",
    "package p; type T[P *C,] int",
    "package p; type T[P *C, Q any] int",
    "package p; type T[P *[]int] int",
    "package p; type T[P *[]int | string] int",
    "package p; type T[P (C)] int",
    "package p; type T[P ([]int)] int",
    "package p; type T[P (C), Q any] int",
    "package p; type T[N]int",
    "package p; type T[N+1]int",
    "package p; type T[N*2]int",
    "package p; type T[a.b]int",
    "package p; type T[f(1)]int",
    "package p; type T[]int",
    "package p; type T[...]int",
    "package p; type T[5]int",
    "package p; type T[P]",
    "package p; type T[P,] int",
    "package p; type T[] int",
    "package p; type T[P []int] int",
    "package p; type T[P [N]int] int",
    "package p; type T[P ...int] int",
    "package p; type T[P | Q] int",
    "package p; type T[P C | D] int",
    "package p; type T[P *C | D] int",
    "package p; type T[P *a.b.c, Q any] int",
    "package p; type T[P T2[int]] int",
    "package p; type T[P[Q]]int",
    "package p; type T[P{}]int",
    "package p; type T[P any] = int",
    "package p; type ( A int; B string )",
    'package p; type S struct { a, b int; c string "tag"; *T; pkg.T; T[int]; pkg.U[int, string] }',
    "package p; type S struct { (T) }",
    "package p; type S struct { *[]int }",
    "package p; type S struct { a [N]int }",
    "package p; type S struct { a []int }",
    "package p; type S struct { a, b []int }",
    "package p; type S struct { T[N] }",
    "package p; type S struct { T[N,] }",
    'package p; type S struct { T[N] "tag" }',
    "package p; type S struct { a.b c }",
    "package p; type S struct { ; }",
    "package p; type S struct { a int; }",
    "package p; type S struct { a int b int }",
    "package p; type I interface { M(); N(int) string; E; pkg.E; ~int | string; []int | map[int]int }",
    "package p; type I interface { M[T any]() }",
    "package p; type I interface { T[int] }",
    "package p; type I interface { T[int,] }",
    "package p; type I interface { pkg.T[int] }",
    "package p; type I interface { ~int }",
    "package p; type I interface { int | ~string | *T }",
    "package p; type I interface { (T) }",
    "package p; func f()",
    "package p; func f() {}",
    "package p; func f() ;",
    "package p; func f[T any](x T) T { return x }",
    "package p; func f[T any, U ~int](x T, y U) {}",
    "package p; func f[](x T) {}",
    "package p; func f[T](x T) {}",
    "package p; func (r R) m() {}",
    "package p; func (r *R[T]) m() {}",
    "package p; func (r R) m[T any]() {}",
    "package p; func f(a, b int, c string) {}",
    "package p; func f(a, b int, string) {}",
    "package p; func f(int, string) {}",
    "package p; func f(a, b) {}",
    "package p; func f(a ...int) {}",
    "package p; func f(...int) {}",
    "package p; func f(a [...]int) {}",
    "package p; func f(*[...]int) {}",
    "package p; func f(a []int, b [3]int) {}",
    "package p; func f(a[int]) {}",
    "package p; func f(a[int], b) {}",
    "package p; func f(a.B, c) {}",
    "package p; func f(a, b,) {}",
    "package p; func f(,) {}",
    "package p; func f() (int, error) {}",
    "package p; func f() (x int, err error) {}",
    "package p; func f() (int) {}",
    "package p; func f() []int {}",
    "package p; func f() func() int { return nil }",
    "package p; func f() func() {}",
    "package p; func f() <-chan int {}",
    "package p; func f() chan<- int {}",
    "package p; func f() chan <-chan int {}",
    "package p; var f = func[T any]() {}",
    "package p; var t func[T any]()",
    "package p; func f() { x := 1; _ = x }",
    "package p; func f() { a.b := 1 }",
    "package p; func f() { *p := 1 }",
    "package p; func f() { a, b := 1, 2 }",
    "package p; func f() { a, b.c = 1, 2 }",
    "package p; func f() { a, b.c := 1, 2 }",
    "package p; func f() { a, ~b = 1, 2 }",
    "package p; func f() { ~x }",
    "package p; func f() { x = ~y }",
    "package p; func f() { -x }",
    "package p; func f() { x }",
    "package p; func f() { x, y }",
    "package p; func f() { x <- y }",
    "package p; func f() { x, y <- z }",
    "package p; func f() { x++ }",
    "package p; func f() { x.y++ }",
    "package p; func f() { x += 1 }",
    "package p; func f() { x, y += 1, 2 }",
    "package p; func f() { L: x++ }",
    "package p; func f() { L: }",
    "package p; func f() { L: ; }",
    "package p; func f() { a.b: x }",
    "package p; func f() { goto L; L: }",
    "package p; func f() { goto }",
    "package p; func f() { break; continue; fallthrough }",
    "package p; func f() { break L }",
    "package p; func f() { fallthrough L }",
    "package p; func f() { return 1, 2 }",
    "package p; func f() { go f() }",
    "package p; func f() { go f }",
    "package p; func f() { go (f()) }",
    "package p; func f() { go f()() }",
    "package p; func f() { defer f.g(x) }",
    "package p; func f() { defer []int(x) }",
    "package p; func f() { defer func(){}() }",
    "package p; func f() { var x int; const y = 1; type T int }",
    "package p; func f() { if x {} }",
    "package p; func f() { if x {} else {} }",
    "package p; func f() { if x {} else if y {} else {} }",
    "package p; func f() { if x {} else x }",
    "package p; func f() { if x := 1; x > 0 {} }",
    "package p; func f() { if ; x {} }",
    "package p; func f() { if x; {} }",
    "package p; func f() { if {} }",
    "package p; func f() { if x := 1 {} }",
    "package p; func f() { if var x = 1; x {} }",
    "package p; func f() { if x == T{} {} }",
    "package p; func f() { if x == (T{}) {} }",
    "package p; func f() { if x == []int{1}[0] {} }",
    "package p; func f() { if x == struct{}{} {} }",
    "package p; func f() { if x == map[int]int{}[1] {} }",
    "package p; func f() { if x == [...]int{1}[0] {} }",
    "package p; func f() { if x == pkg.T{} {} }",
    "package p; func f() { if x == T[int]{} {} }",
    "package p; func f() { if f(T{}) {} }",
    "package p; func f() { if x[T{}] {} }",
    "package p; func f() { if func() bool { return T{} == x }() {} }",
    "package p; func f() { if x := (T{}); x.y {} }",
    "package p; func f() { for {} }",
    "package p; func f() { for x {} }",
    "package p; func f() { for i := 0; i < n; i++ {} }",
    "package p; func f() { for ;; {} }",
    "package p; func f() { for i := 0; i < n; {} }",
    "package p; func f() { for ; i < n; i++ {} }",
    "package p; func f() { for i := 0; i < n; j := 1 {} }",
    "package p; func f() { for a; b }",
    "package p; func f() { for range x {} }",
    "package p; func f() { for k := range x {} }",
    "package p; func f() { for k, v := range x {} }",
    "package p; func f() { for k, v = range x {} }",
    "package p; func f() { for a.b = range x {} }",
    "package p; func f() { for a.b := range x {} }",
    "package p; func f() { for k += range x {} }",
    "package p; func f() { for _, x := range []int{1,2} {} }",
    "package p; func f() { for _, x := range T{} {} }",
    "package p; func f() { switch {} }",
    "package p; func f() { switch x {} }",
    "package p; func f() { switch x { case 1: case 2, 3: default: } }",
    "package p; func f() { switch x { case 1: a; b; case 2: c } }",
    "package p; func f() { switch x { case 1: a case 2: } }",
    "package p; func f() { switch { case 1: L: case 2: } }",
    "package p; func f() { switch { case 1: L: } }",
    "package p; func f() { switch x := f(); x {} }",
    "package p; func f() { switch x := f(); {} }",
    "package p; func f() { switch ; {} }",
    "package p; func f() { switch x := y {} }",
    "package p; func f() { switch x.(type) {} }",
    "package p; func f() { switch v := x.(type) { case int, []string: case nil: default: } }",
    "package p; func f() { switch v = x.(type) {} }",
    "package p; func f() { switch a, b := x.(type) {} }",
    "package p; func f() { switch x := 0; v := x.(type) {} }",
    "package p; func f() { switch x.(type) { case 1: } }",
    "package p; func f() { switch x { case int: } }",
    "package p; func f() { switch x { case []int{1}[0]: } }",
    "package p; func f() { switch x { case []int: } }",
    "package p; func f() { switch f(x.(type)) {} }",
    "package p; func f() { switch (x.(type)) {} }",
    "package p; func f() { x.(type) }",
    "package p; func f() { select {} }",
    "package p; func f() { select { case x <- 1: case y := <-c: case y, ok := <-c: case <-c: case a, b = <-c: default: } }",
    "package p; func f() { select { case a.b := <-c: } }",
    "package p; func f() { select { case x: } }",
    "package p; func f() { select { case 1 + 2: } }",
    "package p; func f() { { } }",
    "package p; func f() { {} {} }",
    "package p; func f() { ;; }",
    'package p; var x = []byte("s")',
    'package p; var x = ([]byte)("s")',
    "package p; var x = ([]int){1}",
    "package p; var x = (T){1}",
    "package p; var x = []int{1, 2, 3,}",
    "package p; var x = []int{1, 2 3}",
    'package p; var x = map[string]int{"a": 1, "b": 2}',
    "package p; var x = [][]int{{1}, {2}}",
    "package p; var x = []T{{a: 1}, {}}",
    "package p; var x = T{a: {1}}",
    "package p; var x = [...]int{1}",
    "package p; var x = [...]int(y)",
    "package p; var x = ([...]int)",
    "package p; var x = *[...]int(y)",
    "package p; var x = struct{ a int }{1}",
    "package p; var x = struct{}.x",
    "package p; var x = []int.foo",
    "package p; var x = interface{}(nil)",
    "package p; var x = interface{}{}",
    "package p; var x = func(){}",
    "package p; var x = func()",
    "package p; var x = func() int { return 1 }()",
    "package p; var x = func(int) (x)",
    "package p; var x = chan int(nil)",
    "package p; var x = <-chan int(nil)",
    "package p; var x = <-chan int",
    "package p; var x = <-c",
    "package p; var x = <-chan<- int",
    "package p; var x = (<-chan int)(nil)",
    "package p; var x = make(chan<- int)",
    "package p; var x = make(<-chan int, 1)",
    "package p; var x = new(*int)",
    "package p; var x = *p",
    "package p; var x = &T{}",
    "package p; var x = -[]int{1}[0]",
    "package p; var x = ![]int",
    "package p; var x = []int + 1",
    "package p; var x = a[1:2]",
    "package p; var x = a[:]",
    "package p; var x = a[1:]",
    "package p; var x = a[:2]",
    "package p; var x = a[1:2:3]",
    "package p; var x = a[:2:3]",
    "package p; var x = a[1::3]",
    "package p; var x = a[1:2:]",
    "package p; var x = a[::]",
    "package p; var x = a[1:2:3:4]",
    "package p; var x = a[]",
    "package p; var x = a[[]int:]",
    "package p; var x = f[int]",
    "package p; var x = f[int, string]",
    "package p; var x = f[int,]",
    "package p; var x = f[int,,]",
    "package p; var x = f[[]int](1)",
    "package p; var x = f[1:2, 3]",
    "package p; var x = f(a, b...)",
    "package p; var x = f(a..., b)",
    "package p; var x = f(a...,)",
    "package p; var x = f(a,)",
    "package p; var x = f(,)",
    "package p; var x = f(...)",
    "package p; var x = a.(T)",
    "package p; var x = a.(type)",
    "package p; var x = a.(*T).b",
    "package p; var x = a.()",
    "package p; var x = a.",
    "package p; var x = a || b && c == d + e * f",
    "package p; var x = a &^ b << 2 >> 1 % 3",
    "package p; var x = a &^= b",
    "package p; var x = a = b",
    "package p; var x = a == b != c",
    "package p; var x = 1 +",
    "package p; var x = 'a'",
    "package p; var x = '\\n'",
    "package p; var x = '\\''",
    "package p; var x = '\\\"'",
    'package p; var x = "\\\'"',
    "package p; var x = '\\x41'",
    "package p; var x = '\\101'",
    "package p; var x = '\\400'",
    "package p; var x = '\\u00e9'",
    "package p; var x = '\\ud800'",
    "package p; var x = '\\U0010ffff'",
    "package p; var x = '\\U00110000'",
    "package p; var x = 'ab'",
    "package p; var x = ''",
    "package p; var x = '''",
    "package p; var x = 'é'",
    'package p; var x = "a\\tb\\\\c\\"d"',
    'package p; var x = "\\q"',
    'package p; var x = "\\xZZ"',
    "package p; var x = `raw\nstring`",
    'package p; var x = "unterminated',
    "package p; var x = 0",
    "package p; var x = 0x1F",
    "package p; var x = 0X_1f",
    "package p; var x = 0x",
    "package p; var x = 0x_",
    "package p; var x = 0b1010",
    "package p; var x = 0b12",
    "package p; var x = 0b12i",
    "package p; var x = 0B_1",
    "package p; var x = 0o17",
    "package p; var x = 0O_17",
    "package p; var x = 0o18",
    "package p; var x = 017",
    "package p; var x = 018",
    "package p; var x = 018.5",
    "package p; var x = 018i",
    "package p; var x = 0_17",
    "package p; var x = 1_000_000",
    "package p; var x = 1__000",
    "package p; var x = 1_",
    "package p; var x = 1.5",
    "package p; var x = 1.",
    "package p; var x = .5",
    "package p; var x = 1e10",
    "package p; var x = 1E+10",
    "package p; var x = 1e",
    "package p; var x = 1.e5",
    "package p; var x = 1_0.0_1e1_0",
    "package p; var x = 1_.5",
    "package p; var x = 1._5",
    "package p; var x = 0x1p-2",
    "package p; var x = 0x1.8p1",
    "package p; var x = 0x.8p1",
    "package p; var x = 0x1.8",
    "package p; var x = 0x1P+2i",
    "package p; var x = 0x1e+2",
    "package p; var x = 1i",
    "package p; var x = 1.5i",
    "package p; var x = 0b1i",
    "package p; var x = 0o7i",
    "package p; var x = 0b1.x",
    "package p; var x = 0b1.5",
    "package p; var x = 0o7.x",
    "package p; var x = 1.x",
    "package p; var x = 1.(x)",
    "package p; var x = 1e5.x",
    "package p; var x = 1..x",
    "package p; var x = a..b",
    "package p; var x = a...",
    "package p; var x = αβγ",
    "package p; var x = x٣",
    "package p; var x = ٣x",
    "package p; var x = x²",
    "package p; var x = 日本",
    "package p; var _ = 1 // comment",
    "package p; var _ = 1 /* comment */",
    "package p; var _ = 1 /* comment",
    "package p; var _ = 1 /* a */ + /* b */ 2",
    "package p; var _ = 1 /* */ */",
    "package p; var _ = 1 /* a */ 2",
    "package p; var _ = x /* y",
    "package p; var _ = x / * y",
    "package p; var _ = 1 /**/",
    "package p; var _ = 1 /***/",
    "package p; var _ = 1 /*/",
    "package p; func f() { return /* a\n*/ }",
    "package p; func f() { x := 1 /* a\n*/ + 2 }",
    "package p; func f() { x := 1 /* a */ + 2 }",
    "package p; func f() { return\n}",
    "package p; func f() { x :=\n1 }",
    "package p; func f() { x := 1 +\n2 }",
    "package p; func f() { x := f(1,\n2) }",
    "package p; func f() { x := f(1,\n2\n) }",
    "package p; func f() { x := []int{\n1,\n2,\n} }",
    "package p; func f() { x := []int{\n1,\n2\n} }",
    "package p; func f()\n{ }",
    "package p; func f() { if x\n{ } }",
    "package p; func f() { for i := range x\n{ } }",
    "package p; func f() { x++\ny-- }",
    "package p; func f() { a[i]\nb }",
    "package p; func f() { break\ncontinue }",
    "package p; func f() { g()\n}",
    "package p; func f() { x := 'a'\ny := \"b\"\nz := `c`\nw := 1.5\n}",
    "package p; var x = f(a,\nb...,\n)",
    'package p; type T struct {\n\ta int\n\tb string `json:"b"`\n}',
    "package p; type T interface {\n\tM()\n\t~int |\n\t\tstring\n}",
    "package p; type T interface {\n\tM()\n\t~int\n\t| string\n}",
    "package p\nfunc f() {}",
    'package p\n\nimport "fmt"\n\nfunc main() { fmt.Println("hi") }',
    "package p; func f() { x := T{\n} }",
    "package p; func f() { go func() {\n}() }",
    "package p; func f() { _ = x.\ny }",
    "package p; func f() { _ = x\n.y }",
    "package p; func f[T interface{ ~[]E }, E any]() {}",
    "package p; type T[P any] interface{ M() P }",
    "package p; var x = (*T).M",
    "package p; var x = T.M",
    "package p; var x = (*T)(x)",
    "package p; func f() { (x) = 1 }",
    "package p; func f() { *p = 1 }",
    "package p; func f() { <-c }",
    "package p; func f() { []int{1}[0] = 2 }",
    "package p; func f() { struct{}{} }",
    "package p; func f() { func(){}() }",
    "package p; func f() { chan int(nil) }",
    "package p; func f() { interface{}(x) }",
    "package p; func f() { map[int]int{}[1] = 2 }",
    "package p; func f() { x.(T){} }",
    "package p; func f() { f(){} }",
    "package p; func f() { a.b.c{} }",
    "package p; func f() { T[int]{} }",
    "package p; func f() { x := T[int]{} }",
    "package p; type S struct { *T[int] }",
    "package p; type S struct { *pkg.T[int] }",
    "package p; func f() { L: for { continue L } }",
    "package p; func f() { &x }",
    "package p; func f() { x = y = z }",
    "package p; func f() { x := y := z }",
    "package p; func f() { 1 }",
    'package p; func f() { "s" }',
    "package p; func f() { []int }",
    "package p; func f() { T }",
    "package p; func f() { x; }",
    "package p; func f() { ; x }",
    "package p; var x = T{}.x",
    "package p; var x = T{}{}",
    "package p; var x = T{}[0]",
    "package p; func f() { if x == T.y {} }",
    "package p; func f() { if x == T(y) {} }",
    "package p; func f() { if x == T[0] {} }",
    "package p; func f() { if x == []T{}[0] {} }",
    "package p; func f() { if x == T {} }",
    "package p; func f() { switch T{} {} }",
    "package p; func f() { switch x := T{}; x {} }",
    "package p; func f() { for x := T{}; x < y; {} }",
    "package p; func f() { if x := []int{}; len(x) > 0 {} }",
    "package p; func f() { if x := map[int]T{}; x {} }",
    "package p; func f() { if f := func() { _ = T{} }; f != nil {} }",
    "package p; var x = [2]int{1, 2}",
    "package p; var x = [N]int{}",
    "package p; var x = [N+1]T{}",
    "package p; var x = [...]T{}",
    "package p; var x = map[[2]int]string{}",
    "package p; var x = chan<- chan int(nil)",
    "package p; var x = chan (<-chan int)(nil)",
    "package p; var x, y = 1",
    "package p; func f() (a, b int, c string) {}",
    "package p; func f() (a, b) {}",
    "package p; func f(a int, b) {}",
    "package p; func f(a, b int, c ...string) {}",
    "package p; func f(a int, ...string) {}",
    "package p; func f(x, y []int, z [2]int, w T[int]) {}",
    "package p; func f(x T[int], y) {}",
    "package p; func f(T[int], U) {}",
    "package p; func f(x, T[int]) {}",
    "package p; func f() { var x = 1; x++ }",
    "package p; func f() { type T[P any] int }",
    "package p; func f() { switch x { default: default: } }",
    "package p; var x = 1e1_0",
    "package p; var x = 0x_1p1",
    "package p; var x = 0x1p",
    "package p; var x = 0x1p+",
    "package p; var x = 0b",
    "package p; var x = 0o",
    "package p; var x = 0b_",
    "package p; var x = 09",
    "package p; var x = 09.",
    "package p; var x = 09e1",
    "package p; var x = 0.",
    "package p; var x = 00",
    "package p; var x = 00.0i",
    "package p; var x = 1_0i",
    "package p; var x = 0b1_0i",
    "package p; var x = 0x_i",
    "package p; var x = 0xi",
    "package p; var x = 1ii",
    "package p; var x = .e1",
    "package p; var x = ._1",
    "package p; var x = x._1",
    'package p; var x = "\\u00e9\\U0001F600\\377\\a\\b\\f\\n\\r\\t\\v\\\\"',
    'package p; var x = "\\uD800"',
    'package p; var x = "\\U0000d800"',
    'package p; var x = "\\8"',
    "package p; var x = '\\8'",
    "package p; var x = '\\0'",
    "package p; var x = '\\000'",
    'package p; var x = "\n"',
    'package p; var x = "\t"',
    "package p; var x = '\t'",
    "package p; var x = `a`b`",
    "package p; var x = ``",
    'package p; var x = ""',
    "package p;;",
    "package p; var x int;;",
    "package p; func f() {};",
    "package p\n;",
    "package p; func f() { x := 1 /* c */ }",
    "package p; func f() { return /* c */ }",
    "package p; func f() { return // c\n}",
    "package p; func f() { x := 1 // c\ny := 2 }",
    "package p; func f() { x := 1 /* c */ // d\ny := 2 }",
    "package p; func f() { x := 1 /* c */ /* d\n*/ y := 2 }",
    "package p; func f() { x := 1 /* c */ /* d */ y := 2 }",
    "package p; func f() { x := f(1, /* c\n*/ 2) }",
    "package p; func f() { return x /* c\n*/ }",
    "package p; func f() {\n\tif x {\n\t}\n\telse {\n\t}\n}",
    "package p; func f() {\n\tx := []int{1, 2}[\n\t\t0]\n}",
    "package p; func f() {\n\tx := a.\n\t\tb\n}",
    "package p; func f() {\n\tx := a\n\t\t.b\n}",
    "package p; func f() { x := 1 } // end",
    "package p; func f() { x := 1 } /* end */",
    "package p; func f() { x := 1 } /* end\n*/",
    "package p; var x = []func(){f, g}",
    'package p; var x = map[string]func(){"a": f}',
    "package p; var x = [2]func() int{f, g}",
    "package p; func f() { if *func() bool { return true }() {} }",
    "package p; func f() { if x == func() {} {} }",
    "package p; func f() { switch x.(type) { case func(): } }",
    "package p; func f() { var c chan func(); _ = c }",
    "package p; var x = struct{ f func() }{nil}",
    "package p; var x = func() func() { return nil }",
    "package p; var x = func() (func()) { return nil }",
    "package p; var x = func() []func() {}",
    "package p; func f() { x := func() []int {}; _ = x }",
    "package p; func f() { x := func() []int {}[0]; _ = x }",
    "package p; var x = f(func() {})",
    "package p; var x = f(func())",
    "package p; func f() { if f(func()) {} }",
    "package p; func f() { for x := range func() []int { return nil }() {} }\n",
    # only an index or type arguments may come before a composite literal's `{`, never a slice
    "package p; func f() { x[:] {} }",
    "package p; var _ = x[1:]{}",
    "package p; var _ = x[1:2:3]{}",
    "package p; var _ = x[int]{}",
    "package p; var _ = x.y[int, string]{}",
    "package p; func f() { if x[:] {} }",
]

# (source, what the grammar says): gofmt says the opposite; see the module docstring
KNOWN_DIFFERENCES = [
    ('package p; import "\\x41"\n', False),
    ("package p; type T[P * []int + 1]int\n", False),
    ("\ufeffpackage p\n", False),
    ("package p; type T[P *C | D, R any]int\n", False),
]
# Lark's backtracking lexer only (grammask's lexing rule agrees with gofmt)
LARK_ONLY_DIFFERENCES = ["package p; var x = 0x1.x\n", "package p; var x = 0x1.f\n"]


@needs_go
def test_targeted_cases_agree_with_gofmt(go_lark, munch):
    texts = [c + "\n" for c in CASES]
    verdicts = gofmt_verdicts(texts)
    assert 100 < sum(verdicts) < len(texts) - 100
    wrong = [
        (t, v)
        for t, v in zip(texts, verdicts)
        if lark_accepts(go_lark, t) != v or munch(t) != v
    ]
    assert wrong == []


@needs_go
def test_known_differences_are_as_documented(go_lark, munch):
    texts = [t for t, _ in KNOWN_DIFFERENCES] + LARK_ONLY_DIFFERENCES
    verdicts = gofmt_verdicts(texts)
    for (text, ours), gofmt in zip(KNOWN_DIFFERENCES, verdicts):
        assert (
            gofmt != ours
            and lark_accepts(go_lark, text) == ours
            and munch(text) == ours
        ), text
    for text, gofmt in zip(LARK_ONLY_DIFFERENCES, verdicts[len(KNOWN_DIFFERENCES) :]):
        assert not gofmt and lark_accepts(go_lark, text) and not munch(text), text


def _stdlib_accepted(go_lark, munch, n: int) -> None:
    texts = stdlib_texts(n)
    assert len(texts) == n
    assert [i for i, t in enumerate(texts) if not lark_accepts(go_lark, t)] == []
    assert [i for i, t in enumerate(texts) if not munch(t)] == []


def _mutants_agree(go_lark, munch, n_files: int, n_mutants: int, seed: int) -> None:
    base = stdlib_texts(n_files)
    rng = random.Random(seed)
    mutants = [mutate(rng.choice(base), rng) for _ in range(n_mutants)]
    verdicts = gofmt_verdicts(mutants)
    assert 0 < sum(verdicts) < n_mutants
    lark_wrong = [
        k
        for k, (m, v) in enumerate(zip(mutants, verdicts))
        if lark_accepts(go_lark, m) != v
    ]
    munch_wrong = [
        k for k, (m, v) in enumerate(zip(mutants, verdicts)) if munch(m) != v
    ]
    assert lark_wrong == [] and munch_wrong == []


@needs_go
def test_stdlib_files_are_accepted(go_lark, munch):
    _stdlib_accepted(go_lark, munch, FAST_FILES)


@needs_go
def test_mutated_stdlib_files_agree_with_gofmt(go_lark, munch):
    _mutants_agree(go_lark, munch, FAST_FILES, FAST_MUTANTS, seed=7)


@needs_go
@pytest.mark.slow
def test_200_stdlib_files_are_accepted(go_lark, munch):
    _stdlib_accepted(go_lark, munch, SLOW_FILES)


@needs_go
@pytest.mark.slow
def test_1000_mutated_stdlib_files_agree_with_gofmt(go_lark, munch):
    _mutants_agree(go_lark, munch, SLOW_FILES, SLOW_MUTANTS, seed=1)


@needs_go
def test_unicode_classes_are_gos():
    """The letter, digit and import-path classes of go.lark are what Go's unicode tables say."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "go_unicode_classes.go"
    out = subprocess.run(
        [GO, "run", str(script)], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    letters, digits, paths = out[:3]
    text = builtin_source("go")
    assert f"_LETTER: /[a-zA-Z_{letters}]/" in text
    assert f"_UDIGIT: /[0-9{digits}]/" in text
    assert (
        f'IMPORT_PATH.2: /"[+\\-.\\/0-9@A-Z_a-z~{paths}]+"|`[+\\-.\\/0-9@A-Z_a-z~{paths}]+`/'
        in text
    )
