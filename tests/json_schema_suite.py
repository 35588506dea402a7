"""Run the official JSON-Schema-Test-Suite (draft 2020-12) through grammask's schema compiler.

Every case: compile the group's schema (strict mode), feed ``json.dumps(data)`` token by token
through a matcher with the SmolLM2 vocabulary, and ask for EOS at the end. A case passes when
the schema compiled and the verdict equals the suite's ``valid``. Prints a per-file table of
passes, false positives (an invalid instance accepted), false negatives and compile errors,
and the compile errors' messages with ``--errors``.

    python tests/json_schema_suite.py [--suite DIR] [--checker matcher|reference] [--errors] [--json OUT]

``--checker reference`` decides acceptance with grammask's lexer and Lark's LALR parser on the
whole text instead of the token-level matcher (fast; same language).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SUITE = HERE.parent.parent / "shared" / "data" / "json-schema-test-suite" / "draft2020-12"

from lark import Token
from lark.exceptions import UnexpectedInput

from grammask.automata.lexer import build_lexer
from grammask.errors import GrammaskError, TokenRejectedError
from grammask.grammar.json_schema import grammar_from_json_schema
from grammask.grammar.lark_export import lark_parser, lark_terminal_name


def lex_all(lexer, data: bytes) -> list[int] | None:
    """The terminals the lexing rule makes of the whole input, or None if it rejects it.

    Tracks whether a lexeme is pending itself: the automaton's start state can be re-entered
    after reading bytes (``[ab]*abb`` after ``b``), so the state alone does not tell; and the count of a
    lexeme of counted terminals (``maxLength``).
    """
    trans, accept, counter = lexer.trans, lexer.accept, lexer.counter
    out: list[int] = []
    state, pending, count = 0, False, lexer.start_count
    for b in data:
        nxt = int(trans[state, b])
        came_from = state
        if nxt < 0:
            if not pending or accept[state] < 0 or trans[0, b] < 0:
                return None
            out.append(int(accept[state]))
            nxt, came_from, count = int(trans[0, b]), 0, lexer.start_count
        if counter is not None:  # counted terminals: the lexeme moves up the levels of its count
            count += int(counter.inc[came_from, b])
            while count >= counter.up_at[nxt]:
                nxt = int(counter.lift[nxt])
        state, pending = nxt, True
    if pending:
        if accept[state] < 0:
            return None
        out.append(int(accept[state]))
    return out


class ReferenceChecker:
    """Acceptance of whole texts by grammask's lexer and Lark's LALR parser."""

    def prepare(self, grammar):
        lexer = build_lexer(grammar)
        parser = lark_parser(grammar)

        def accepts(text: str) -> bool:
            terminals = lex_all(lexer, text.encode("utf-8"))
            if terminals is None:
                return False
            interactive = parser.parse_interactive("")
            try:
                for t in terminals:
                    if not lexer.ignored[t]:
                        interactive.feed_token(Token(lark_terminal_name(lexer.terminals[t]), ""))
                interactive.feed_eof()
            except UnexpectedInput:
                return False
            return True

        return accepts


class MatcherChecker:
    """Acceptance by grammask's token-level matcher: every token allowed, then EOS allowed."""

    def __init__(self, tokenizer: str):
        sys.path.insert(0, str(HERE))
        from conftest import get_vocab

        self.vocab = get_vocab(tokenizer)

    def prepare(self, grammar):
        from grammask.compiler import compile as compile_grammar

        compiled = compile_grammar(grammar, self.vocab)

        def accepts(text: str) -> bool:
            matcher = compiled.matcher()
            tokens = self.vocab.encode(text)
            if b"".join(self.vocab.tokens[t] for t in tokens) != text.encode("utf-8"):
                raise RuntimeError(f"the tokenizer does not spell {text!r} back exactly")
            try:
                for token in tokens:
                    matcher.advance(token)
            except TokenRejectedError:
                return False
            return matcher.is_accepting()

        return accepts


def run_suite(suite: Path, checker, *, property_order: str = "any") -> tuple[dict[str, Counter], list[str]]:
    """Per-file outcome counts, and one line per compile error."""
    table: dict[str, Counter] = {}
    errors: list[str] = []
    for path in sorted(suite.rglob("*.json")):
        name = str(path.relative_to(suite))
        counts = table.setdefault(name, Counter())
        for group in json.loads(path.read_text(encoding="utf-8")):
            try:
                grammar = grammar_from_json_schema(group["schema"], property_order=property_order)
                accepts = checker.prepare(grammar)
            except GrammaskError as e:
                counts["compile_error"] += len(group["tests"])
                errors.append(f"{name} | {group['description']}: {type(e).__name__}: {e}")
                continue
            for test in group["tests"]:
                verdict = accepts(json.dumps(test["data"]))
                if verdict == test["valid"]:
                    counts["pass"] += 1
                elif verdict:
                    counts["false_positive"] += 1
                else:
                    counts["false_negative"] += 1
    return table, errors


def print_table(table: dict[str, Counter]) -> Counter:
    columns = ("pass", "false_positive", "false_negative", "compile_error")
    print(f"{'file':48} {'cases':>5} " + " ".join(f"{c:>14}" for c in columns))
    total: Counter = Counter()
    for name, counts in table.items():
        total.update(counts)
        print(f"{name:48} {sum(counts.values()):5d} " + " ".join(f"{counts[c]:14d}" for c in columns))
    print(f"{'TOTAL':48} {sum(total.values()):5d} " + " ".join(f"{total[c]:14d}" for c in columns))
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=DEFAULT_SUITE)
    parser.add_argument("--checker", choices=("matcher", "reference"), default="matcher")
    parser.add_argument("--property-order", choices=("schema", "any"), default="any")
    parser.add_argument("--errors", action="store_true", help="print every compile error")
    parser.add_argument("--json", type=Path, help="write the table as JSON here")
    args = parser.parse_args(argv)
    checker = MatcherChecker("smollm2") if args.checker == "matcher" else ReferenceChecker()
    start = time.perf_counter()
    table, errors = run_suite(args.suite, checker, property_order=args.property_order)
    total = print_table(table)
    print(f"{time.perf_counter() - start:.1f} s, checker={args.checker}, property_order={args.property_order}")
    if args.errors:
        print("\n".join(errors))
    if args.json:
        args.json.write_text(json.dumps({k: dict(v) for k, v in table.items()}, indent=1))
    return 1 if total["false_positive"] else 0


if __name__ == "__main__":
    sys.exit(main())
