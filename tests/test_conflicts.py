"""LALR(1) conflicts are resolved as Lark resolves them (shift over reduce, reduce/reduce by rule
priority), recorded in notes, refused with ``conflicts="error"``, and the compiled grammar then
agrees with Lark's own (non-strict) LALR parser, masks included.
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import get_vocab
from lark import Lark
from lark.exceptions import GrammarError as LarkGrammarError
from lark.exceptions import LarkError
from lark.parsers.lalr_analysis import Shift
from oracle import MaskOracle

from grammask import Grammar, compile
from grammask.bitmask import allocate_bitmask, bitmask_to_bool
from grammask.compiler import clear_caches
from grammask.errors import GrammarConflictError, GrammarError
from grammask.grammar.ir import Rule
from grammask.grammar.lark_export import lark_parser, to_lark_text
from grammask.parser.tables import ParseTables, build_parse_tables, decode_reduce
from grammask.sampler import SentenceSampler, mutate

DANGLING_ELSE = """
start: stmt+
stmt: "if" NAME "then" stmt ("else" stmt)?
    | NAME ";"
%import common.CNAME -> NAME
%import common.WS
%ignore WS
"""

# Dangling else and an ambiguous sum (shift/reduce, language unchanged), a reduce/reduce decided by
# priority (`tag` wins, so "print n : 2 ;" is rejected) and a shift that cuts sentences off
# ("go up !" is rejected: after "up", "!" is shifted into the longer alternative of `path`).
RESOLVED = """
start: stmt+
stmt: "if" expr "then" stmt ("else" stmt)?
    | NAME "=" expr ";"
    | "{" stmt* "}"
    | "print" tag ":" "1" ";"
    | "print" word ":" "2" ";"
    | "go" path "!"
expr: expr "+" expr | NAME | INT | "(" expr ")"
tag.2: NAME
word: NAME
path: "up" | "up" "!" "down"
%import common.CNAME -> NAME
%import common.INT
%import common.WS
%ignore WS
"""


def _tables(text: str, **kwargs) -> ParseTables:
    g = Grammar.from_lark(text, lexer="basic", **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_parse_tables(g, tuple(t.name for t in g.terminals if t.name not in g.ignore))


def _accepts(compiled, text: str) -> bool:
    vocab = compiled.vocab
    matcher = compiled.matcher()
    return all(matcher.accept_token(t) for t in vocab.encode(text)) and matcher.is_accepting()


def _same_as_lark(tables: ParseTables, text: str) -> None:
    """Walk grammask's tables and Lark's LALR table side by side: every action must be the same."""
    lark_table = Lark(text, parser="lalr", lexer="basic").parser.parser.parser.parse_table
    terms = [*tables.terminals, "$END"]
    theirs_of = {tables.start_state: lark_table.start_states["start"]}
    todo = [tables.start_state]
    while todo:
        s = todo.pop()
        row = lark_table.states[theirs_of[s]]
        targets = [(int(tables.goto[s, j]), row[n][1]) for j, n in enumerate(tables.nonterminals) if tables.goto[s, j] >= 0]
        for i, t in enumerate(terms):
            code, theirs = int(tables.action[s, i]), row.get(t)
            if code == -1 or code == tables.accept_state:
                assert theirs is None or code == tables.accept_state, (s, t, theirs)
            elif code >= 0:
                assert theirs is not None and theirs[0] is Shift, (s, t, theirs)
                targets.append((code, theirs[1]))
            else:
                rule = theirs[1]
                assert tables.rule_text[decode_reduce(code)] == (
                    f"{rule.origin.name} -> {' '.join(x.name for x in rule.expansion) or '<empty>'}"
                ), (s, t)
        for ours, theirs in targets:
            if ours not in theirs_of:
                theirs_of[ours] = theirs
                todo.append(ours)
            assert theirs_of[ours] == theirs, (s, ours)


def test_dangling_else_shifts_and_is_noted():
    g = Grammar.from_lark(DANGLING_ELSE)
    with pytest.warns(UserWarning, match="1 LALR.1. conflict.s. resolved") as w:
        tables = build_parse_tables(g, tuple(t.name for t in g.terminals if t.name not in g.ignore))
    assert len(w) == 1
    (note,) = tables.notes
    assert "shift/reduce conflict on ELSE resolved as shift" in note
    assert "stmt -> IF NAME THEN stmt ELSE stmt" in note and "not reduce by stmt -> IF NAME THEN stmt" in note
    _same_as_lark(tables, DANGLING_ELSE)


def test_conflicts_error_refuses_naming_terminal_and_rules():
    with pytest.raises(GrammarConflictError, match="shift/reduce conflict on terminal ELSE") as e:
        _tables(DANGLING_ELSE, conflicts="error")
    assert "stmt -> IF NAME THEN stmt ELSE stmt" in str(e.value) and "stmt -> IF NAME THEN stmt" in str(e.value)
    assert "not LR(1) either" in str(e.value)  # the dangling else is ambiguous, not an LALR artifact


@pytest.mark.parametrize(("high", "low", "kept", "lost"), [("tag", "word", "x.1", "x.2"), ("word", "tag", "x.2", "x.1")])
def test_reduce_reduce_resolved_by_priority(high, low, kept, lost):
    text = f'start: tag "." "1" | word "." "2"\n{high}.2: "x"\n{low}: "x"'
    (note,) = _tables(text).notes
    assert f"reduce/reduce conflict on DOT: reduce by {high} -> X (highest priority) over {low} -> X" in note
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile(Grammar.from_lark(text, lexer="basic"), get_vocab("smollm2"), cache=False)
    lark = Lark(text, parser="lalr")
    assert _accepts(compiled, kept) and lark.parse(kept)
    assert not _accepts(compiled, lost)
    with pytest.raises(LarkError):
        lark.parse(lost)


def test_reduce_reduce_of_equal_priority_raises_as_lark_does():
    text = 'start: a "." | b "."\na.1: "x"\nb.1: "x"'
    with pytest.raises(LarkGrammarError, match="Reduce/Reduce"):
        Lark(text, parser="lalr")
    with pytest.raises(GrammarConflictError, match="reduce/reduce conflict on terminal DOT") as e:
        _tables(text)
    assert "a -> X | b -> X" in str(e.value) and "equal priority" in str(e.value)


def test_lalr_artifact_is_named():
    # LR(1) but not LALR(1): the states after "a e" and "b e" share a core and merge.
    text = 'start: "a" e "c" | "a" f "d" | "b" f "c" | "b" e "d"\ne: "e"\nf: "e"'
    with pytest.raises(LarkGrammarError, match="Reduce/Reduce"):
        Lark(text, parser="lalr")
    with pytest.raises(GrammarConflictError, match="LALR.1. itself is the obstacle: the grammar is LR.1."):
        _tables(text)


def test_fingerprint_covers_priorities_and_policy():
    base = Grammar.from_lark(DANGLING_ELSE)
    assert Grammar.from_lark(DANGLING_ELSE, conflicts="error").fingerprint() != base.fingerprint()
    bumped = Grammar(base.terminals, (Rule(base.rules[0].lhs, base.rules[0].rhs, 5), *base.rules[1:]), base.start, base.ignore)
    assert bumped.fingerprint() != base.fingerprint()
    assert Grammar.from_lark(DANGLING_ELSE).fingerprint() == base.fingerprint()
    with pytest.raises(GrammarError, match="conflicts must be"):
        Grammar.from_lark(DANGLING_ELSE, conflicts="shift")


def test_export_needs_one_priority_per_rule():
    g = Grammar.from_lark('start: a\na.3: "x" | "y"')
    assert "a.3: X\n    | Y" in to_lark_text(g)
    mixed = Grammar(g.terminals, (g.rules[0], Rule("a", ("X",), 3), Rule("a", ("Y",), 0)), g.start)
    with pytest.raises(GrammarError, match="different priorities"):
        to_lark_text(mixed)


def test_notes_survive_the_disk_cache(tmp_path):
    g = Grammar.from_lark(DANGLING_ELSE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = compile(g, get_vocab("smollm2"), cache=tmp_path)
    clear_caches()
    loaded = compile(g, get_vocab("smollm2"), cache=tmp_path)
    assert loaded.stats.from_cache and loaded.notes == built.notes != ()
    assert loaded.notes == built.notes and any("ELSE" in n for n in loaded.notes)


@pytest.mark.parametrize("prefix", ["", "if x then", "if x then if y then z"])
@pytest.mark.parametrize("slack", [0, 5])
def test_budgets_count_what_the_resolved_tables_parse(prefix, slack):
    from test_budget_guarantee import longest_walk

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile(Grammar.from_lark(DANGLING_ELSE, lexer="basic"), get_vocab("smollm2"), cache=False)
    assert compiled._engine.parse.dropped.shape[0]
    text = prefix + longest_walk(compiled, prefix, slack)
    Lark(DANGLING_ELSE, parser="lalr", lexer="basic").parse(text)


def test_agrees_with_lark_on_resolved_conflicts():
    vocab = get_vocab("smollm2")
    g = Grammar.from_lark(RESOLVED, lexer="basic")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile(g, vocab, cache=False)
        _same_as_lark(compiled._engine.parse, RESOLVED)
    for terminal in ("ELSE", "PLUS", "COLON", "BANG"):
        assert any(f"conflict on {terminal}" in n for n in compiled.notes), (terminal, compiled.notes)
    lark = Lark(RESOLVED, parser="lalr", lexer="basic")
    exported = lark_parser(g)  # the IR exported back to Lark text keeps the rule priorities
    assert "tag.2:" in exported.source_grammar
    sampler = SentenceSampler(g, max_depth=7, lexer=compiled._engine.lexer)
    alphabet = "ifthenlsprintgoud{}=;:!+() 0129xyz"
    rng = random.Random(5)
    counts = {"sampled accepted": 0, "sampled rejected": 0, "mutated accepted": 0, "mutated rejected": 0}
    for _ in range(300):
        doc = sampler.sample(rng)
        for kind, text in (("sampled", doc), ("mutated", mutate(doc, rng, alphabet, edits=rng.randint(1, 2)))):
            if vocab.decode(vocab.encode(text)) != text.encode():
                continue
            try:
                lark.parse(text)
                reference = True
            except LarkError:
                reference = False
            assert _accepts(compiled, text) == reference, f"{kind} document, Lark says {reference}: {text!r}"
            counts[f"{kind} {'accepted' if reference else 'rejected'}"] += 1
    # Sampled derivations that the resolved parser refuses ("go up !", "print n : 2 ;") occur too.
    assert all(n >= 10 for n in counts.values()), counts


@pytest.mark.parametrize(("text", "n_prefixes"), [(DANGLING_ELSE, 300), (RESOLVED, 150)], ids=["dangling_else", "resolved"])
def test_masks_equal_oracle(text, n_prefixes):
    vocab = get_vocab("smollm2")
    g = Grammar.from_lark(text, lexer="basic")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile(g, vocab, cache=False)
    oracle = MaskOracle(text, compiled._engine.lexer, vocab)
    sampler = SentenceSampler(g, max_depth=8, lexer=compiled._engine.lexer)
    rng = random.Random(3)
    row = allocate_bitmask(1, vocab.n_logits)[0]
    checked = 0
    while checked < n_prefixes:
        doc = sampler.sample(rng)
        ids = vocab.encode(doc)
        if vocab.decode(ids) != doc.encode():
            continue
        matcher = compiled.matcher()
        for cut, t in enumerate([*ids, None]):
            if cut % 2 == 0 or t is None:
                matcher.fill_mask(row)
                want = oracle.mask(vocab.decode(ids[:cut]))
                assert np.array_equal(bitmask_to_bool(row, vocab.n_logits), want), f"mask differs after {doc[:60]!r}"
                checked += 1
            if t is not None and not matcher.accept_token(t):
                break  # a derivation the resolved parser refuses: stop at the first refused token


def test_compile_command_prints_resolutions_or_refuses(tmp_path, capsys):
    from grammask.cli import main

    path = tmp_path / "dangling.lark"
    path.write_text(DANGLING_ELSE)
    smollm2 = "tests/data/tokenizers/smollm2/tokenizer.json"
    args = ["compile", "--lark", str(path), "--tokenizer", str(Path(__file__).parent.parent / smollm2), "--no-cache"]
    assert main(args) == 0
    assert "resolved: shift/reduce conflict on ELSE" in capsys.readouterr().out
    assert main([*args, "--conflicts", "error"]) == 2
    assert "shift/reduce conflict on terminal ELSE" in capsys.readouterr().err
