"""Python regexes to byte-level NFAs over the UTF-8 encoding of their language.

A terminal's regex (Python ``re`` syntax, as Lark writes it) is parsed by the standard
library's own parser into a small AST whose leaves are sets of Unicode scalar values, with
every flag (``i``, ``s``, ``a``, ``u``, ``x``, scoped or global) already applied. The AST is then
Thompson-constructed into a :class:`ByteNFA` over the 256 byte values, accepting exactly the
UTF-8 encodings of the strings the regex matches.

Character classes follow Python's semantics for ``str`` patterns: ``\\d \\w \\s`` are Unicode
classes unless the ``a`` flag is set, ``.`` is anything but ``\\n`` unless the ``s`` flag is set,
negated classes complement within all scalar values, and case-insensitive matching admits
exactly the characters Python's ``re`` admits (the tables come from running ``re`` itself).

A regex without lazy quantifiers or lookarounds is Thompson-constructed here: its language is
every string it matches whole. A regex with a lazy quantifier (``*?``, ``+?``, ``??``, ``{m,n}?``
with ``m < n``) or a lookaround gets Python's own matching semantics from
:mod:`grammask.automata.priority`: its lexemes are the strings ``re.match`` can return for it, and a
lookahead reaching past the lexeme's end becomes one byte of trailing context
(:attr:`ByteNFA.trailing`).

Anchors, backreferences, conditionals, atomic groups and possessive quantifiers have no
finite-automaton meaning here and raise :class:`UnsupportedRegexError`, as do the lookarounds
:mod:`grammask.automata.priority` cannot express exactly.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

from grammask.automata.utf8 import (
    EXIT,
    SCALARS,
    CodeRanges,
    complement,
    difference,
    normalize,
    ranges_of,
    scalars_only,
    union,
    utf8_trie,
)
from grammask.errors import UnsupportedRegexError

if sys.version_info >= (3, 11):
    from re import _constants as sre
    from re import _parser as sre_parse
else:  # pragma: no cover - Python 3.10
    import sre_constants as sre
    import sre_parse

_FLAG_LETTERS = {
    "i": re.IGNORECASE,
    "s": re.DOTALL,
    "m": re.MULTILINE,
    "x": re.VERBOSE,
    "u": re.UNICODE,
    "a": re.ASCII,
    "l": re.LOCALE,
}
_TYPE_FLAGS = re.ASCII | re.LOCALE | re.UNICODE

_ANCHORS = {
    sre.AT_BEGINNING: "'^'",
    sre.AT_BEGINNING_LINE: "'^'",
    sre.AT_BEGINNING_STRING: "'\\A'",
    sre.AT_END: "'$'",
    sre.AT_END_LINE: "'$'",
    sre.AT_END_STRING: "'\\Z'",
    sre.AT_BOUNDARY: "'\\b'",
    sre.AT_NON_BOUNDARY: "'\\B'",
}

_UNSUPPORTED_OPS = {
    sre.GROUPREF: "a backreference",
    sre.GROUPREF_EXISTS: "a conditional group (?(id)yes|no)",
}
for _op, _what in (("ATOMIC_GROUP", "an atomic group (?>...)"), ("POSSESSIVE_REPEAT", "a possessive quantifier")):
    if hasattr(sre, _op):
        _UNSUPPORTED_OPS[getattr(sre, _op)] = _what

# Each category as (the escape of its negated form, whether the category is the complement of
# that escape's matches): re scans long runs of negated-class characters fastest.
_CATEGORY_SCANS = {
    sre.CATEGORY_DIGIT: ("\\D", True),
    sre.CATEGORY_NOT_DIGIT: ("\\D", False),
    sre.CATEGORY_SPACE: ("\\S", True),
    sre.CATEGORY_NOT_SPACE: ("\\S", False),
    sre.CATEGORY_WORD: ("\\W", True),
    sre.CATEGORY_NOT_WORD: ("\\W", False),
}
_CATEGORY_ESCAPES = {
    sre.CATEGORY_DIGIT: "\\d",
    sre.CATEGORY_NOT_DIGIT: "\\D",
    sre.CATEGORY_SPACE: "\\s",
    sre.CATEGORY_NOT_SPACE: "\\S",
    sre.CATEGORY_WORD: "\\w",
    sre.CATEGORY_NOT_WORD: "\\W",
}


# --- AST -------------------------------------------------------------------------------------


def _cached_hash(node) -> int:
    """A node's hash, computed once: ASTs built by state elimination nest deeply and are hashed over and over."""
    found = node.__dict__.get("_hash")
    if found is None:
        found = hash((type(node).__name__, *(getattr(node, f) for f in node.__dataclass_fields__)))
        object.__setattr__(node, "_hash", found)
    return found


@dataclass(frozen=True)
class Chars:
    """One character from a set of Unicode scalar values (empty set: matches nothing)."""

    ranges: CodeRanges


@dataclass(frozen=True)
class Concat:
    """The parts in sequence (no parts: the empty string)."""

    parts: tuple[Node, ...]

    __hash__ = _cached_hash


@dataclass(frozen=True)
class Alt:
    """Any one of the options."""

    options: tuple[Node, ...]

    __hash__ = _cached_hash


@dataclass(frozen=True)
class Repeat:
    """``node`` repeated ``min`` to ``max`` times (``max=None``: unbounded); ``lazy`` marks ``*?`` and kin."""

    node: Node
    min: int
    max: int | None
    lazy: bool = False

    __hash__ = _cached_hash


@dataclass(frozen=True)
class Look:
    """A zero-width assertion: ``node`` matches right after (``ahead``) or right before this point,
    or (``negative``) does not."""

    node: Node
    ahead: bool
    negative: bool

    __hash__ = _cached_hash


Node = Chars | Concat | Alt | Repeat | Look


def parse_regex(pattern: str, flags: str = "", name: str = "<regex>") -> Node:
    """Parse a Python regex into the AST, with all flags applied to its character sets.

    ``flags`` holds inline flag letters (``imsxua``) applied to the whole pattern. ``name`` is the
    terminal the regex belongs to; it is named in every error. Raises
    :class:`UnsupportedRegexError` for a pattern ``re`` rejects or one using a feature that has
    no finite-automaton meaning.
    """
    flag_bits = 0
    for letter in flags:
        if letter not in _FLAG_LETTERS:
            raise UnsupportedRegexError(
                f"terminal {name}: unknown regex flag {letter!r} (expected some of 'imsxua')"
            )
        flag_bits |= _FLAG_LETTERS[letter]
    try:
        if "(?<" in pattern:  # only re's compiler checks that a lookbehind has a fixed width
            re.compile(pattern, flag_bits)
        parsed = sre_parse.parse(pattern, flag_bits)
    except (re.error, OverflowError, RecursionError) as e:
        raise UnsupportedRegexError(f"terminal {name}: invalid regex {pattern!r}: {e}") from None
    return _convert(parsed, parsed.state.flags, name, pattern)


def _convert(items, flags: int, name: str, pattern: str) -> Node:
    parts = [_convert_op(op, av, flags, name, pattern) for op, av in items]
    return parts[0] if len(parts) == 1 else Concat(tuple(parts))


def _convert_op(op, av, flags: int, name: str, pattern: str) -> Node:
    if op is sre.LITERAL or op is sre.NOT_LITERAL:
        return Chars(_char_set(op, av, _char_mode(flags)))
    if op is sre.IN:
        return Chars(_char_set(op, tuple(av), _char_mode(flags)))
    if op is sre.ANY:
        return Chars(SCALARS if flags & re.DOTALL else complement(((10, 10),)))
    if op is sre.BRANCH:
        return Alt(tuple(_convert(branch, flags, name, pattern) for branch in av[1]))
    if op is sre.SUBPATTERN:
        _, add_flags, del_flags, sub = av
        if add_flags & _TYPE_FLAGS:
            flags &= ~_TYPE_FLAGS
        return _convert(sub, (flags | add_flags) & ~del_flags, name, pattern)
    if op is sre.MAX_REPEAT or op is sre.MIN_REPEAT:
        lo, hi, sub = av
        hi = None if hi == sre.MAXREPEAT else hi
        return Repeat(_convert(sub, flags, name, pattern), lo, hi, lazy=op is sre.MIN_REPEAT and lo != hi)
    if op is sre.ASSERT or op is sre.ASSERT_NOT:
        direction, sub = av
        return Look(_convert(sub, flags, name, pattern), ahead=direction >= 0, negative=op is sre.ASSERT_NOT)
    raise UnsupportedRegexError(f"terminal {name}: regex {pattern!r} uses {_describe(op, av)}, {_WHY}")


_WHY = "which a finite automaton over the terminal's own text cannot express; rewrite the regex without it"


def _describe(op, av) -> str:
    if op is sre.AT:
        return f"the anchor {_ANCHORS.get(av, str(av))}"
    return _UNSUPPORTED_OPS.get(op, f"the construct {op}")


# --- character sets --------------------------------------------------------------------------

# (ignore case, ASCII) : the only flags that change which characters a single-character test admits.
_CharMode = tuple[bool, bool]


def char_set(op, av, flags: int) -> CodeRanges:
    """The scalar values one LITERAL / NOT_LITERAL / IN item of ``re``'s parse admits under ``flags``."""
    return _char_set(op, tuple(av) if op is sre.IN else av, _char_mode(flags))


def _char_mode(flags: int) -> _CharMode:
    return bool(flags & re.IGNORECASE), bool(flags & re.ASCII)


@lru_cache(maxsize=8192)
def _char_set(op, av, mode: _CharMode) -> CodeRanges:
    """The scalar values a LITERAL / NOT_LITERAL / IN test of ``re`` admits under ``mode``."""
    ignore_case, ascii_only = mode
    exact = exact_set(op, av, lambda category: _category(category, ascii_only))
    if not ignore_case:
        return exact
    # Case-insensitive tests in re depend on a character only through its simple lower/upper
    # case forms, so a character that has none (and is no other character's case form) is
    # admitted iff it is admitted case-sensitively. The few cased characters are asked of re.
    cased, cased_text = _cased(ascii_only)
    tester = re.compile(_test_pattern(op, av), re.IGNORECASE | (re.ASCII if ascii_only else 0))
    admitted = ranges_of(ord(c) for c in tester.findall(cased_text))
    return union(difference(exact, cased), admitted)


def exact_set(op, av, category: Callable[[object], CodeRanges]) -> CodeRanges:
    """The scalar values a LITERAL / NOT_LITERAL / IN item admits, case-sensitively; ``category``
    gives the values of a class escape such as ``\\d`` (dialects differ there)."""
    if op is sre.LITERAL:
        return scalars_only(((av, av),))
    if op is sre.NOT_LITERAL:
        return complement(((av, av),))
    negate = False
    parts: list[CodeRanges] = []
    for item_op, item_av in av:
        if item_op is sre.NEGATE:
            negate = True
        elif item_op is sre.LITERAL:
            parts.append(((item_av, item_av),))
        elif item_op is sre.RANGE:
            parts.append((item_av,))
        else:  # CATEGORY, the only other item the parser puts in a class
            parts.append(category(item_av))
    members = scalars_only(union(*parts))
    return complement(members) if negate else members


def _test_pattern(op, av) -> str:
    """A regex for the same single-character test, for asking ``re`` which characters it admits."""
    if op is sre.LITERAL:
        return _escape(av)
    if op is sre.NOT_LITERAL:
        return f"[^{_escape(av)}]"
    body = []
    for item_op, item_av in av:
        if item_op is sre.NEGATE:
            body.insert(0, "^")
        elif item_op is sre.LITERAL:
            body.append(_escape(item_av))
        elif item_op is sre.RANGE:
            body.append(f"{_escape(item_av[0])}-{_escape(item_av[1])}")
        else:  # CATEGORY
            body.append(_CATEGORY_ESCAPES[item_av])
    return f"[{''.join(body)}]"


def _escape(code_point: int) -> str:
    return f"\\U{code_point:08x}"


@cache
def _all_code_points() -> str:
    """Every code point U+0000..U+10FFFF (surrogates included) as one string, index = code point."""
    return np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


@cache
def _category(category, ascii_only: bool) -> CodeRanges:
    """The scalar values ``\\d \\w \\s`` (or their negations) admit, as ``re`` itself decides."""
    escape, complemented = _CATEGORY_SCANS[category]
    members = _matching_runs(escape, ascii_only)
    return complement(members) if complemented else scalars_only(members)


@cache
def _matching_runs(escape: str, ascii_only: bool) -> CodeRanges:
    runs = re.compile(escape + "+", re.ASCII if ascii_only else 0).finditer(_all_code_points())
    return tuple((m.start(), m.end() - 1) for m in runs)


@cache
def _cased(ascii_only: bool) -> tuple[CodeRanges, str]:
    """A superset of the characters whose case-insensitive matching differs from exact matching.

    Returned as ranges and as a string of those characters. In Unicode mode it is every
    256-code-point block holding a character with a case mapping, plus the blocks of those
    mappings' results.
    """
    if ascii_only:
        ranges: CodeRanges = ((ord("A"), ord("Z")), (ord("a"), ord("z")))
    else:
        text = _all_code_points()
        blocks: set[int] = set()
        for start in range(0, 0x110000, 256):
            block = text[start : start + 256]
            if block.lower() != block or block.upper() != block:
                blocks.add(start)
                for c in block:
                    blocks.update(ord(m) & ~0xFF for m in c.lower() + c.upper() + c.casefold())
        ranges = scalars_only(normalize((b, b + 255) for b in blocks))
    return ranges, "".join(chr(c) for lo, hi in ranges for c in range(lo, hi + 1))


# --- Thompson construction -------------------------------------------------------------------


@dataclass(frozen=True)
class ByteNFA:
    """An NFA over bytes with epsilon moves, one start and one final state.

    ``edges[s]`` lists ``(lo, hi, target)``: any byte in ``lo..hi`` moves from ``s`` to ``target``;
    ``eps[s]`` lists the states reached from ``s`` without reading. ``name`` is the terminal it
    came from. ``trailing`` is set when a lookahead reaches past the end of a lexeme: the
    lexeme is then a match only before some next bytes (see :class:`TrailingContext`).
    """

    edges: tuple[tuple[tuple[int, int, int], ...], ...]
    eps: tuple[tuple[int, ...], ...]
    start: int
    final: int
    name: str = "<regex>"
    trailing: TrailingContext | None = None

    @property
    def n_states(self) -> int:
        return len(self.edges)


@dataclass(frozen=True, eq=False)
class TrailingContext:
    """Which next byte lets a lexeme end, for a regex whose lookahead reaches past the lexeme.

    The NFA it belongs to is deterministic: its state ``s`` is this table's row ``s``, ``trans[s, b]``
    its successor on byte ``b`` (-1: none). For an accepting state, ``allowed[s, b]`` says whether
    the lexeme read is a match when byte ``b`` follows it, ``allowed[s, 256]`` whether it is one at
    the end of the input.
    """

    trans: np.ndarray
    allowed: np.ndarray


def nfa_from_ast(node: Node, name: str = "<regex>") -> ByteNFA:
    """Thompson-construct the byte NFA of an AST without lazy repeats or lookarounds: it accepts
    every string the regex matches whole. Raises TypeError on a lookaround."""
    builder = _Thompson(name)
    start = builder.new_state()
    end = builder.build(node, start)
    final = builder.new_state()
    builder.eps[end].append(final)
    return ByteNFA(
        edges=tuple(tuple(e) for e in builder.edges),
        eps=tuple(tuple(e) for e in builder.eps),
        start=start,
        final=final,
        name=name,
    )


def has_lookaround(node: Node) -> bool:
    """Whether the AST has a lookahead or a lookbehind."""
    return _any_node(node, lambda n: isinstance(n, Look))


def has_lazy(node: Node) -> bool:
    """Whether the AST has a lazy repeat."""
    return _any_node(node, lambda n: isinstance(n, Repeat) and n.lazy)


def needs_priorities(node: Node) -> bool:
    """Whether the AST has a lazy repeat or a lookaround (Python's match order then matters)."""
    return _any_node(node, lambda n: isinstance(n, Look) or (isinstance(n, Repeat) and n.lazy))


def _any_node(node: Node, test: Callable[[Node], bool]) -> bool:
    """Whether ``test`` holds for ``node`` or a node inside it (a lookaround's own body not included)."""
    if test(node):
        return True
    if isinstance(node, Repeat):
        return _any_node(node.node, test)
    if isinstance(node, Concat):
        return any(_any_node(p, test) for p in node.parts)
    if isinstance(node, Alt):
        return any(_any_node(o, test) for o in node.options)
    return False


MAX_UNROLLED_STATES = 4096
"""The most byte NFA states a counted repeat may unroll into: every state can become a lexer
state, and each reachable lexer state costs a walk of the whole vocabulary at compile time."""


class _Thompson:
    """Builds NFA fragments in place: ``build(node, src)`` adds a path for ``node`` from ``src``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.edges: list[list[tuple[int, int, int]]] = []
        self.eps: list[list[int]] = []

    def new_state(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def build(self, node: Node, src: int) -> int:
        """Add ``node`` starting at ``src``; return the state reached after it.

        The returned state may carry edges of ``node`` itself (a loop), but never edges that
        would leave ``node``'s language, so the caller may continue from it.
        """
        if isinstance(node, Chars):
            return self._chars(node.ranges, src)
        if isinstance(node, Concat):
            for part in node.parts:
                src = self.build(part, src)
            return src
        if isinstance(node, Alt):
            join = self.new_state()
            for option in node.options:
                self.eps[self.build(option, src)].append(join)
            return join
        if isinstance(node, Look):
            raise TypeError("a lookaround has no plain Thompson construction")
        return self._repeat(node, src)

    def _chars(self, ranges: CodeRanges, src: int) -> int:
        trie = utf8_trie(ranges)
        exit_state = self.new_state()
        ids = [src] + [self.new_state() for _ in trie[1:]]
        for node_id, node_edges in zip(ids, trie):
            self.edges[node_id].extend(
                (lo, hi, exit_state if target == EXIT else ids[target]) for lo, hi, target in node_edges
            )
        return exit_state

    def _repeat(self, node: Repeat, src: int) -> int:
        """Unroll a counted repeat; raises UnsupportedRegexError, before unrolling, where the copies
        would take more than :data:`MAX_UNROLLED_STATES` states."""
        copies = node.min + 1 if node.max is None else node.max
        if copies > 1:
            probe = _Thompson(self.name)
            probe.build(node.node, probe.new_state())
            if copies * len(probe.edges) > MAX_UNROLLED_STATES:
                bounds = f"{node.min}," if node.max is None else f"{node.min},{node.max}"
                raise UnsupportedRegexError(
                    f"terminal {self.name}: the counted repeat {{{bounds}}} would unroll into about "
                    f"{copies * len(probe.edges)} automaton states (at most {MAX_UNROLLED_STATES} are supported)"
                )
        for _ in range(node.min):
            src = self.build(node.node, src)
        if node.max is None:
            loop = self.new_state()
            self.eps[src].append(loop)
            self.eps[self.build(node.node, loop)].append(loop)
            return loop
        if node.max == node.min:
            return src
        join = self.new_state()
        for _ in range(node.max - node.min):
            self.eps[src].append(join)
            src = self.build(node.node, src)
        self.eps[src].append(join)
        return join
