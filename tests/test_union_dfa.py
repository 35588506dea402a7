"""The lexer's union of terminal DFAs (``dfa.union_dfa``: subsets only numbered, ``automata/subsets.py``): the very DFA
``build_dfa`` makes (same states, numbering and accepted tags) from terminals' NFAs, for random terminal sets and the
built-in grammars; the general construction where an NFA is not a DFA; the deadline."""

from __future__ import annotations

import re
import time
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammask.automata.dfa import ByteDFA, build_dfa, union_dfa
from grammask.automata.patterns import compile_regex, terminal_nfa
from grammask.automata.subsets import deterministic
from grammask.errors import CompileTimeoutError, Deadline
from grammask.grammar import Grammar

REGEXES = [
    r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"',
    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
    r"[ \t\n\r]+",
    r"[a-zA-Z_]\w*",
    r"(a|b)*abb",
    r"a?",  # accepts the empty string: the start accepts
    r"[^\x00-\U0010ffff]",  # the empty language: a start without moves
    r'"[a-z]{2,5}"',
    r"\d+(\.\d*)?",
    r"é+|日本",
    r"(?i)null",
]
literals = st.text(alphabet='"abé:,{}0 ', min_size=1, max_size=6)


def same(left: ByteDFA, right: ByteDFA) -> bool:
    return np.array_equal(left.trans, right.trans) and left.accepts == right.accepts


def nfas_of(terminals: list[tuple[str, str | None]]):
    return [terminal_nfa(pattern, "", literal, f"T{i}") for i, (pattern, literal) in enumerate(terminals)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(REGEXES).map(lambda r: (r, None)),
                          literals.map(lambda s: (re.escape(s), s))), min_size=2, max_size=12))
def test_union_is_build_dfa_on_terminal_nfas(terminals) -> None:
    nfas = nfas_of(terminals)
    assert all(deterministic(nfa) for nfa in nfas)
    assert same(union_dfa(nfas), build_dfa(nfas))


def test_only_empty_languages_give_a_lone_start_state() -> None:
    nfas = nfas_of([(r"[^\x00-\U0010ffff]", None), (r"\ud800", None)])
    dfa = union_dfa(nfas)
    assert same(dfa, build_dfa(nfas)) and dfa.n_states == 1 and dfa.accepts == (frozenset(),)


@pytest.mark.parametrize("name", ["json", "c", "python", "go"])
def test_union_is_build_dfa_on_builtin_grammars(name: str) -> None:
    grammar = Grammar.builtin(name)
    nfas = [terminal_nfa(t.pattern, t.flags, t.literal, t.name) for t in grammar.terminals]
    assert same(union_dfa(nfas), build_dfa(nfas))


def test_nfas_that_are_not_dfas_take_the_general_construction() -> None:
    nfas = [compile_regex(r"(a|ab)*c"), compile_regex(r"a+")]
    assert not deterministic(nfas[0])
    assert same(union_dfa(nfas), build_dfa(nfas))


def test_a_passed_deadline_stops_the_construction() -> None:
    deadline = Deadline(1e-9)
    time.sleep(0.001)
    with pytest.raises(CompileTimeoutError, match="subset construction"):
        union_dfa(nfas_of([("ab", "ab"), ("ac", "ac")]), deadline)


def test_successors_and_components_in_blocks_as_in_one_piece_and_checked():
    """Successor lists and components are made 4,096 states at a time (with a deadline check before each block):
    the same as from the whole table at once."""
    from grammask.automata.dfa import _successors, _tarjan, components, successors

    rng = np.random.default_rng(5)
    trans = rng.integers(-1, 10_000, size=(10_000, 7)).astype(np.int32)
    trans[:, 3:] = trans[:, :1]  # repeated targets: each is listed once
    indptr, targets = _successors(trans)
    assert successors(trans) == [targets[a:b].tolist() for a, b in pairwise(indptr)]
    assert (components(trans) == _tarjan(indptr.astype(np.int64), targets.astype(np.int64))).all()
    with pytest.raises(CompileTimeoutError, match="cycles"):
        successors(trans, Deadline(0.0, "g"))
