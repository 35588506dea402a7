"""The offline builder of mask tables: a grammar's lexer and parse tables against a vocabulary (GreatGramma Alg. 4-5).

For every lexer state ``q`` a matcher can be in between tokens, the vocabulary is walked once
(:mod:`grammask.spanner`) and its tokens are grouped into *classes* that look the same to the
parser: same emitted terminal sequence ``E``, same set ``P`` of terminals the pending lexeme
can still become. For every LR state ``p`` that can be on top of the stack while the lexer is
in ``q``, each class is classified (:mod:`grammask.parser.kernels`): ALWAYS-accepted classes
are OR-ed into one precomputed bitmask for ``(q, p)``; DEPENDS classes are kept as a short
list, checked against the real stack at decoding time; NEVER classes are dropped.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import warnings
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from grammask.automata.contextual import contextual_lexer
from grammask.automata.counted import CountTables
from grammask.automata.fallback import MAX_DEPTH, Joins, Reading
from grammask.automata.lexer import LexerAutomaton, build_lexer, with_fallbacks
from grammask.bitmask import bitmask_words
from grammask.classes import (
    NO_EXCLUSION,
    ClassGroups,
    ClassIndex,
    ClassTokens,
    GroupScratch,
    StateClasses,
    StateTokens,
    group_walk,
    token_row,
)
from grammask.contextual_walk import MAX_ALIASES, Superpositions, walk_contextual
from grammask.errors import (
    CompileTimeoutError,
    ConfigurationError,
    UnsupportedRegexError,
)
from grammask.gc_pause import collector_paused
from grammask.grammar.ir import Grammar
from grammask.growing import Growing
from grammask.indentation import IndentSpec, byte_widths
from grammask.parser.kernels import (
    ALWAYS,
    UNKNOWN,
    check_classes_on_tops,
    classify_classes,
    exposed_states,
)
from grammask.parser.tables import ERROR, ParseTables, build_parse_tables
from grammask.spanner import NewlineWidths, SequenceTable, TrieWalkPool, walk_alive

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from grammask.errors import Deadline
    from grammask.vocab import Vocabulary

FORMAT_VERSION = 13

_GROWING = ("pair_mask", "pair_marks", "masks", "marks_ptr", "marks", "state_class", "state_lcp", "state_dep",
            "dep_word_ptr", "dep_words", "dep_bits", "class_seq_ptr", "class_seq_terms", "class_follow")
_FIXED = ("pair_after", "state_span", "built", "follow_ptr", "follow_terms", "follow_any", "state_follow")


class MaskTables:
    """Everything the online matcher reads, as flat arrays, built per lexer state on first use or all at once.

    *Classes* are (emitted terminal sequence, follow set) pairs: class ``c`` emits
    ``class_seq_terms[class_seq_ptr[c]:class_seq_ptr[c+1]]`` and then needs a terminal of follow set
    ``class_follow[c]``, which is ``follow_terms[follow_ptr[f]:follow_ptr[f+1]]``, or anything when ``follow_any[f]``.

    Lexer state ``q`` sorts its tokens into the classes ``state_class[a:b]`` for ``a, b = state_span[q]``
    (in sorted order of their sequences; ``state_lcp`` is the sequence prefix each shares with the one before).
    ``pair_index(q)[p]`` is the row of (lexer state ``q``, LR state ``p``) in the pair arrays, or
    -1 for pairs no decoding reaches (kept one higher, in ``pair_after``, so that the rows of the states not built
    are zeros the system hands out untouched). A pair has a precomputed mask ``masks[pair_mask[i]]``
    (its ALWAYS classes) and a bitset over ``q``'s classes marking the ones that depend on the
    stack, ``marks[marks_ptr[m]:marks_ptr[m+1]]`` for ``m = pair_marks[i]``. The tokens of a
    marked class ``k`` of ``q`` are the bitmask words and bits
    ``dep_words/dep_bits[dep_word_ptr[d]:dep_word_ptr[d+1]]`` of ``d = state_dep[a + k]``.
    ``state_follow[q]`` is the follow set of lexer state ``q`` (for checking a single token).

    ``built[q]`` says whether state ``q``'s rows are there; :meth:`ensure` builds them (under :attr:`lock`).
    The arrays of :data:`_GROWING` only grow (:class:`~grammask.growing.Growing`: read ``grow[name].data``
    below its length), so a reader may keep using what it has while another thread builds a state. What
    the disk cache stores is :meth:`arrays`.
    """

    def __init__(self, fixed: dict[str, np.ndarray], grow: dict[str, Growing], builder: _StateBuilder | None = None):
        self.pair_after, self.state_span, self.built = fixed["pair_after"], fixed["state_span"], fixed["built"]
        self.follow_ptr, self.follow_terms = fixed["follow_ptr"], fixed["follow_terms"]
        self.follow_any, self.state_follow = fixed["follow_any"], fixed["state_follow"]
        self.grow = grow
        self.timings = {"walk": 0.0, "verdicts": 0.0, "refine": 0.0}
        """Seconds spent building so far: vocabulary walks, verdicts and masks, branching verdicts."""
        self.lock = threading.RLock()
        self._builder = builder
        self.built_order: list[int] = np.flatnonzero(self.built).tolist()
        """The built states, in the order they were built."""

    @property
    def masks(self) -> np.ndarray:
        """The precomputed masks' rows (the rows past the number of masks are spare)."""
        return self.grow["masks"].data

    @property
    def complete(self) -> bool:
        """Whether every lexer state reachable between tokens is built (tables read from disk are)."""
        return self._builder is None or self._builder.done

    @property
    def nbytes(self) -> int:
        """Bytes of the tables built so far."""
        return sum(getattr(self, f).nbytes for f in _FIXED) + sum(g.values.nbytes for g in self.grow.values())

    def pair_index(self, q: int) -> np.ndarray:
        """Lexer state ``q``'s pair row per LR state (-1: none)."""
        return self.pair_after[q] - 1

    def ensure(self, q: int) -> bool:
        """Build lexer state ``q``'s rows unless they are there; whether it built them.

        Tables without a builder (read from disk) give a state no token reaches an empty row: no pair.
        """
        if self.built[q]:
            return False
        with self.lock, collector_paused():
            if self.built[q]:
                return False
            if self._builder is not None:
                self._builder.build(q)
            self.built[q] = True
            self.built_order.append(q)
        return True

    def complete_all(self, deadline: Deadline | None = None) -> None:
        """Build every lexer state reachable between tokens (from the start state). Raises
        :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` (None: no limit) has passed."""
        with self.lock, collector_paused():
            if self._builder is not None:
                self._builder.complete(deadline)
                if self._builder.done:
                    self._builder = None

    def counts(self) -> dict[str, int]:
        """What :class:`~grammask.compiled.CompileStats` counts: lexer states built, pairs, masks, stack-dependent
        class lists."""
        grow = self.grow
        return {"reachable_lexer_states": len(self.built_order), "pairs": len(grow["pair_mask"]),
                "masks": len(grow["masks"]), "depends_classes": len(grow["dep_word_ptr"]) - 1}

    def arrays(self) -> dict[str, np.ndarray]:
        """The tables as named arrays (see :meth:`from_arrays`)."""
        with self.lock:
            out = {f: getattr(self, f) for f in _FIXED if f != "pair_after"}
            out.update({f: g.values for f, g in self.grow.items()})
            return {"pair_index": self.pair_after - 1, **{f: a.copy() for f, a in out.items()}}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> MaskTables:
        """The tables :meth:`arrays` gave; KeyError if one is missing."""
        fixed = {f: arrays[f].copy() for f in _FIXED if f != "pair_after"}
        return cls({"pair_after": arrays["pair_index"] + 1, **fixed}, {f: Growing.of(arrays[f]) for f in _GROWING})


def parser_terminal_map(grammar: Grammar, lexer: LexerAutomaton) -> tuple[tuple[str, ...], np.ndarray]:
    """Parser terminals (the non-ignored lexer terminals in lexer order, then the declared ones) and the
    lexer-to-parser index map (an alias maps to the terminal it stands for)."""
    stands_for = dict(lexer.aliases)
    names = tuple(n for n, ign in zip(lexer.terminals, lexer.ignored) if not ign and n not in stands_for)
    names += grammar.declared
    index = {n: i for i, n in enumerate(names)}
    mapping = np.array([-1 if ign else index[stands_for.get(n, n)] for n, ign in zip(lexer.terminals, lexer.ignored)],
                       dtype=np.int32)
    return names, mapping


class Front(NamedTuple):
    """The vocabulary-independent part of a compiled grammar."""

    lexer: LexerAutomaton
    tables: ParseTables
    parser_term: np.ndarray
    """Per lexer terminal: its parser terminal, -1 if ignored, a context id for indentation's newline."""
    indent: IndentSpec | None
    state_modes: np.ndarray | None = None
    """Per lexer state of a contextual lexer, the modes whose lexemes pass through it (None with the basic lexer,
    or where the two lex alike)."""


def build_front(grammar: Grammar, deadline: Deadline | None = None) -> Front:
    """The vocabulary-independent part of compilation: lexer automaton, parse tables, terminal map, indentation.

    Raises what :func:`~grammask.automata.lexer.build_lexer`, :func:`~grammask.parser.tables.build_parse_tables`
    and :meth:`~grammask.indentation.IndentSpec.build` raise (a passed ``deadline`` included; None: no limit), and
    :class:`~grammask.errors.ConfigurationError` for the contextual lexer with semicolon insertion where it lexes
    otherwise than the basic one, or with counted terminals.
    """
    lexer = build_lexer(grammar, deadline)
    _warn_unlexable(grammar, lexer)
    names, mapping = parser_terminal_map(grammar, lexer)
    tables = build_parse_tables(grammar, names, deadline)
    state_modes = None
    if grammar.lexer == "contextual" and lexer.counter is not None:
        raise ConfigurationError(f"grammar {grammar.name!r}: counted terminals (length bounds) need lexer='basic'")
    if grammar.lexer == "contextual" and grammar.semicolons is not None:
        _refuse_semicolons(grammar, tables, mapping, deadline)
    elif grammar.lexer == "contextual":
        made = _contextual(grammar, lexer, tables, mapping, deadline)
        if made is not None:
            lexer, state_modes = made
    if grammar.backtrack and grammar.semicolons is None and lexer.counter is None:
        plain = lexer.n_states
        lexer, origin = _with_fallbacks(grammar, lexer, terminal_follows(tables), mapping)
        if state_modes is not None and origin is not None:  # a fallback state is in its long lexeme's modes
            state_modes = np.vstack([state_modes, np.where((origin[plain:] >= 0)[:, None],
                                                           state_modes[np.maximum(origin[plain:], 0)], False)])
    indent = None
    if grammar.indentation is not None:
        indent = IndentSpec.build(grammar.indentation, lexer, names, MAX_ALIASES if lexer.contextual else 0)
        mapping = indent.lexer_terminal_map(mapping)
    return Front(lexer, tables, mapping, indent, state_modes)


def _with_fallbacks(grammar: Grammar, lexer: LexerAutomaton, follows: np.ndarray, mapping: np.ndarray,
                    ) -> tuple[LexerAutomaton, np.ndarray | None]:
    """``lexer`` with Lark's fallbacks (:func:`~grammask.automata.lexer.with_fallbacks`) where they can be built
    exactly and some reading of them may parse (``follows`` from :func:`terminal_follows`, ``mapping`` the
    lexer-to-parser terminal map), with a warning naming the places where grammask's lexer still does not back up
    as Lark's does (unless the parser rejects every reading dropped there); and each state's origin
    (``Fallbacks.origin``; None where the lexer is unchanged)."""
    rules = grammar.indentation
    stands_for = dict(lexer.aliases)
    opaque = frozenset() if rules is None else frozenset(
        t for t, name in enumerate(lexer.terminals) if rules.newline in (name, stands_for.get(name)))
    joins = _joins(follows, mapping, opaque)
    backed, made, limit = with_fallbacks(lexer, joins, late=rules is None)
    if limit is not None:
        warnings.warn(f"grammar '{grammar.name}': grammask's lexer does not back up to an earlier match where Lark's "
                      f"does: {limit}", stacklevel=4)
        return lexer, None
    if made is None:
        return lexer, None
    if rules is not None and made.added:
        widths = byte_widths(rules.tab_len, rules.line_breaks)
        measured = sorted(t for t, window in made.windows.items() if (widths[sorted(window)] != 0).any())
        if measured:
            _warn_no_fallback(grammar, measured, lexer, "where the text read past the match counts for the indentation")
            return lexer, None
    cut, parted = (_parsed_drops(dropped, joins) for dropped in (made.cut, made.parted))
    if cut:
        _warn_no_fallback(grammar, cut, lexer, f"after more than {MAX_DEPTH} lexemes read past the match")
    if parted:
        _warn_no_fallback(grammar, parted, lexer, "where the contextual lexer's next mode after it decides "
                          "how the text after it lexes and the match is itself inside the text read past another match "
                          "or its terminal looks past its lexeme (pass lexer='basic')")
    return backed, made.origin if made.added else None


def _joins(follows: np.ndarray, mapping: np.ndarray, opaque: frozenset[int]) -> Joins:
    """Whether the parser may take lexer terminal ``y`` right after ``x`` (an ignored terminal, or one of ``opaque``
    whose postlex may add or drop terminals after it, could be followed by anything)."""

    def joins(x: int, y: int) -> bool:
        px, py = int(mapping[x]), int(mapping[y])
        return px < 0 or py < 0 or x in opaque or y in opaque or bool(follows[px, py])

    return joins


def _parsed_drops(dropped: Mapping[int, frozenset[Reading]], joins: Joins) -> list[int]:
    """The terminals of ``dropped`` (``Fallbacks.cut`` or ``parted``) with a dropped reading the parser may take: each
    of its pairs of adjacent lexer terminals one the parser may take one after the other."""
    return sorted(t for t, readings in dropped.items() if any(all(joins(x, y) for x, y in r) for r in readings))


def _warn_no_fallback(grammar: Grammar, terminals, lexer: LexerAutomaton, where: str) -> None:
    names = ", ".join(lexer.terminals[t] for t in terminals)
    warnings.warn(
        f"grammar '{grammar.name}': grammask's lexer does not back up to an earlier match of {names} {where}, where "
        f"Lark's does: text that runs on past such a match and then fails is refused (docs/architecture.md, "
        f"'The lexing rule')", stacklevel=5)


def _warn_unlexable(grammar: Grammar, lexer: LexerAutomaton) -> None:
    """Warn about terminals the rules use that the lexer never emits: another terminal always takes their text."""
    used = {sym for rule in grammar.rules for sym in rule.rhs}
    lost = [name for t, name in enumerate(lexer.terminals) if name in used and not lexer.produce[0, t]]
    if lost:
        rule = "it comes first in Lark's order" if grammar.first_match else "the lexing rule"
        warnings.warn(
            f"grammar '{grammar.name}': terminal(s) {', '.join(lost)} can never be lexed: wherever their text "
            f"matches, another terminal wins it ({rule}), so the rules that use them never match", stacklevel=3)


def _refuse_semicolons(grammar: Grammar, tables: ParseTables, mapping: np.ndarray, deadline: Deadline | None) -> None:
    """Raise :class:`~grammask.errors.ConfigurationError` where the contextual lexer lexes a grammar with semicolon
    insertion otherwise than the basic one (its modes are not combined with the lexer's armed and unarmed ones)."""
    plain = build_lexer(dataclasses.replace(grammar, semicolons=None), deadline)
    refusal = (f"grammar {grammar.name!r}: the contextual lexer lexes it otherwise than the basic one, and grammask "
               f"runs semicolon insertion only with the basic lexer so far; pass lexer='basic'")
    try:
        made = _contextual(grammar, plain, tables, mapping[: len(plain.terminals)], deadline)
    except UnsupportedRegexError as e:
        raise ConfigurationError(f"{refusal} (and under it: {e})") from e
    if made is not None:
        raise ConfigurationError(refusal)


def _contextual(grammar: Grammar, lexer: LexerAutomaton, tables: ParseTables, mapping: np.ndarray,
                deadline: Deadline | None) -> tuple[LexerAutomaton, np.ndarray] | None:
    """The contextual lexer for these tables (None where it lexes as the basic one).

    As Lark's, every state's lexer also has the postlex's ``always_accept`` terminals: the indenter's newline, and
    terminals no rule uses (kept only for a postlex). The next lexeme after a newline starts in the mode of the
    state its indents and dedents reach (or, inside brackets, where it is dropped, of any state).
    """
    columns = np.maximum(mapping, 0)
    actions = tables.action[:, columns]
    accepts = (actions != ERROR) & (mapping >= 0)[None, :]
    shifts = tables.action[:, : tables.end]
    on_top = np.zeros(tables.n_states, dtype=bool)
    on_top[shifts[shifts >= 0]] = True
    on_top[tables.accept_state] = False
    on_top[tables.start_state] = True
    targets = [np.unique(actions[:, t][actions[:, t] >= 0]) if mapping[t] >= 0 else np.zeros(0, dtype=np.int32)
               for t in range(len(mapping))]
    rules = grammar.indentation
    if rules is not None or grammar.semicolons is not None:
        accepts |= (mapping >= 0)[None, :] & ~accepts.any(axis=0)[None, :]
    if grammar.semicolons is not None:
        accepts[:, [lexer.terminals.index(n) for n in grammar.semicolons.newlines]] = True
    if rules is not None:
        newline = lexer.terminals.index(rules.newline)
        accepts[:, newline] = True
        if rules.open_brackets:
            targets[newline] = np.flatnonzero(on_top)
        else:
            columns = [tables.terminals.index(n) for n in (rules.newline, rules.indent, rules.dedent)]
            moved = tables.action[:, columns]
            targets[newline] = np.unique(moved[moved >= 0])
    return contextual_lexer(lexer, accepts, on_top, targets, tables.start_state, deadline)


def build_mask_tables(front: Front, vocab: Vocabulary, walks: TrieWalkPool, deadline: Deadline | None = None,
                      lazy: bool = False) -> tuple[MaskTables, ParseTables, IndentSpec | None, dict]:
    """Walk the vocabulary from every reachable lexer state and split its classes into ALWAYS / DEPENDS per LR state.

    Returns the mask tables, the parse tables the masks read (the front's, with a contextual lexer's alias
    columns appended: :mod:`grammask.contextual_walk`), the indentation rules they are read with (the front's,
    with aliases of brackets counted as brackets) and the phases' timings. ``lazy``: build only the start state's
    rows now, the others on first use (:meth:`MaskTables.ensure`; with counted terminals, a state's copy in a later
    level too, when a count first comes near it). Tables are always built whole for a contextual lexer (its walks
    add parse table columns) and for indentation.

    Classes holding a context terminal (indentation's newline) are always DEPENDS: the matcher decides
    them with the indentation it tracks. Raises :class:`~grammask.errors.CompileTimeoutError` once
    ``deadline`` (None: no limit) has passed.
    """
    builder = _StateBuilder(front, vocab, walks)
    tables = builder.tables
    if front.lexer.contextual:
        builder.walk_contextual(deadline)
    if lazy and not front.lexer.contextual and front.indent is None:
        tables.ensure(0)
    else:
        tables.complete_all(deadline)
    return tables, builder.parse, builder.indent, dict(tables.timings)


class _StateBuilder:
    """Builds one grammar's mask tables a lexer state at a time (GreatGramma Alg. 4-5 per state)."""

    def __init__(self, front: Front, vocab: Vocabulary, walks: TrieWalkPool):
        self.front = front
        self.parse = front.tables
        self.walks = walks
        self.walker = object()  # names this builder to the scratch pool, which keeps its subtree cache for it
        lexer, tables, parser_term, indent = front.lexer, front.tables, front.parser_term, front.indent
        self.n_words = bitmask_words(vocab.n_logits)
        follow_sets, self.state_follow = _follow_sets(lexer, parser_term)
        self.n_follow = len(follow_sets)
        self.indent = indent
        self.newline = None
        n_terms = int(parser_term.max(initial=-1)) + 2
        if indent is not None:
            widths = byte_widths(indent.tab_len, indent.line_breaks)
            self.newline = NewlineWidths(indent.newline_lexer, indent.base, widths, indent.stride)
            n_terms = indent.max_id(_max_token_width(vocab, widths)) + 1
        self.sup = None
        if lexer.contextual:
            options = np.diff(lexer.branch_ptr)
            self.sup = Superpositions(int(options.max(initial=0)), tables.action.shape[1])
            n_terms = max(n_terms, self.sup.base + MAX_ALIASES)
            self.bans = None if lexer.ban is None else (lexer.ban_row, lexer.ban)
            self.may = may_follow(tables, lexer, parser_term, int(options.max(initial=0)))
        self.seqs = SequenceTable(n_terms)
        self.classes = ClassIndex(self.seqs, self.n_follow)
        self.deps = ClassTokens(self.n_words)
        self.group_scratch = GroupScratch()
        self.walked: dict[int, StateClasses] = {}
        self.bases: dict[int, tuple[StateTokens, np.ndarray]] = {}  # and each class's tokens per first byte
        self.building: set[int] = set()  # states whose build waits for their base's
        self.no_row = np.zeros(self.n_words, dtype=np.int32)
        self.queued = np.zeros(lexer.n_states, dtype=bool)
        self.queued[0] = True
        if lexer.alt is not None:  # a fallback's reading state only lends its follow set: the lexer never rests there
            self.queued[lexer.alt[lexer.alt >= 0]] = True
        self.queue = [0]
        self.mask_ids: dict[bytes, int] = {}
        self.refined = _Refined(tables.n_states)
        self.check = _no_check
        """The deadline check of the compile in progress (none for a state built on first visit)."""
        self._exposed = None
        terminal_actions = tables.action[:, : tables.end]
        # LR states that can be on top of the stack between tokens: shift targets and the start.
        self.on_top = np.zeros(tables.n_states, dtype=bool)
        self.on_top[terminal_actions[terminal_actions >= 0]] = True
        self.on_top[tables.accept_state] = False
        self.on_top[tables.start_state] = True
        self.live = terminal_actions != ERROR
        self.armed_tops = _armed_tops(lexer, tables, parser_term)
        fixed = {
            "pair_after": np.zeros((lexer.n_states, tables.n_states), dtype=np.int32),
            "state_span": np.zeros((lexer.n_states, 2), dtype=np.int64),
            "built": np.zeros(lexer.n_states, dtype=bool),
            "follow_ptr": np.cumsum([0] + [len(f[0]) for f in follow_sets]).astype(np.int32),
            "follow_terms": np.array([t for f in follow_sets for t in f[0]], dtype=np.int32),
            "follow_any": np.array([f[1] for f in follow_sets], dtype=np.bool_),
            "state_follow": self.state_follow.astype(np.int32),
        }
        grow = {
            "pair_mask": Growing(np.int32), "pair_marks": Growing(np.int32),
            "masks": Growing(np.int32, (self.n_words,), capacity=4), "marks_ptr": Growing.of(np.zeros(1, np.int64)),
            "marks": Growing(np.uint8), "state_class": Growing(np.int32), "state_lcp": Growing(np.int32),
            "state_dep": Growing(np.int32), "dep_word_ptr": self.deps.word_ptr, "dep_words": self.deps.words,
            "dep_bits": self.deps.bits, "class_seq_ptr": self.classes.seq_ptr,
            "class_seq_terms": self.classes.seq_terms, "class_follow": self.classes.follow,
        }
        self.tables = MaskTables(fixed, grow, self)
        self.timings = self.tables.timings

    @property
    def done(self) -> bool:
        """Whether every lexer state reachable between tokens is built."""
        return not self.queue

    def complete(self, deadline: Deadline | None) -> None:
        """Build every state reachable from the ones built (the caller holds the tables' lock)."""
        check = deadline.check if deadline is not None else _no_check
        self.check = check
        try:
            while self.queue:
                check("the vocabulary walks and token verdicts")
                q = self.queue.pop()
                try:
                    self.tables.ensure(q)
                except CompileTimeoutError:
                    self.queue.append(q)  # stopped inside the state: built again when completion goes on
                    raise
        finally:
            self.check = _no_check

    def walk_contextual(self, deadline: Deadline | None) -> None:
        """Walk every reachable state of a contextual lexer, then give the parse tables their alias columns."""
        check = deadline.check if deadline is not None else _no_check
        todo = [0]
        while todo:
            check("the vocabulary walks")
            q = todo.pop()
            known = len(self.queue)
            self.walked[q] = self._walk(q)
            todo.extend(self.queue[known:])
        front = self.front
        self.parse = with_alias_columns(front.tables, front.lexer, front.parser_term, self.sup.aliases, self.indent)
        if self.indent is not None:
            self.indent = self.indent.with_alias_brackets(self.sup.aliases, front.parser_term)

    def _walk(self, q: int, first_bytes: np.ndarray | None = None) -> StateClasses:
        """Walk lexer state ``q`` (only the tokens whose first byte ``b`` has ``first_bytes[b]``: see
        :func:`walk_alive`) and group its tokens; the states it reaches that were not queued yet are queued."""
        clock = time.perf_counter()
        lexer, parser_term = self.front.lexer, self.front.parser_term
        trie = self.walks.trie
        with self.walks.borrow(self.walker) as work:
            if self.sup is None:
                entries, seq, ends = walk_alive(trie, lexer.trans, lexer.accept, parser_term, q, self.seqs, work,
                                                self.newline, lexer.restart, lexer.counter, first_bytes, lexer.alt)
            else:
                entries, seq, ends = walk_contextual(trie, lexer.trans, lexer.accept, lexer.restart, lexer.ignored,
                                                     parser_term, lexer.branch_ptr, lexer.branch_start, q, self.seqs,
                                                     self.sup, work, self.may, self.newline, self.bans, lexer.alt,
                                                     None if lexer.part_row is None else
                                                     (lexer.part_row, lexer.parts, lexer.part_bits))
        walk, fresh = group_walk(trie.token_ids[entries], trie.entry_first[entries], seq, ends, self.state_follow,
                                 self.n_follow, self.group_scratch, self.queued)
        self.queue.extend(fresh.tolist())
        if lexer.counter is not None:  # a pending lexeme's count may take it to its state's copies in later levels
            self.queue.extend(_later_levels(lexer.counter, fresh, self.queued))
        self.timings["walk"] += time.perf_counter() - clock
        return walk

    @property
    def exposed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The states a reduction can expose below a known top (:func:`exposed_states`), made on first use."""
        if self._exposed is None:
            t = self.parse
            self._exposed = exposed_states(t.action, t.goto, t.rule_len, t.rule_lhs, t.rule_rhs, t.end + 1, self.check)
        return self._exposed

    def _candidates(self, q: int) -> np.ndarray:
        """The LR states that can be on top of the stack while the lexer is in state ``q`` between tokens."""
        lexer, tables, parser_term = self.front.lexer, self.parse, self.front.parser_term
        if q == 0:
            return np.array([tables.start_state], dtype=np.int32)
        produce = lexer.produce[q]
        if lexer.alt is not None and lexer.alt[q] >= 0:  # a fallback: its earlier match may come next instead
            produce = produce.copy()
            produce[lexer.accept[q]] = True
        ok = self.on_top.copy()
        if not (produce & (lexer.ignored | (parser_term >= tables.end + 1))).any():
            ok &= self.live[:, parser_term[produce]].any(axis=1)
        if self.armed_tops is not None:
            ok &= self.armed_tops if q >= lexer.n_states // 2 else ~self.armed_tops
        state_modes = self.front.state_modes
        if state_modes is not None:
            ok &= (lexer.lr_mode >= 0) & state_modes[q][np.maximum(lexer.lr_mode, 0)]
        return np.nonzero(ok)[0].astype(np.int32)

    def _full(self, q: int, walk: StateClasses) -> StateTokens:
        """State ``q``'s classes from its whole walk (kept as a base for others where it has many tokens)."""
        order, lcp = self.classes.order(ids := self.classes.number(walk.classes))
        local = np.empty(len(order), dtype=np.int64)
        local[order] = np.arange(len(order))
        groups = ClassGroups.of(walk, local[walk.token_class], len(order), self.n_words)
        found = StateTokens(ids[order], lcp, walk.sizes[order], [(groups, np.arange(len(order)), NO_EXCLUSION,
                                                                   self.no_row)])
        if len(walk.token_ids) >= _BASE_SIZE:
            self.bases[q] = found, groups.byte_counts()
        return found

    def _delta(self, q: int) -> StateTokens | None:
        """State ``q``'s classes from a base state ``g`` it lexes alike after most first bytes (a prefix of a key
        literal and the string it may also become): ``g``'s tokens but those starting with the other bytes,
        then ``q``'s own walk of these. None where no base fits."""
        lexer = self.front.lexer
        row = lexer.trans[q]
        alive = row[row >= 0]
        if not len(alive):
            return None
        g = int(np.bincount(alive).argmax())
        if g == q:
            return None
        differ = row != lexer.trans[g]
        if lexer.accept[q] != lexer.accept[g] or (lexer.restart is not None and lexer.restart[q] != lexer.restart[g]):
            differ |= row < 0
        if differ.sum() > _DELTA_BYTES or g in self.building:
            return None
        if not self.tables.built[g]:
            self.building.add(q)
            try:
                self.tables.ensure(g)
            finally:
                self.building.discard(q)
        if g not in self.bases:
            return None
        base, counts = self.bases[g]
        (groups, base_local, _, _), = base.parts
        own = self._walk(q, differ)
        outside = counts.sum(axis=1) - counts[:, differ].sum(axis=1)
        present = np.flatnonzero(outside > 0)
        ids = np.concatenate([base.classes[base_local[present]], self.classes.number(own.classes)])
        merged, which = np.unique(ids, return_inverse=True)
        sizes = np.bincount(which, weights=np.concatenate([outside[present], own.sizes]), minlength=len(merged))
        order, lcp = self.classes.order(merged)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        local = rank[which]
        from_base = np.full(len(groups.ptr) - 1, -1, dtype=np.int64)
        from_base[present] = local[: len(present)]
        own_groups = ClassGroups.of(own, own.token_class, len(own.classes), self.n_words)
        trie = self.walks.trie
        spans = trie.first_spans[differ]
        excluded = [trie.token_ids[a:b] for a, b in spans.tolist()]
        excluded_row = token_row(self.n_words, np.concatenate(excluded) if excluded else np.zeros(0, np.int32))
        parts = [(groups, from_base, differ, excluded_row), (own_groups, local[len(present):], NO_EXCLUSION, self.no_row)]
        return StateTokens(merged[order], lcp, sizes[order].astype(np.int64), parts)

    def build(self, q: int) -> None:
        """Walk lexer state ``q`` (unless walked) and write its classes, pairs, masks and marks into the tables
        (the caller holds the tables' lock and marks ``q`` built)."""
        walk = self.walked.get(q)  # kept until the verdicts, which may stop at the compile's deadline
        lexer = self.front.lexer
        plain = self.sup is None and lexer.counter is None and self.newline is None  # a walk hangs on q's row only
        found = self._delta(q) if walk is None and plain else None
        if found is None:
            if walk is None:
                walk = self.walked[q] = self._walk(q)
                self.check("the vocabulary walks and token verdicts")
            found = self._full(q, walk)
        clock = time.perf_counter()
        t, grow = self.tables, self.tables.grow
        lcp = found.lcp
        tables = self.parse
        lr = (tables.action, tables.goto, tables.rule_len, tables.rule_lhs)
        class_arrays = (grow["class_seq_ptr"].data, grow["class_seq_terms"].data, grow["class_follow"].data,
                        t.follow_ptr, t.follow_terms, t.follow_any)
        candidates = self._candidates(q)
        self.check("the token verdicts")
        verdicts = np.empty((len(candidates), len(found.classes)), dtype=np.int8)
        check_classes_on_tops(*lr, candidates, found.classes, lcp, *class_arrays, verdicts)
        self.check("the token verdicts")
        big = np.nonzero(found.sizes >= _REFINE_SIZE)[0]
        if len(big):
            clock_refine = time.perf_counter()
            rows, cols = np.nonzero(verdicts[:, big] == UNKNOWN)
            if len(rows):
                verdicts[rows, big[cols]] = self.refined.verdicts(
                    candidates[rows], found.classes[big[cols]], (*lr, *self.exposed, tables.n_states), class_arrays,
                    self.check)
            self.timings["refine"] += time.perf_counter() - clock_refine
            clock += time.perf_counter() - clock_refine
        self.walked.pop(q, None)
        n_local = len(found.classes)
        # Pairs with the same ALWAYS classes share a mask, pairs with the same DEPENDS classes their marks.
        always_first, always_of = _distinct_rows(np.packbits(verdicts == ALWAYS, axis=1, bitorder="little"))
        rows = found.masks(verdicts[always_first] == ALWAYS, self.n_words)
        mask_ids = np.empty(len(rows), dtype=np.int32)
        for i, row in enumerate(rows):
            key = row.tobytes()
            mid = self.mask_ids.get(key)
            if mid is None:
                mid = self.mask_ids[key] = grow["masks"].append(row)
            mask_ids[i] = mid
        depends = verdicts == UNKNOWN
        packed = np.packbits(depends, axis=1, bitorder="little")
        marks_first, marks_of = _distinct_rows(packed)
        first_marks = len(grow["marks_ptr"]) - 1
        width = packed.shape[1]
        end = grow["marks"].extend(packed[marks_first].ravel()) + width * len(marks_first)
        grow["marks_ptr"].extend(end - width * np.arange(len(marks_first) - 1, -1, -1))
        pair_mask = mask_ids[always_of]
        pair_marks = first_marks + marks_of
        ever_depends = depends.any(axis=0)
        first = grow["state_class"].extend(found.classes)
        grow["state_lcp"].extend(lcp)
        grow["state_dep"].extend(self.deps.add_state(found, ever_depends))
        t.state_span[q] = (first, first + n_local)
        first_pair = grow["pair_mask"].extend(pair_mask)
        grow["pair_marks"].extend(pair_marks)
        t.pair_after[q, candidates] = np.arange(first_pair + 1, first_pair + 1 + len(candidates), dtype=np.int32)
        self.timings["verdicts"] += time.perf_counter() - clock


# A state with this many tokens alive is kept as a base for states that lex alike after most first bytes
# (:meth:`_StateBuilder._delta`), if those differ on at most this many first bytes.
_BASE_SIZE = 4096
_DELTA_BYTES = 32

# Classes with at least this many tokens get the branching analysis when the one-state check
# cannot decide them: deciding them offline keeps large classes out of the decode-time checks.
_REFINE_SIZE = 16


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first index of each distinct row of a 2-D byte array, and the distinct row of every row."""
    if rows.shape[1] == 0:
        return np.zeros(min(len(rows), 1), dtype=np.int64), np.zeros(len(rows), dtype=np.int64)
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.ravel()


class _Refined:
    """Branching verdicts (see :func:`classify_classes`) of (LR state, class) pairs the one-state check left
    UNKNOWN, each computed once: a byte per pair, the classes' columns numbered as they first come."""

    def __init__(self, n_states: int):
        self.column = np.full(0, -1, dtype=np.int64)
        self.memo = np.full((n_states, 0), -1, dtype=np.int8)
        self.n_columns = 0

    def _columns(self, classes: np.ndarray) -> np.ndarray:
        """The memo columns of ``classes``, new ones numbered now."""
        if int(classes.max()) >= len(self.column):
            grown = np.full(max(int(classes.max()) + 1, 2 * len(self.column)), -1, dtype=np.int64)
            grown[: len(self.column)] = self.column
            self.column = grown
        new = np.unique(classes[self.column[classes] < 0])
        if len(new):
            self.column[new] = np.arange(self.n_columns, self.n_columns + len(new))
            self.n_columns += len(new)
            if self.n_columns > self.memo.shape[1]:
                grown = np.full((self.memo.shape[0], max(self.n_columns, 2 * self.memo.shape[1])), -1, dtype=np.int8)
                grown[:, : self.memo.shape[1]] = self.memo
                self.memo = grown
        return self.column[classes]

    def verdicts(self, states: np.ndarray, classes: np.ndarray, lr, class_arrays,
                 check: Callable[[str], None]) -> np.ndarray:
        """The verdict of class ``classes[i]`` on LR state ``states[i]`` for every ``i``; ``lr``: the arguments
        :func:`classify_classes` takes before the state. Raises what ``check`` (a deadline's check, called before each
        LR state's classes) raises."""
        columns = self._columns(classes)
        known = self.memo[states, columns]
        todo = np.flatnonzero(known < 0)
        if len(todo):
            by_state = todo[np.argsort(states[todo], kind="stable")]
            bounds = np.flatnonzero(np.diff(states[by_state])) + 1
            for group in np.split(by_state, bounds):
                check("the token verdicts")
                p = int(states[group[0]])
                ranks = np.unique(classes[group])
                out = np.empty(len(ranks), dtype=np.int8)
                classify_classes(*lr, p, ranks, *class_arrays, out)
                self.memo[p, self.column[ranks]] = out
            known[todo] = self.memo[states[todo], columns[todo]]
        return known


def with_alias_columns(tables: ParseTables, lexer: LexerAutomaton, parser_term: np.ndarray,
                       aliases: list[tuple[int, int]], indent: IndentSpec | None) -> ParseTables:
    """The parse tables with a column per alias (terminal, bit set over its branch options), after the others:
    the terminal's actions, with the shifts into states of the other options' modes removed. An alias of the
    indenter's newline gets its *mode column* instead (see :mod:`grammask.indentation`): 0 in the LR states of its
    modes, an error elsewhere; it is never fed."""
    action = tables.action
    extra = np.empty((action.shape[0], len(aliases)), dtype=action.dtype)
    for k, (t, bits) in enumerate(aliases):
        lo, hi = int(lexer.branch_ptr[t]), int(lexer.branch_ptr[t + 1])
        modes = [int(m) for i, m in enumerate(lexer.branch_mode[lo:hi].tolist()) if bits >> i & 1]
        if indent is not None and t == indent.newline_lexer:
            extra[:, k] = np.where(np.isin(lexer.lr_mode, modes), 0, ERROR)
            continue
        col = action[:, parser_term[t]]
        into = lexer.lr_mode[np.maximum(col, 0)]
        extra[:, k] = np.where((col >= 0) & ~np.isin(into, modes), ERROR, col)
    return dataclasses.replace(tables, action=np.hstack([action, extra]))


def terminal_follows(tables: ParseTables) -> np.ndarray:
    """``follows[x, y]``: some LR state that parser terminal ``x`` shifts into has an action on column ``y``
    (False: the parser never takes ``y`` right after ``x``)."""
    action = tables.action
    live = action != ERROR
    follows = np.zeros((action.shape[1], action.shape[1]), dtype=np.bool_)
    for x in range(tables.end):
        targets = np.unique(action[:, x][action[:, x] >= 0])
        follows[x] = live[targets].any(axis=0)
    return follows


def may_follow(tables: ParseTables, lexer: LexerAutomaton, parser_term: np.ndarray, n_options: int,
               ) -> tuple[np.ndarray, np.ndarray]:
    """Which parser terminal may be accepted right after a sequence item (see :func:`walk_contextual`): per parser
    terminal, and per lexer terminal and branch option (its shifts into that option's mode only)."""
    action = tables.action
    n_columns = action.shape[1]
    live = action != ERROR
    plain = terminal_follows(tables)
    by_option = np.zeros((len(lexer.terminals), max(n_options, 1), n_columns), dtype=np.bool_)
    for t, options in enumerate(lexer.branch_options):
        if not 0 <= parser_term[t] < n_columns:
            continue  # ignored, or the indenter's newline (context ids always pass)
        col = action[:, parser_term[t]]
        for k, mode in enumerate(options):
            targets = np.unique(col[(col >= 0) & (lexer.lr_mode[np.maximum(col, 0)] == mode)])
            by_option[t, k] = live[targets].any(axis=0)
    return plain, by_option


def _later_levels(counter: CountTables, states: np.ndarray, queued: np.ndarray) -> list[int]:
    """The copies in later levels of ``states`` not queued yet (marked queued now)."""
    out = []
    for q in states.tolist():
        for copy in counter.copies(q)[1:]:
            if not queued[copy]:
                queued[copy] = True
                out.append(copy)
    return out


def _armed_tops(lexer: LexerAutomaton, tables: ParseTables, parser_term: np.ndarray) -> np.ndarray | None:
    """With semicolon insertion: per LR state, whether it is on top only in the armed mode (its accessing
    terminal arms the lexer), so each lexer state meets only the LR states of its own mode. None without."""
    if lexer.restart is None or lexer.contextual or lexer.alt is not None:  # restarts of fallbacks, not modes
        return None
    half = lexer.n_states // 2
    arming = {int(parser_term[t]) for t, r in zip(lexer.accept[:half].tolist(), lexer.restart[:half].tolist())
              if t >= 0 and r != 0 and parser_term[t] >= 0}
    armed = np.zeros(tables.n_states, dtype=bool)
    shifts = tables.action[:, : tables.end]
    for t in arming:
        targets = shifts[:, t]
        armed[targets[targets >= 0]] = True
    return armed


def _max_token_width(vocab: Vocabulary, widths: np.ndarray) -> int:
    """The most indentation width one token's bytes can add (line breaks ignored: an upper bound)."""
    tokens = [t for t in vocab.tokens if t]
    if not tokens:
        return 0
    added = widths.clip(0)[np.frombuffer(b"".join(tokens), dtype=np.uint8)]
    starts = np.cumsum([0, *map(len, tokens[:-1])])
    return int(np.add.reduceat(added, starts).max())


def _no_check(phase: str) -> None:
    """The deadline check of a compile without a time limit."""


def _follow_sets(lexer: LexerAutomaton, parser_term: np.ndarray) -> tuple[list[tuple[tuple[int, ...], bool]], np.ndarray]:
    """Distinct (parser terminals in Prod(q), may-be-ignored) sets, and each lexer state's set id."""
    ids: dict[tuple[tuple[int, ...], bool], int] = {}
    state_follow = np.empty(lexer.n_states, dtype=np.int64)
    for q in range(lexer.n_states):
        produce = lexer.produce[q]
        terms = tuple(sorted(int(t) for t in parser_term[produce] if t >= 0))
        key = (terms, bool((produce & lexer.ignored).any()))
        state_follow[q] = ids.setdefault(key, len(ids))
    return list(ids), state_follow
