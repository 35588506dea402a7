"""A terminal's regex to automata: the plain Thompson construction (:mod:`.regex`), or for lazy
quantifiers and lookarounds the priority construction (:mod:`.priority`), which builds on it; and the
small NFAs a lexer is built from, remembered per pattern (grammars compiled one after another share
most of their terminals: strings, numbers, whitespace)."""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from grammask.automata.dfa import ByteDFA, build_dfa
from grammask.automata.priority import prioritized_nfa
from grammask.automata.regex import ByteNFA, needs_priorities, nfa_from_ast, parse_regex

if TYPE_CHECKING:
    from grammask.errors import Deadline


def compile_regex(pattern: str, flags: str = "", name: str = "<regex>") -> ByteNFA:
    """The byte NFA of a Python regex (see :func:`parse_regex` for ``flags``, ``name`` and errors).

    A regex with a lazy quantifier or a lookaround goes through
    :func:`grammask.automata.priority.prioritized_nfa`, which raises
    :class:`UnsupportedRegexError` for the lookarounds it cannot express exactly.
    """
    node = parse_regex(pattern, flags, name)
    if not needs_priorities(node):
        return nfa_from_ast(node, name)
    return prioritized_nfa(node, name, pattern)


def regex_to_dfa(pattern: str, flags: str = "", name: str = "<regex>") -> ByteDFA:
    """The minimal byte DFA of one Python regex (tag 0); errors as in :func:`grammask.automata.regex.parse_regex`."""
    return build_dfa([compile_regex(pattern, flags, name)])


_REMEMBERED = 4096
_compact: OrderedDict[tuple[str, str], ByteNFA] = OrderedDict()
_given: OrderedDict[tuple[str, str], Callable[[], ByteNFA]] = OrderedDict()
_compact_lock = threading.Lock()


def give_nfa(pattern: str, flags: str, build: Callable[[], ByteNFA | None]) -> None:
    """Let :func:`terminal_nfa` take the NFA of ``pattern`` from ``build()`` instead of parsing it, once, if it is
    asked within the next 4,096 patterns given: for a front end that renders a pattern from an automaton it holds.
    ``build()`` returns an NFA of exactly the pattern's language (no trailing context), or None to parse it."""
    with _compact_lock:
        _given[(pattern, flags)] = build
        _given.move_to_end((pattern, flags))
        while len(_given) > _REMEMBERED:
            _given.popitem(last=False)


def terminal_nfa(pattern: str, flags: str = "", literal: str | None = None, name: str = "<regex>",
                 deadline: Deadline | None = None) -> ByteNFA:
    """An NFA of the terminal's language with as few states as its minimal DFA (the DFA, plus one final state):
    a lexer's subset construction then handles small sets. A ``literal`` whose pattern is the escaped literal
    (no flags) is the chain of its bytes. The last 4,096 patterns are remembered. Errors as in
    :func:`compile_regex`; :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` (None: no limit) has
    passed."""
    if literal is not None and not flags and pattern == re.escape(literal):
        data = literal.encode()
        edges = tuple(((b, b, i + 1),) for i, b in enumerate(data)) + ((),)
        return ByteNFA(edges, ((),) * len(edges), 0, len(data), name)
    key = (pattern, flags)
    with _compact_lock:
        found = _compact.get(key)
        if found is not None:
            _compact.move_to_end(key)
    if found is None:
        with _compact_lock:
            given = _given.pop(key, None)
        nfa = None if given is None else given()
        if nfa is None:
            nfa = compile_regex(pattern, flags, name)
        found = _dfa_as_nfa(build_dfa([nfa], deadline), nfa)
        with _compact_lock:
            _compact[key] = found
            while len(_compact) > _REMEMBERED:
                _compact.popitem(last=False)
    return dataclasses.replace(found, name=name)


def _dfa_as_nfa(dfa: ByteDFA, nfa: ByteNFA) -> ByteNFA:
    """``dfa`` as an NFA: its states and byte ranges, epsilon moves from accepting states to one final state
    (``nfa``'s trailing context kept)."""
    final = dfa.n_states
    edges = []
    for row in dfa.trans:
        cuts = np.flatnonzero(np.diff(row)) + 1
        starts = np.concatenate([[0], cuts]).tolist()
        ends = np.concatenate([cuts - 1, [255]]).tolist()
        edges.append(tuple((lo, hi, int(row[lo])) for lo, hi in zip(starts, ends, strict=True) if row[lo] >= 0))
    eps = tuple((final,) if tags else () for tags in dfa.accepts)
    return ByteNFA((*edges, ()), (*eps, ()), 0, final, nfa.name, nfa.trailing)
