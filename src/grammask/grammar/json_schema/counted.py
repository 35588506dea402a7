"""Counted string constraints: kept as a length bound beside the lexer state, or unrolled where they must be.

String lengths (``minLength``/``maxLength``) and ``{m,n}`` in patterns are kept as a bound on the
string's length beside a language without it (:class:`~grammask.grammar.ir.Count`; the lexer keeps
the count beside its state, :mod:`grammask.automata.counted`) wherever that language is *free*
(:func:`~grammask.grammar.json_schema.lengths.char_free`). Elsewhere they are unrolled, one copy of the repeated part per count, first in the
string automata of this package, then in the lexer's byte automaton, where every state costs a walk of
the vocabulary at compile time; a too big one is refused before it is. The estimate counts the byte NFA
states of the JSON lexeme (each character class weighs as many states as its JSON spellings take), so it
is comparable with the lexer's own bound, :data:`~grammask.automata.regex.MAX_UNROLLED_STATES`.
"""

from __future__ import annotations

from functools import lru_cache

from grammask.automata.patterns import compile_regex
from grammask.automata.regex import (
    MAX_UNROLLED_STATES,
    Alt,
    Chars,
    Concat,
    Node,
    Repeat,
)
from grammask.automata.utf8 import SCALARS, CodeRanges
from grammask.grammar.json_schema.strings import json_char_atom

__all__ = ["COUNT_ABOVE", "MAX_UNROLLED_STATES", "largest_repeat", "length_states"]

COUNT_ABOVE = 2048
"""A length bound or counted repeat that would unroll into more byte NFA states than this is counted beside the
lexer state where it can be (``SchemaOptions(count_lengths=True)``, the default); smaller ones are unrolled."""


def length_states(count: int) -> int:
    """The states a length bound of ``count`` characters (any characters) unrolls into."""
    return count * _char_states(SCALARS)


def largest_repeat(node: Node) -> tuple[Repeat | None, int]:
    """The counted repeat of ``node`` that unrolls into the most states, and that number (0 if none).

    A repeat with an upper bound unrolls into ``max`` copies of its body, one without into
    ``min + 1``; nested repeats multiply.
    """
    best: tuple[Repeat | None, int] = (None, 0)

    def size(n: Node) -> int:
        nonlocal best
        if isinstance(n, Chars):
            return _char_states(n.ranges)
        if isinstance(n, (Concat, Alt)):
            return sum(size(p) for p in (n.parts if isinstance(n, Concat) else n.options)) + 1
        body = size(n.node)
        copies = n.min + 1 if n.max is None else max(n.max, 1)
        if copies > 1 and copies * body > best[1]:
            best = (n, copies * body)
        return copies * body + 1

    size(node)
    return best


@lru_cache(maxsize=1024)
def _char_states(ranges: CodeRanges) -> int:
    """The byte NFA states of one character of ``ranges`` written in JSON (escapes included)."""
    return compile_regex(json_char_atom(ranges)).n_states if ranges else 1
