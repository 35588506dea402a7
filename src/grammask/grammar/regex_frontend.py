"""Regular expressions to the grammar IR: whole-match regexes as one-terminal grammars.

Also the shared regex layer of the front ends: :func:`parse_pattern` reads a pattern in Python
``re`` syntax with either Python's or ECMA-262's meaning of ``\\d \\w \\s .`` (JSON Schema uses
ECMA-262) into the AST of :mod:`grammask.automata.regex`, with anchors at the edges of the
pattern resolved for whole-match or search semantics; :func:`render_regex` writes an AST back
as Python regex text, with every character set spelled out.
"""

from __future__ import annotations

import re
import sys

from grammask.automata import regex as engine_regex
from grammask.automata.counted import free_pattern
from grammask.automata.regex import Alt, Chars, Concat, Node, Repeat
from grammask.automata.utf8 import (
    SCALARS,
    CodeRanges,
    complement,
    normalize,
    union,
)
from grammask.errors import (
    NO_DEADLINE,
    ConfigurationError,
    Deadline,
    EmptyLanguageError,
    UnsupportedRegexError,
)
from grammask.grammar.ir import Count, Grammar, Rule, Terminal, require_text

if sys.version_info >= (3, 11):
    from re import _constants as sre
    from re import _parser as sre_parse
else:  # pragma: no cover - Python 3.10
    import sre_constants as sre
    import sre_parse

EPSILON: Node = Concat(())
NOTHING: Node = Chars(())
ANY_STRING: Node = Repeat(Chars(SCALARS), 0, None)

_ECMA_SPACE = normalize(
    [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029)]
    + [(0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
)
_ECMA_CATEGORIES: dict[object, tuple[CodeRanges, bool]] = {
    sre.CATEGORY_DIGIT: (((0x30, 0x39),), False),
    sre.CATEGORY_NOT_DIGIT: (((0x30, 0x39),), True),
    sre.CATEGORY_WORD: (normalize([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]), False),
    sre.CATEGORY_NOT_WORD: (normalize([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]), True),
    sre.CATEGORY_SPACE: (_ECMA_SPACE, False),
    sre.CATEGORY_NOT_SPACE: (_ECMA_SPACE, True),
}
_ECMA_LINE_TERMINATORS: CodeRanges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_STARTS = (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING)
_ENDS = (sre.AT_END, sre.AT_END_STRING)

# Anchoring of one alternative of a pattern: (anchored at the start, anchored at the end).
_Edges = tuple[bool, bool]


def parse_pattern(pattern: str, *, dialect: str = "python", search: bool = False) -> Node:
    """The language of ``pattern`` as an AST over Unicode scalar values.

    ``dialect="python"`` gives ``\\d \\w \\s .`` and flags their Python ``re`` meaning;
    ``dialect="ecma"`` gives them ECMA-262's (ASCII ``\\d \\w``, ECMA white space, ``.`` excludes
    line terminators) and rejects inline flags. With ``search=False`` the language is the set of
    strings the whole pattern matches (``re.fullmatch``); with ``search=True`` it is the set of
    strings containing a match (JSON Schema's ``pattern``), where ``^`` and ``$`` pin a match to
    the start or end. Anchors are accepted only at the start or end of the pattern or of its
    alternatives; other anchors, word boundaries, lookarounds, backreferences and other
    constructs without a regular meaning raise :class:`UnsupportedRegexError`, as does text that is not a
    valid regex; an unknown ``dialect`` raises :class:`~grammask.errors.ConfigurationError`.
    """
    if dialect not in ("python", "ecma"):
        raise ConfigurationError(f"unknown regex dialect {dialect!r}; use 'python' or 'ecma'")
    try:
        parsed = sre_parse.parse(pattern, 0)
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as e:
        raise UnsupportedRegexError(f"invalid regex {pattern!r}: {e}") from None
    flags = parsed.state.flags
    if dialect == "ecma" and flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL | re.VERBOSE | re.ASCII):
        raise UnsupportedRegexError(f"regex {pattern!r}: inline flags are not ECMA-262 syntax")
    converter = _Converter(pattern, dialect)
    pieces = converter.sequence(list(parsed), flags)
    if search:
        padded = [
            concat(*([] if start else [ANY_STRING]), node, *([] if end else [ANY_STRING]))
            for (start, end), node in pieces.items()
        ]
        return alt(*padded)
    return alt(*pieces.values())


class _Converter:
    def __init__(self, pattern: str, dialect: str):
        self.pattern = pattern
        self.dialect = dialect

    def fail(self, what: str) -> UnsupportedRegexError:
        return UnsupportedRegexError(
            f"regex {self.pattern!r} uses {what}, which has no finite-automaton meaning here; rewrite it without"
        )

    def sequence(self, items: list, flags: int) -> dict[_Edges, Node]:
        """The alternatives of a sequence of sre items, keyed by how each is anchored."""
        if not items:
            return {(False, False): EPSILON}
        parts = [self.item(op, av, flags) for op, av in items]
        if len(parts) == 1:
            return parts[0]
        first, last, middle = parts[0], parts[-1], parts[1:-1]
        if any(end for _, end in first) or any(start for start, _ in last):
            raise self.fail("an anchor in the middle of the pattern")
        if any(edges != (False, False) for part in middle for edges in part):
            raise self.fail("an anchor in the middle of the pattern")
        inner = [part[(False, False)] for part in middle]
        out: dict[_Edges, Node] = {}
        for (start, _), head in first.items():
            for (_, end), tail in last.items():
                node = concat(head, *inner, tail)
                out[(start, end)] = alt(out[(start, end)], node) if (start, end) in out else node
        return out

    def item(self, op, av, flags: int) -> dict[_Edges, Node]:
        if op is sre.AT:
            if flags & re.MULTILINE and av in (sre.AT_BEGINNING, sre.AT_END):
                raise self.fail("a line anchor under the MULTILINE flag")
            if av in _STARTS:
                return {(True, False): EPSILON}
            if av in _ENDS:
                return {(False, True): EPSILON}
            raise self.fail("a word boundary")
        if op is sre.BRANCH:
            out: dict[_Edges, Node] = {}
            for branch in av[1]:
                for edges, node in self.sequence(list(branch), flags).items():
                    out[edges] = alt(out[edges], node) if edges in out else node
            return out
        if op is sre.SUBPATTERN:
            _, add_flags, del_flags, sub = av
            if self.dialect == "ecma" and (add_flags or del_flags):
                raise self.fail("inline flags (not ECMA-262 syntax)")
            return self.sequence(list(sub), (flags | add_flags) & ~del_flags)
        if op is sre.MAX_REPEAT or op is sre.MIN_REPEAT:
            lo, hi, sub = av
            body = self.sequence(list(sub), flags)
            if set(body) != {(False, False)}:
                raise self.fail("an anchor inside a repetition")
            return {(False, False): repeat(body[(False, False)], lo, None if hi == sre.MAXREPEAT else hi)}
        return {(False, False): Chars(self.char_set(op, av, flags))}

    def char_set(self, op, av, flags: int) -> CodeRanges:
        if op is sre.ANY:
            if self.dialect == "ecma":
                return complement(_ECMA_LINE_TERMINATORS)
            return SCALARS if flags & re.DOTALL else complement(((10, 10),))
        if op not in (sre.LITERAL, sre.NOT_LITERAL, sre.IN):
            raise self.fail(_describe(op, av))
        if self.dialect == "python":
            return engine_regex.char_set(op, av, flags)
        return _ecma_char_set(op, av)


def _describe(op, av) -> str:
    if op is sre.ASSERT or op is sre.ASSERT_NOT:
        return f"a {'negative ' if op is sre.ASSERT_NOT else ''}{'lookahead' if av[0] >= 0 else 'lookbehind'}"
    if op is sre.GROUPREF:
        return "a backreference"
    if op is sre.GROUPREF_EXISTS:
        return "a conditional group"
    return f"the construct {str(op).lower().replace('_', ' ')}"


def _ecma_char_set(op, av) -> CodeRanges:
    return engine_regex.exact_set(op, av, _ecma_category)


def _ecma_category(category) -> CodeRanges:
    members, negated = _ECMA_CATEGORIES[category]
    return complement(members) if negated else members


# --- AST algebra -----------------------------------------------------------------------------


def is_nothing(node: Node) -> bool:
    return isinstance(node, Chars) and not node.ranges


def concat(*parts: Node) -> Node:
    """The concatenation, flattened; the empty language absorbs it."""
    flat: list[Node] = []
    for p in parts:
        if is_nothing(p):
            return NOTHING
        for sub in p.parts if isinstance(p, Concat) else (p,):
            if flat and isinstance(sub, Repeat) and sub.max is None and sub.min == 0 and flat[-1] == sub.node:
                flat[-1] = Repeat(sub.node, 1, None)
            else:
                flat.append(sub)
    return flat[0] if len(flat) == 1 else Concat(tuple(flat))


def alt(*options: Node) -> Node:
    """The union, flattened and deduplicated; single characters sets are merged into one."""
    unique: dict[Node, None] = {}
    chars: list[CodeRanges] = []
    for o in options:
        for sub in o.options if isinstance(o, Alt) else (o,):
            if isinstance(sub, Chars):
                chars.append(sub.ranges)
            else:
                unique[sub] = None
    flat = list(unique)
    merged = union(*chars)
    if merged:
        flat.insert(0, Chars(merged))
    if EPSILON in flat and len(flat) > 1:
        flat.remove(EPSILON)
        rest = flat[0] if len(flat) == 1 else Alt(tuple(flat))
        return rest if nullable(rest) else repeat(rest, 0, 1)
    if not flat:
        return NOTHING
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def repeat(node: Node, lo: int, hi: int | None) -> Node:
    """``node`` repeated ``lo`` to ``hi`` times (``hi=None``: unbounded)."""
    if hi is not None and hi < lo:
        return NOTHING
    if is_nothing(node):
        return EPSILON if lo == 0 else NOTHING
    if node == EPSILON or hi == 0:
        return EPSILON
    if lo == hi == 1:
        return node
    return Repeat(node, lo, hi)


def nullable(node: Node) -> bool:
    """Whether the empty string is in the language."""
    if isinstance(node, Chars):
        return False
    if isinstance(node, Concat):
        return all(nullable(p) for p in node.parts)
    if isinstance(node, Alt):
        return any(nullable(o) for o in node.options)
    return node.min == 0 or nullable(node.node)


def without_empty(node: Node) -> Node:
    """The same language less the empty string."""
    if not nullable(node):
        return node
    if isinstance(node, Chars):
        return node
    if isinstance(node, Alt):
        return alt(*(without_empty(o) for o in node.options))
    if isinstance(node, Concat):
        if not node.parts:
            return NOTHING
        head, tail = node.parts[0], concat(*node.parts[1:])
        first = concat(without_empty(head), tail)
        return alt(first, without_empty(tail)) if nullable(head) else first
    if not nullable(node.node):
        return repeat(node.node, 1, node.max)
    body = without_empty(node.node)
    if node.max is not None and node.max <= 1:
        return body
    return concat(body, repeat(node.node, 0, None if node.max is None else node.max - 1))


def fixed_width(node: Node) -> int | None:
    """The length of every string of the language, if they all have one length (None otherwise)."""
    if isinstance(node, Chars):
        return 1
    if isinstance(node, Concat):
        widths = [fixed_width(p) for p in node.parts]
        return None if None in widths else sum(widths)
    if isinstance(node, Alt):
        widths = {fixed_width(o) for o in node.options}
        return widths.pop() if len(widths) == 1 else None
    if isinstance(node, Repeat) and node.min == node.max:
        width = fixed_width(node.node)
        return None if width is None else width * node.min
    return None


def split_count(node: Node) -> tuple[Node, int, int | None] | None:
    """``node`` as a language without its counted repeat and a bound on the whole length, where it is fixed-length
    parts around one repeat of single characters, the one with the largest count (``ab[0-9]{3,1000}c``:
    ``ab[0-9]*c`` of length 6 to 1003).

    None for any other shape (a repeat of longer strings, other parts of varying length).
    """
    parts = node.parts if isinstance(node, Concat) else (node,)
    repeats = [i for i, p in enumerate(parts) if isinstance(p, Repeat) and isinstance(p.node, Chars)]
    if not repeats:
        return None
    i = max(repeats, key=lambda j: parts[j].min if parts[j].max is None else parts[j].max)
    widths = [fixed_width(p) for j, p in enumerate(parts) if j != i]
    if None in widths:
        return None
    rep = parts[i]
    relaxed = concat(*parts[:i], Repeat(rep.node, 0, None), *parts[i + 1 :])
    fixed = sum(widths)
    return relaxed, rep.min + fixed, None if rep.max is None else rep.max + fixed


# --- rendering -------------------------------------------------------------------------------

_CLASS_SPECIAL = set("\\]^-[")


def render_char(code_point: int, *, in_class: bool = False) -> str:
    """One code point as regex text that means exactly that character."""
    ch = chr(code_point)
    if 0x21 <= code_point <= 0x7E:
        if in_class:
            return "\\" + ch if ch in _CLASS_SPECIAL else ch
        return re.escape(ch)
    if code_point <= 0xFF:
        return f"\\x{code_point:02x}"
    if code_point <= 0xFFFF:
        return f"\\u{code_point:04x}"
    return f"\\U{code_point:08x}"


def render_ranges(ranges: CodeRanges) -> str:
    """A character set as one regex atom (a literal or a bracketed class).

    Raises :class:`EmptyLanguageError` for an empty set.
    """
    if not ranges:
        raise EmptyLanguageError("an empty character set has no regex form")
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return render_char(ranges[0][0])
    body = []
    for lo, hi in ranges:
        body.append(render_char(lo, in_class=True))
        if hi > lo:
            body.append(("-" if hi > lo + 1 else "") + render_char(hi, in_class=True))
    return "[" + "".join(body) + "]"


MAX_RENDERED = 1 << 24
"""The longest regex text :func:`render_regex` writes (characters)."""


def render_regex(node: Node, atom=render_ranges, deadline: Deadline = NO_DEADLINE) -> str:
    """Python regex text for the AST; ``atom`` renders one character set as a self-contained atom.

    A subtree the AST shares (state elimination shares many) is rendered once. Raises
    :class:`~grammask.errors.UnsupportedRegexError` where the text would be longer than :data:`MAX_RENDERED` (a
    shared subtree is written out wherever it occurs, so text can grow exponentially with the AST) and
    :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed.
    """
    renderer = _Renderer(atom, deadline)
    length = renderer.length(node)
    if length > MAX_RENDERED:
        raise UnsupportedRegexError(f"the language's regex would be {length:,} characters long (more than "
                                    f"{MAX_RENDERED:,}): too large to write out")
    return renderer.text(node)


class _Renderer:
    def __init__(self, atom, deadline: Deadline):
        self.atom = atom
        self.deadline = deadline
        self.done: dict[int, str] = {}  # by node identity: the nodes live as long as the call
        self.lengths: dict[int, int] = {}

    def text(self, node: Node) -> str:
        found = self.done.get(id(node))
        if found is None:
            self.deadline.check("the JSON Schema string languages")
            found = self.done[id(node)] = self._text(node)
        return found

    def length(self, node: Node) -> int:
        """The length of :meth:`text` (an upper bound where a quantifier's text is shorter)."""
        found = self.lengths.get(id(node))
        if found is None:
            if isinstance(node, Chars):
                found = len(self.text(node))
            elif isinstance(node, Concat):
                found = sum(self.length(p) + 4 for p in node.parts)
            elif isinstance(node, Alt):
                found = sum(self.length(o) + 1 for o in node.options)
            else:
                found = self.length(node.node) + 30
            self.lengths[id(node)] = found
        return found

    def _text(self, node: Node) -> str:
        if isinstance(node, Chars):
            return self.atom(node.ranges)
        if isinstance(node, Concat):
            return "".join(self._grouped(p, in_concat=True) for p in node.parts)
        if isinstance(node, Alt):
            return "|".join(self.text(o) for o in node.options)
        inner = self._grouped(node.node, in_concat=False)
        if (node.min, node.max) == (0, None):
            quant = "*"
        elif (node.min, node.max) == (1, None):
            quant = "+"
        elif (node.min, node.max) == (0, 1):
            quant = "?"
        elif node.max is None:
            quant = f"{{{node.min},}}"
        elif node.min == node.max:
            quant = f"{{{node.min}}}"
        else:
            quant = f"{{{node.min},{node.max}}}"
        return inner + quant

    def _grouped(self, node: Node, *, in_concat: bool) -> str:
        # ``atom`` always returns a self-contained atom, so only Alt (and, under a quantifier, any
        # compound node) needs a group.
        text = self.text(node)
        if isinstance(node, Alt) or (not in_concat and not isinstance(node, Chars)):
            return f"(?:{text})"
        return text


# --- the front end ---------------------------------------------------------------------------


def grammar_from_regex(pattern: str, *, name: str = "regex", count: bool = True) -> Grammar:
    """A grammar whose sentences are exactly the strings ``re.fullmatch(pattern, s)`` accepts.

    The grammar has one terminal ``REGEX`` and the rule ``start: REGEX`` (plus an empty
    alternative when the pattern matches the empty string, since a terminal must consume
    input). Anchors at the edges of the pattern are accepted and mean nothing under whole-match
    semantics, nor does laziness (``*?``); lookarounds and backreferences raise
    :class:`UnsupportedRegexError`. The terminal's pattern is the parsed language written out
    (every character set explicit), so flags and ``\\d``-like classes keep Python's meaning. With
    ``count`` (default), a big counted repeat of single characters amid fixed-length parts
    (``[0-9]{1,100000}``, ``id-[a-z]{3,5000}``) is counted beside the lexer state instead of unrolled
    (:class:`~grammask.grammar.ir.Count`; token budgets are not built for it yet).

    Text that is not a valid regex also raises :class:`UnsupportedRegexError`; a pattern that matches
    no string raises :class:`~grammask.errors.EmptyLanguageError`.
    """
    node = parse_pattern(require_text(pattern, "a regex"), dialect="python")
    if is_nothing(node):
        raise EmptyLanguageError(f"regex {pattern!r} matches no string")
    counted = _counted(node) if count else None
    body, bound = (without_empty(node), None) if counted is None else counted
    rules = []
    terminals = ()
    if not is_nothing(body):
        terminals = (Terminal("REGEX", render_regex(body), count=bound),)
        rules.append(Rule("start", ("REGEX",)))
    if nullable(node):
        rules.append(Rule("start", ()))
    return Grammar(terminals, tuple(rules), "start", name=name)


COUNT_FROM = 64
"""A repeat counted up to this many times or more is counted beside the lexer state (where it can be)."""


def _counted(node: Node) -> tuple[Node, Count] | None:
    """The terminal's language and length bound where the pattern's largest repeat is big and can be counted."""
    split = split_count(node)
    if split is None:
        return None
    relaxed, lo, hi = split
    if max(lo, hi or 0) < COUNT_FROM:
        return None
    body = without_empty(relaxed)
    if is_nothing(body) or not free_pattern(render_regex(body), "", "codepoints"):
        return None
    return body, Count(max(lo, 1), hi)
