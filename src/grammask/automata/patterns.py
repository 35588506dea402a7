"""A terminal's regex to automata: the plain Thompson construction (:mod:`.regex`), or for lazy
quantifiers and lookarounds the priority construction (:mod:`.priority`), which builds on it."""

from __future__ import annotations

from grammask.automata.dfa import ByteDFA, build_dfa
from grammask.automata.priority import prioritized_nfa
from grammask.automata.regex import ByteNFA, needs_priorities, nfa_from_ast, parse_regex


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
