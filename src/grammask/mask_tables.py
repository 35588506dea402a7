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
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from grammask.automata.contextual import contextual_lexer
from grammask.automata.counted import CountTables
from grammask.automata.lexer import LexerAutomaton, build_lexer
from grammask.bitmask import bitmask_words
from grammask.classes import ClassTable, ClassTokens, StateClasses, group_walk
from grammask.contextual_walk import MAX_ALIASES, Superpositions, walk_contextual
from grammask.errors import ConfigurationError, UnsupportedRegexError
from grammask.grammar.ir import Grammar
from grammask.indentation import IndentSpec, byte_widths
from grammask.parser.kernels import (
    ALWAYS,
    UNKNOWN,
    check_classes,
    classify_classes,
    exposed_states,
    mask_from_classes,
)
from grammask.parser.tables import ERROR, ParseTables, build_parse_tables
from grammask.spanner import (
    NewlineWidths,
    SequenceTable,
    TrieWalk,
    VocabTrie,
    walk_alive,
)

if TYPE_CHECKING:
    from grammask.errors import Deadline
    from grammask.vocab import Vocabulary

FORMAT_VERSION = 5


@dataclass(frozen=True)
class MaskTables:
    """Everything the online matcher reads, as flat arrays (this is what the disk cache stores).

    *Classes* are (emitted terminal sequence, follow set) pairs, numbered in sorted sequence
    order: class ``c`` emits ``class_seq_terms[class_seq_ptr[c]:class_seq_ptr[c+1]]`` and then
    needs a terminal of follow set ``class_follow[c]``, which is
    ``follow_terms[follow_ptr[f]:follow_ptr[f+1]]``, or anything when ``follow_any[f]``.

    Lexer state ``q`` sorts its tokens into the classes ``state_class[state_ptr[q]:state_ptr[q+1]]``
    (in class order; ``state_lcp`` is the sequence prefix each shares with the one before).
    ``pair_index[q, p]`` is the row of (lexer state ``q``, LR state ``p``) in the pair arrays, or
    -1 for pairs no decoding reaches. A pair has a precomputed mask ``masks[pair_mask[i]]``
    (its ALWAYS classes) and a bitset over ``q``'s classes marking the ones that depend on the
    stack, ``marks[marks_ptr[m]:marks_ptr[m+1]]`` for ``m = pair_marks[i]``. The tokens of a
    marked class ``k`` of ``q`` are the bitmask words and bits
    ``dep_words/dep_bits[dep_word_ptr[d]:dep_word_ptr[d+1]]`` of ``d = state_dep[state_ptr[q] + k]``.
    ``state_follow[q]`` is the follow set of lexer state ``q`` (for checking a single token).
    """

    pair_index: np.ndarray
    pair_mask: np.ndarray
    pair_marks: np.ndarray
    masks: np.ndarray
    marks_ptr: np.ndarray
    marks: np.ndarray
    state_ptr: np.ndarray
    state_class: np.ndarray
    state_lcp: np.ndarray
    state_dep: np.ndarray
    dep_word_ptr: np.ndarray
    dep_words: np.ndarray
    dep_bits: np.ndarray
    class_seq_ptr: np.ndarray
    class_seq_terms: np.ndarray
    class_follow: np.ndarray
    follow_ptr: np.ndarray
    follow_terms: np.ndarray
    follow_any: np.ndarray
    state_follow: np.ndarray

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, f).nbytes for f in self.__dataclass_fields__)


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
    indent = None
    if grammar.indentation is not None:
        indent = IndentSpec.build(grammar.indentation, lexer, names, MAX_ALIASES if lexer.contextual else 0)
        mapping = indent.lexer_terminal_map(mapping)
    return Front(lexer, tables, mapping, indent, state_modes)


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


def build_mask_tables(front: Front, vocab: Vocabulary, trie: VocabTrie, deadline: Deadline | None = None,
                      ) -> tuple[MaskTables, ParseTables, IndentSpec | None, dict]:
    """Walk the vocabulary from every reachable lexer state and split its classes into ALWAYS / DEPENDS per LR state.

    Returns the mask tables, the parse tables the masks read (the front's, with a contextual lexer's alias
    columns appended: :mod:`grammask.contextual_walk`), the indentation rules they are read with (the front's,
    with aliases of brackets counted as brackets) and the phases' timings.

    Classes holding a context terminal (indentation's newline) are always DEPENDS: the matcher decides
    them with the indentation it tracks. Raises :class:`~grammask.errors.CompileTimeoutError` once
    ``deadline`` (None: no limit) has passed.
    """
    lexer, tables, parser_term, indent, state_modes = front
    check = deadline.check if deadline is not None else _no_check
    timings: dict[str, float] = {}
    clock = time.perf_counter()
    n_words = bitmask_words(vocab.n_logits)
    follow_sets, state_follow = _follow_sets(lexer, parser_term)
    n_follow = len(follow_sets)
    follow_ptr = np.cumsum([0] + [len(f[0]) for f in follow_sets]).astype(np.int32)
    follow_terms = np.array([t for f in follow_sets for t in f[0]], dtype=np.int32)
    follow_any = np.array([f[1] for f in follow_sets], dtype=np.bool_)

    # 1. The vocabulary walk from every lexer state a matcher can be in between tokens.
    newline = None
    n_terms = int(parser_term.max(initial=-1)) + 2
    if indent is not None:
        widths = byte_widths(indent.tab_len)
        newline = NewlineWidths(indent.newline_lexer, indent.base, widths, indent.stride)
        n_terms = indent.max_id(_max_token_width(vocab, widths)) + 1
    sup = None
    if lexer.contextual:
        options = np.diff(lexer.branch_ptr)
        sup = Superpositions(int(options.max(initial=0)), tables.action.shape[1])
        n_terms = max(n_terms, sup.base + MAX_ALIASES)
        bans = None if lexer.ban is None else (lexer.ban_row, lexer.ban)
        may = _may_follow(tables, lexer, parser_term, int(options.max(initial=0)))
    seqs = SequenceTable(n_terms)
    walks: dict[int, StateClasses] = {}
    work = TrieWalk(trie)
    slots = None
    queue = [0]
    queued = np.zeros(lexer.n_states, dtype=bool)
    queued[0] = True
    while queue:
        check("the vocabulary walks")
        q = queue.pop()
        if sup is None:
            entries, seq, ends = walk_alive(trie, lexer.trans, lexer.accept, parser_term, q, seqs, work, newline,
                                            lexer.restart, lexer.counter)
        else:
            entries, seq, ends = walk_contextual(trie, lexer.trans, lexer.accept, lexer.restart, lexer.ignored,
                                                 parser_term, lexer.branch_ptr, lexer.branch_start, q, seqs, sup,
                                                 work, may, newline, bans)
        if slots is None or len(slots) < len(seqs) * n_follow:
            slots = np.full(2 * len(seqs) * n_follow, -1, dtype=np.int32)
        walks[q], fresh = group_walk(trie.token_ids[entries], seq, ends, state_follow, n_follow, slots, queued)
        queue.extend(fresh.tolist())
        if lexer.counter is not None:  # a pending lexeme's count may take it to its state's copies in later levels
            queue.extend(_later_levels(lexer.counter, fresh, queued))
    classes = ClassTable(np.concatenate([w.classes for w in walks.values()]), seqs, n_follow)
    class_arrays = (classes.seq_ptr, classes.seq_terms, classes.follow, follow_ptr, follow_terms, follow_any)
    for walk in walks.values():
        classes.rerank(walk)
    timings["walk"] = time.perf_counter() - clock
    if sup is not None:
        tables = _with_alias_columns(tables, lexer, parser_term, sup.aliases, indent)
        if indent is not None:
            indent = indent.with_alias_brackets(sup.aliases, parser_term)
    lr = (tables.action, tables.goto, tables.rule_len, tables.rule_lhs)

    # 2. Per LR state p, the verdict of every class with p on top of an unknown stack.
    clock = time.perf_counter()
    all_classes = np.arange(len(classes), dtype=np.int32)
    exposed = exposed_states(*lr, tables.rule_rhs, tables.end + 1)
    verdict_of: dict[int, np.ndarray] = {}

    def verdicts_at(p: int) -> np.ndarray:
        v = verdict_of.get(p)
        if v is None:
            v = verdict_of[p] = np.empty(len(classes), dtype=np.int8)
            check_classes(*lr, np.array([p], dtype=np.int32), all_classes, classes.lcp, *class_arrays, v)
        return v

    # LR states that can be on top of the stack between tokens: shift targets and the start.
    terminal_actions = tables.action[:, : tables.end]
    on_top = np.zeros(tables.n_states, dtype=bool)
    on_top[terminal_actions[terminal_actions >= 0]] = True
    on_top[tables.accept_state] = False
    on_top[tables.start_state] = True
    live = terminal_actions != ERROR
    armed_tops = _armed_tops(lexer, tables, parser_term)

    # 3. Per (lexer state, LR state) pair: the ALWAYS mask and the marks of DEPENDS classes.
    pair_index = np.full((lexer.n_states, tables.n_states), -1, dtype=np.int32)
    pair_mask: list[int] = []
    pair_marks: list[int] = []
    mask_ids: dict[bytes, int] = {}
    masks: list[np.ndarray] = []
    marks: list[np.ndarray] = []
    state_ptr = np.zeros(lexer.n_states + 1, dtype=np.int64)
    state_class: list[np.ndarray] = []
    state_lcp: list[np.ndarray] = []
    state_dep: list[np.ndarray] = []
    dep_lists = ClassTokens(n_words)
    refined: dict[int, np.ndarray] = {}
    t_refine = 0.0
    for q in range(lexer.n_states):
        check("the token verdicts")
        walk = walks.get(q)
        if walk is None:
            state_ptr[q + 1] = state_ptr[q]
            continue
        n_local = len(walk.classes)
        big = np.nonzero(walk.sizes >= _REFINE_SIZE)[0]
        if q == 0:
            candidates = [tables.start_state]
        else:
            produce = lexer.produce[q]
            ok = on_top.copy()
            if not (produce & (lexer.ignored | (parser_term >= tables.end + 1))).any():
                ok &= live[:, parser_term[produce]].any(axis=1)
            if armed_tops is not None:
                ok &= armed_tops if q >= lexer.n_states // 2 else ~armed_tops
            if state_modes is not None:
                ok &= (lexer.lr_mode >= 0) & state_modes[q][np.maximum(lexer.lr_mode, 0)]
            candidates = np.nonzero(ok)[0].tolist()
        ever_depends = np.zeros(n_local, dtype=bool)
        mask_of_verdicts: dict[bytes, int] = {}
        marks_of: dict[bytes, int] = {}
        for p in candidates:
            verdicts = verdicts_at(p)[walk.classes]
            unsure = big[verdicts[big] == UNKNOWN]
            if len(unsure):
                tr = time.perf_counter()
                verdicts[unsure] = _refine(lr, exposed, tables.n_states, p, walk.classes[unsure], class_arrays,
                                           refined)
                t_refine += time.perf_counter() - tr
            vkey = (verdicts == ALWAYS).tobytes()
            mid = mask_of_verdicts.get(vkey)
            if mid is None:
                row = mask_from_classes(n_words, walk.token_ids, walk.token_class, verdicts)
                mid = mask_of_verdicts[vkey] = mask_ids.setdefault(row.tobytes(), len(masks))
                if mid == len(masks):
                    masks.append(row)
            depends = verdicts == UNKNOWN
            packed = np.packbits(depends, bitorder="little")
            mkey = packed.tobytes()
            marks_id = marks_of.get(mkey)
            if marks_id is None:
                marks_id = marks_of[mkey] = len(marks)
                marks.append(packed)
                ever_depends |= depends
            pair_index[q, p] = len(pair_mask)
            pair_mask.append(mid)
            pair_marks.append(marks_id)
        state_ptr[q + 1] = state_ptr[q] + n_local
        state_class.append(walk.classes)
        state_lcp.append(classes.lcp_between(walk.classes))
        state_dep.append(dep_lists.add_state(walk, ever_depends))
    timings["verdicts"] = time.perf_counter() - clock - t_refine
    timings["refine"] = t_refine
    timings["reachable_states"] = len(walks)

    dep_word_ptr, dep_words, dep_bits = dep_lists.arrays()
    result = MaskTables(
        pair_index=pair_index,
        pair_mask=np.array(pair_mask, dtype=np.int32),
        pair_marks=np.array(pair_marks, dtype=np.int32),
        masks=np.stack(masks) if masks else np.zeros((0, n_words), dtype=np.int32),
        marks_ptr=np.cumsum([0] + [len(m) for m in marks]).astype(np.int64),
        marks=_concat(marks, np.uint8),
        state_ptr=state_ptr,
        state_class=_concat(state_class, np.int32),
        state_lcp=_concat(state_lcp, np.int32),
        state_dep=_concat(state_dep, np.int32),
        dep_word_ptr=dep_word_ptr,
        dep_words=dep_words,
        dep_bits=dep_bits,
        class_seq_ptr=classes.seq_ptr,
        class_seq_terms=classes.seq_terms,
        class_follow=classes.follow,
        follow_ptr=follow_ptr,
        follow_terms=follow_terms,
        follow_any=follow_any,
        state_follow=state_follow.astype(np.int32),
    )
    return result, tables, indent, timings


# Classes with at least this many tokens get the branching analysis when the one-state check
# cannot decide them: deciding them offline keeps large classes out of the decode-time checks.
_REFINE_SIZE = 16


def _refine(lr, exposed, n_states: int, p: int, ranks: np.ndarray, class_arrays, memo: dict) -> np.ndarray:
    """Branching verdicts (see :func:`classify_classes`) for classes the one-state check left UNKNOWN."""
    known = memo.setdefault(p, np.full(len(class_arrays[2]), -1, dtype=np.int8))
    todo = ranks[known[ranks] < 0]
    if len(todo):
        out = np.empty(len(todo), dtype=np.int8)
        classify_classes(*lr, *exposed, n_states, p, todo, *class_arrays, out)
        known[todo] = out
    return known[ranks]


def _with_alias_columns(tables: ParseTables, lexer: LexerAutomaton, parser_term: np.ndarray,
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


def _may_follow(tables: ParseTables, lexer: LexerAutomaton, parser_term: np.ndarray, n_options: int,
                ) -> tuple[np.ndarray, np.ndarray]:
    """Which parser terminal may be accepted right after a sequence item (see :func:`walk_contextual`): per parser
    terminal, and per lexer terminal and branch option (its shifts into that option's mode only)."""
    action = tables.action
    n_columns = action.shape[1]
    live = action != ERROR
    plain = np.zeros((n_columns, n_columns), dtype=np.bool_)
    for x in range(tables.end):
        targets = np.unique(action[:, x][action[:, x] >= 0])
        plain[x] = live[targets].any(axis=0)
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
    if lexer.restart is None or lexer.contextual:
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
    return max((int(widths[np.frombuffer(t, dtype=np.uint8)].clip(0).sum()) for t in vocab.tokens if t), default=0)


def _no_check(phase: str) -> None:
    """The deadline check of a compile without a time limit."""


def _concat(parts: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)


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
