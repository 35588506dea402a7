"""Sets of JSON string values, and the lexeme regexes that spell them as JSON string literals.

A :class:`StringSet` is a regular set of decoded string values. Its lexeme regex admits every
JSON spelling of its members in the encodings JSON encoders produce: printable ASCII raw
(``"`` and ``\\`` as ``\\"`` and ``\\\\``, ``/`` raw or as ``\\/``), control characters as short
escapes or ``\\u`` escapes, other characters raw or ``\\u``-escaped (characters beyond the BMP as
surrogate pairs). A printable ASCII character written as a ``\\u`` escape is not admitted, so an
ASCII property name has exactly one spelling and can be a literal terminal. Lone surrogates
are admitted only by the set of all strings.
"""

from __future__ import annotations

import json
import re
from functools import cached_property, lru_cache

from grammask.automata.patterns import compile_regex, give_nfa
from grammask.automata.regex import Alt, ByteNFA, Chars, Node, Repeat
from grammask.automata.utf8 import SCALARS, CodeRanges, difference, normalize
from grammask.errors import NO_DEADLINE, Deadline, UnsupportedSchemaError
from grammask.grammar.ir import Count
from grammask.grammar.json_schema.automaton import (
    CharDFA,
    dfa_from_ast,
    dfa_to_ast,
    is_subset,
    product,
    raw_product,
)
from grammask.grammar.json_schema.digits import (
    fixed_width_ranges,
    hex_digit,
    render_sequences,
)
from grammask.grammar.json_schema.lengths import UNROLL_ABOVE, char_free, has_length
from grammask.grammar.regex_frontend import NOTHING, concat, render_ranges, render_regex

_RAW = difference(normalize([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)]), ((0xD800, 0xDFFF),))
_SHORT_ESCAPES = {0x22: '\\\\"', 0x5C: "\\\\\\\\", 0x2F: "\\\\/", 0x08: "\\\\b", 0x0C: "\\\\f", 0x0A: "\\\\n", 0x0D: "\\\\r", 0x09: "\\\\t"}
_U_ESCAPED: CodeRanges = ((0x00, 0x1F), (0x7F, 0xFFFF))


def _intersect_ranges(a: CodeRanges, b: CodeRanges) -> CodeRanges:
    return difference(a, difference(a, b))


def _hex4(ranges: CodeRanges) -> str:
    seqs = [s for lo, hi in ranges for s in fixed_width_ranges(lo, hi, 4, 16)]
    return render_sequences(seqs, hex_digit)


def _group(text: str) -> str:
    return f"(?:{text})" if "|" in text else text


def json_char_atom(ranges: CodeRanges) -> str:
    """A regex atom for the JSON spellings of one character from ``ranges`` (scalar values)."""
    parts = []
    raw = _intersect_ranges(ranges, _RAW)
    if raw:
        parts.append(render_ranges(raw))
    parts += [esc for c, esc in _SHORT_ESCAPES.items() if _intersect_ranges(ranges, ((c, c),))]
    escaped = difference(_intersect_ranges(ranges, _U_ESCAPED), ((0xD800, 0xDFFF),))
    if escaped:
        parts.append("\\\\u" + _group(_hex4(escaped)))
    for lo, hi in _intersect_ranges(ranges, ((0x10000, 0x10FFFF),)):
        parts += _surrogate_pairs(lo, hi)
    return parts[0] if len(parts) == 1 and "|" not in parts[0] else "(?:" + "|".join(parts) + ")"


@lru_cache(maxsize=4096)
def _atom(ranges: CodeRanges) -> str:
    return json_char_atom(ranges)


@lru_cache(maxsize=4096)
def _atom_nfa(ranges: CodeRanges) -> ByteNFA:
    return compile_regex(_atom(ranges))


def spelled_nfa(dfa: CharDFA, most: int) -> ByteNFA | None:
    """A byte NFA of the JSON string literals (quotes included) of ``dfa``'s strings: each of its edges spelled as
    :func:`json_char_atom` spells the edge's characters, so the language of the pattern :meth:`StringSet.lexeme`
    renders from an AST of the same strings, without parsing that pattern. None where the edges' spellings are
    longer than ``most`` characters in all (a pattern's NFA is about as big as its text, and the AST, shorter
    than the automaton where it shares parts, longer where state elimination repeats them)."""
    by_state: list[dict[int, CodeRanges]] = []
    for row in dfa.rows:
        by_target: dict[int, list[tuple[int, int]]] = {}
        for lo, hi, t in row:
            by_target.setdefault(t, []).append((lo, hi))
        by_state.append({t: normalize(ranges) for t, ranges in by_target.items()})
    if sum(len(_atom(ranges)) for out in by_state for ranges in out.values()) > most:
        return None
    edges: list[list[tuple[int, int, int]]] = [[(0x22, 0x22, 1)]]
    eps: list[list[int]] = [[]]
    edges += [[] for _ in range(dfa.n_states + 1)]
    eps += [[] for _ in range(dfa.n_states + 1)]
    final = dfa.n_states + 1
    for s, out in enumerate(by_state):
        if s in dfa.accepting:
            edges[s + 1].append((0x22, 0x22, final))
        for t, ranges in out.items():
            atom = _atom_nfa(ranges)
            base = len(edges)
            edges += [[(lo, hi, u + base) for lo, hi, u in state] for state in atom.edges]
            eps += [[u + base for u in state] for state in atom.eps]
            eps[s + 1].append(atom.start + base)
            eps[atom.final + base].append(t + 1)
    return ByteNFA(tuple(map(tuple, edges)), tuple(map(tuple, eps)), 0, final)


def _surrogate_pairs(lo: int, hi: int) -> list[str]:
    (hi_a, lo_a), (hi_b, lo_b) = divmod(lo - 0x10000, 0x400), divmod(hi - 0x10000, 0x400)
    blocks = []
    if hi_a == hi_b:
        blocks.append((hi_a, hi_a, lo_a, lo_b))
    else:
        blocks.append((hi_a, hi_a, lo_a, 0x3FF))
        if hi_a + 1 <= hi_b - 1:
            blocks.append((hi_a + 1, hi_b - 1, 0, 0x3FF))
        blocks.append((hi_b, hi_b, 0, lo_b))
    return [
        "\\\\u" + _group(_hex4(((0xD800 + h1, 0xD800 + h2),))) + "\\\\u" + _group(_hex4(((0xDC00 + l1, 0xDC00 + l2),)))
        for h1, h2, l1, l2 in blocks
    ]


ANY_STRING_PATTERN = '"(?:[^"\\\\\\x00-\\x1f]|\\\\["\\\\/bfnrt]|\\\\u' + _group(_hex4(_U_ESCAPED)) + ')*"'


class StringSet:
    """A regular set of string values: all strings, one literal string, or a regex AST's language, possibly cut
    to the strings of ``bounds`` (lo, hi: None for no upper bound) characters.

    Build with :meth:`everything`, :meth:`literal`, :meth:`regular` or :meth:`length`; combine with
    :meth:`intersect`, :meth:`minus`; compare with :meth:`is_subset`. A set with ``bounds`` keeps them apart
    from its (then *free*, :func:`~grammask.grammar.json_schema.lengths.char_free`) language, and its terminal
    counts the length beside the lexer state (:meth:`count`); a bound on a language that is not free is unrolled
    into it where that stays small, else :class:`~grammask.errors.UnsupportedSchemaError` is raised. Equal sets
    built alike have equal :attr:`key`.
    """

    def __init__(self, kind: str, text: str | None = None, node: Node | None = None, dfa: CharDFA | None = None,
                 bounds: tuple[int, int | None] | None = None):
        self.kind = kind
        self.text = text
        self._node = node
        self.bounds = bounds
        if dfa is not None:
            self.__dict__["dfa"] = dfa

    @classmethod
    def everything(cls) -> StringSet:
        return cls("all")

    @classmethod
    def literal(cls, text: str) -> StringSet:
        return cls("literal", text=text)

    @classmethod
    def regular(cls, node: Node, dfa: CharDFA | None = None) -> StringSet:
        """The language of ``node`` (whose minimal automaton ``dfa`` is, where given), normalized to a literal or the
        empty set where it is one."""
        return cls._from_dfa(dfa_from_ast(node) if dfa is None else dfa, node)

    @classmethod
    def _from_dfa(cls, dfa: CharDFA, node: Node | None = None) -> StringSet:
        if dfa.is_empty():
            return cls("empty")
        single = dfa.single_string
        if single is not None:
            return cls.literal(single)
        return cls("regular", node=node, dfa=dfa)

    @classmethod
    def length(cls, min_length: int, max_length: int | None, count: bool = False) -> StringSet:
        """The strings of ``min_length`` to ``max_length`` characters (None: no upper bound): with ``count``, a bound
        counted beside the lexer state (:meth:`cut`), else unrolled into the language."""
        if count:
            return cls.everything().cut(min_length, max_length)
        if min_length == 0 and max_length is None:
            return cls.everything()
        return cls.regular(Repeat(Chars(SCALARS), min_length, max_length))

    def cut(self, lo: int, hi: int | None, deadline: Deadline = NO_DEADLINE) -> StringSet:
        """The members of ``lo`` to ``hi`` characters (None: no upper bound).

        Raises :class:`~grammask.errors.UnsupportedSchemaError` where the bound can be neither counted (the
        language is not free) nor unrolled (:data:`~grammask.grammar.json_schema.lengths.UNROLL_ABOVE`), and
        :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed.
        """
        if self.bounds is not None:
            lo, hi = max(lo, self.bounds[0]), _min_hi(hi, self.bounds[1])
        if hi is not None and hi < lo:
            return StringSet("empty")
        if self.kind == "empty":
            return self
        if self.kind == "literal":
            return self if lo <= len(self.text) and (hi is None or len(self.text) <= hi) else StringSet("empty")
        base = self.relaxed()
        if base.kind == "regular" and not has_length(base.dfa, lo, hi, deadline):
            return StringSet("empty")
        if (lo, hi) == (0, None) or (base.kind == "regular" and _within(base.dfa, lo, hi, deadline)):
            return base
        if base.kind == "all" or char_free(base.dfa):
            return StringSet(base.kind, node=base._node, dfa=base.__dict__.get("dfa"), bounds=(lo, hi))
        states = base.dfa.n_states * ((lo if hi is None else hi) + 1)
        if states > UNROLL_ABOVE:
            raise UnsupportedSchemaError(
                f"a length bound of {lo}..{'' if hi is None else hi} characters on a string language whose length "
                f"cannot be counted beside the lexer state (a format or pattern with a fixed structure) would unroll "
                f"into about {states} automaton states (at most {UNROLL_ABOVE} are supported)"
            )
        return base.intersect(StringSet.regular(Repeat(Chars(SCALARS), lo, hi)), deadline)

    def relaxed(self) -> StringSet:
        """The set without its length bound."""
        if self.bounds is None:
            return self
        return StringSet(self.kind, node=self._node, dfa=self.__dict__.get("dfa"))

    def count(self) -> Count | None:
        """The bound its terminal counts beside the lexer state, or None."""
        return None if self.bounds is None else Count(*self.bounds, unit="json")

    def is_empty(self) -> bool:
        return self.kind == "empty"

    @property
    def node(self) -> Node:
        """The language's AST (without the length bound of a counted set)."""
        if self.kind == "all":
            return Repeat(Chars(SCALARS), 0, None)
        if self.kind == "literal":
            return concat(*(Chars(((ord(c), ord(c)),)) for c in self.text))
        if self.kind == "empty":
            return NOTHING
        if self._node is None:
            self._node = dfa_to_ast(self.dfa)
        return self._node

    @cached_property
    def dfa(self) -> CharDFA:
        """The language's automaton (without the length bound of a counted set)."""
        return dfa_from_ast(self.node)

    @cached_property
    def key(self) -> tuple:
        if self.kind in ("all", "empty"):
            base = (self.kind,)
        elif self.kind == "literal":
            base = ("literal", self.text)
        else:
            base = ("regular", self.dfa.key)
        if self.bounds is None:
            return base
        lo, hi = self.bounds
        return (*base, "length", lo, -1 if hi is None else hi)  # keys are sorted: no None in them

    def contains(self, text: str) -> bool:
        if self.bounds is not None and not _in_bounds(len(text), self.bounds):
            return False
        if self.kind in ("all", "empty"):
            return self.kind == "all"
        if self.kind == "literal":
            return text == self.text
        return self.dfa.accepts(text)

    def is_everything(self) -> bool:
        """Whether the set holds every string."""
        return self.kind == "all" and self.bounds is None

    def intersect(self, other: StringSet, deadline: Deadline = NO_DEADLINE) -> StringSet:
        """The members of both (UnsupportedSchemaError as :meth:`cut`; CompileTimeoutError once ``deadline`` has
        passed)."""
        if self.is_everything() or other.kind == "empty":
            return other
        if other.is_everything() or self.kind == "empty":
            return self
        if self.kind == "literal":
            return self if other.contains(self.text) else StringSet("empty")
        if other.kind == "literal":
            return other if self.contains(other.text) else StringSet("empty")
        a, b = self.relaxed(), other.relaxed()
        if a.kind == "all":
            both = b
        elif b.kind == "all":
            both = a
        else:
            both = StringSet._from_dfa(product(a.dfa, b.dfa, "and", deadline))
        lo, hi = _meet(self.bounds, other.bounds)
        return both.cut(lo, hi, deadline)

    def minus(self, other: StringSet, deadline: Deadline = NO_DEADLINE) -> StringSet:
        """The members not in ``other`` (strings with lone surrogates are dropped from a complement; raises
        UnsupportedSchemaError as :meth:`cut` where a length bound would have to be unrolled too far, and
        CompileTimeoutError once ``deadline`` has passed)."""
        if other.is_everything() or self.kind == "empty":
            return StringSet("empty")
        if other.kind == "empty":
            return self
        if self.kind == "literal":
            return StringSet("empty") if other.contains(self.text) else self
        if other.bounds is not None:
            outside = _outside(self.bounds or (0, None), other.bounds)
            if self.relaxed().is_subset(other.relaxed(), deadline) and len(outside) <= 1:
                return self.relaxed().cut(*outside[0], deadline) if outside else StringSet("empty")
            lo, hi = other.bounds
            other = other.relaxed().intersect(_unrolled_length(lo, hi, other.relaxed().dfa.n_states), deadline)
        if self.kind == "all":
            base = StringSet._from_dfa(product(self.relaxed().dfa, other.dfa, "minus", deadline))
        else:
            base = StringSet._from_dfa(product(self.dfa, other.dfa, "minus", deadline))
        return base if self.bounds is None else base.cut(*self.bounds, deadline)

    def is_subset(self, other: StringSet, deadline: Deadline = NO_DEADLINE) -> bool:
        """Whether every member is in ``other`` (CompileTimeoutError once ``deadline`` has passed)."""
        if self.kind == "empty" or other.is_everything():
            return True
        if self.kind == "all" and self.bounds is None:
            return False
        if self.kind == "literal":
            return other.contains(self.text)
        if other.kind in ("literal", "empty"):
            return False
        if self.bounds is None and other.bounds is None:
            return is_subset(self.dfa, other.dfa, deadline)
        mine = self.bounds or (0, None)
        if has_length(raw_product(self.dfa, other.dfa, "minus", deadline), *mine, deadline):
            return False
        if other.bounds is None:
            return True
        both = raw_product(self.dfa, other.dfa, "and", deadline)
        return not any(has_length(both, lo, hi, deadline) for lo, hi in _outside(mine, other.bounds))

    def overlaps(self, other: StringSet) -> bool:
        return not self.intersect(other).is_empty()

    def lexeme(self, deadline: Deadline = NO_DEADLINE) -> tuple[str, str | None]:
        """The JSON-literal regex of the set and, when the set has one spelling only, that spelling (without the
        length bound of a counted set: see :meth:`count`).

        Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed while the
        set's automaton is turned into a regex or that regex into text.
        """
        if self.kind == "all":
            return (ANY_STRING_PATTERN, None) if self.bounds is None else (COUNTED_STRING_PATTERN, None)
        if self.kind == "literal" and all(0x20 <= ord(c) <= 0x7E and c != "/" for c in self.text):
            spelled = json.dumps(self.text)
            return re.escape(spelled), spelled
        if self.kind == "regular" and self._node is None:
            self._node = dfa_to_ast(self.dfa, deadline)
        node = self.node
        body = render_regex(node, _atom, deadline)
        pattern = '"' + (f"(?:{body})" if isinstance(node, Alt) else body) + '"'
        dfa = self.dfa
        if not dfa.is_empty():
            give_nfa(pattern, "", lambda: spelled_nfa(dfa, len(pattern)))
        return pattern, None

    def describe(self) -> str:
        if self.kind == "literal":
            return json.dumps(self.text)
        if self.bounds is not None:
            lo, hi = self.bounds
            return f"{self.kind} of {lo}..{'' if hi is None else hi} characters"
        return self.kind


COUNTED_STRING_PATTERN = '"' + json_char_atom(SCALARS) + '*"'
"""Any string whose characters are counted: surrogates only in pairs, so that every character is one unit."""


def _in_bounds(n: int, bounds: tuple[int, int | None]) -> bool:
    return bounds[0] <= n and (bounds[1] is None or n <= bounds[1])


def _min_hi(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _meet(a: tuple[int, int | None] | None, b: tuple[int, int | None] | None) -> tuple[int, int | None]:
    a, b = a or (0, None), b or (0, None)
    return max(a[0], b[0]), _min_hi(a[1], b[1])


def _outside(mine: tuple[int, int | None], theirs: tuple[int, int | None]) -> list[tuple[int, int | None]]:
    """The parts of length range ``mine`` outside ``theirs`` (0 to 2 ranges)."""
    lo, hi = mine
    out = []
    if theirs[0] > lo:
        out.append((lo, theirs[0] - 1 if hi is None else min(hi, theirs[0] - 1)))
    if theirs[1] is not None and (hi is None or hi > theirs[1]):
        out.append((max(lo, theirs[1] + 1), hi))
    return [(a, b) for a, b in out if b is None or a <= b]


def _within(dfa: CharDFA, lo: int, hi: int | None, deadline: Deadline) -> bool:
    """Whether every string of the language has ``lo`` to ``hi`` characters."""
    if lo > 0 and has_length(dfa, 0, lo - 1, deadline):
        return False
    return hi is None or not has_length(dfa, hi + 1, None, deadline)


def _unrolled_length(lo: int, hi: int | None, states: int) -> StringSet:
    """The strings of ``lo`` to ``hi`` characters as a plain regular set, to be combined with a language of
    ``states`` states (UnsupportedSchemaError past :data:`~grammask.grammar.json_schema.lengths.UNROLL_ABOVE`)."""
    size = states * ((lo if hi is None else hi) + 1)
    if size > UNROLL_ABOVE:
        raise UnsupportedSchemaError(
            f"the complement of a length bound of {lo}..{'' if hi is None else hi} characters would unroll into about "
            f"{size} automaton states (at most {UNROLL_ABOVE} are supported)"
        )
    return StringSet.regular(Repeat(Chars(SCALARS), lo, hi))
