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
from functools import cached_property

from grammask.automata.regex import Alt, Chars, Node, Repeat
from grammask.automata.utf8 import SCALARS, CodeRanges, difference, normalize
from grammask.errors import NO_DEADLINE, Deadline
from grammask.grammar.json_schema.automaton import (
    CharDFA,
    dfa_from_ast,
    dfa_to_ast,
    is_subset,
    product,
)
from grammask.grammar.json_schema.digits import (
    fixed_width_ranges,
    hex_digit,
    render_sequences,
)
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
    """A regular set of string values: all strings, one literal string, or a regex AST's language.

    Build with :meth:`everything`, :meth:`literal` or :meth:`regular`; combine with
    :meth:`intersect`, :meth:`minus`; compare with :meth:`is_subset`. Equal sets have equal
    :attr:`key`.
    """

    def __init__(self, kind: str, text: str | None = None, node: Node | None = None, dfa: CharDFA | None = None):
        self.kind = kind
        self.text = text
        self._node = node
        if dfa is not None:
            self.__dict__["dfa"] = dfa

    @classmethod
    def everything(cls) -> StringSet:
        return cls("all")

    @classmethod
    def literal(cls, text: str) -> StringSet:
        return cls("literal", text=text)

    @classmethod
    def regular(cls, node: Node) -> StringSet:
        """The language of ``node``, normalized to a literal or the empty set where it is one."""
        dfa = dfa_from_ast(node)
        return cls._from_dfa(dfa, node)

    @classmethod
    def _from_dfa(cls, dfa: CharDFA, node: Node | None = None) -> StringSet:
        if dfa.is_empty():
            return cls("empty")
        single = dfa.single_string
        if single is not None:
            return cls.literal(single)
        return cls("regular", node=node, dfa=dfa)

    @classmethod
    def length(cls, min_length: int, max_length: int | None) -> StringSet:
        if min_length == 0 and max_length is None:
            return cls.everything()
        return cls.regular(Repeat(Chars(SCALARS), min_length, max_length))

    def is_empty(self) -> bool:
        return self.kind == "empty"

    @property
    def node(self) -> Node:
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
        return dfa_from_ast(self.node)

    @cached_property
    def key(self) -> tuple:
        if self.kind in ("all", "empty"):
            return (self.kind,)
        if self.kind == "literal":
            return ("literal", self.text)
        return ("regular", self.dfa.key)

    def contains(self, text: str) -> bool:
        if self.kind in ("all", "empty"):
            return self.kind == "all"
        if self.kind == "literal":
            return text == self.text
        return self.dfa.accepts(text)

    def intersect(self, other: StringSet) -> StringSet:
        if self.kind == "all" or other.kind == "empty":
            return other
        if other.kind == "all" or self.kind == "empty":
            return self
        if self.kind == "literal":
            return self if other.contains(self.text) else StringSet("empty")
        if other.kind == "literal":
            return other if self.contains(other.text) else StringSet("empty")
        return StringSet._from_dfa(product(self.dfa, other.dfa, "and"))

    def minus(self, other: StringSet) -> StringSet:
        """The members not in ``other`` (strings with lone surrogates are dropped from a complement)."""
        if other.kind == "all" or self.kind == "empty":
            return StringSet("empty")
        if other.kind == "empty":
            return self
        if self.kind == "literal":
            return StringSet("empty") if other.contains(self.text) else self
        return StringSet._from_dfa(product(self.dfa, other.dfa, "minus"))

    def is_subset(self, other: StringSet) -> bool:
        if self.kind == "empty" or other.kind == "all":
            return True
        if self.kind == "all":
            return False
        if self.kind == "literal":
            return other.contains(self.text)
        if other.kind in ("literal", "empty"):
            return False
        return is_subset(self.dfa, other.dfa)

    def overlaps(self, other: StringSet) -> bool:
        return not self.intersect(other).is_empty()

    def lexeme(self, deadline: Deadline = NO_DEADLINE) -> tuple[str, str | None]:
        """The JSON-literal regex of the set and, when the set has one spelling only, that spelling.

        Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed while the
        set's automaton is turned into a regex.
        """
        if self.kind == "all":
            return ANY_STRING_PATTERN, None
        if self.kind == "literal" and all(0x20 <= ord(c) <= 0x7E and c != "/" for c in self.text):
            spelled = json.dumps(self.text)
            return re.escape(spelled), spelled
        if self.kind == "regular" and self._node is None:
            self._node = dfa_to_ast(self.dfa, deadline)
        node = self.node
        body = render_regex(node, json_char_atom)
        return '"' + (f"(?:{body})" if isinstance(node, Alt) else body) + '"', None

    def describe(self) -> str:
        if self.kind == "literal":
            return json.dumps(self.text)
        return self.kind

