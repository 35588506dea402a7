"""The online matcher: one per generated sequence (GreatGramma Alg. 6).

A matcher's state is a lexer state (the pending, unfinished lexeme) and a persistent LR stack, and
beside them what the lexer and postlex keep: the indentation context, or the pending lexeme's count
for counted terminals (:mod:`grammask.counting`). Inside a lexeme that only the end of input could make Lark back up
from (a *late* lexer state, :class:`~grammask.automata.fallback.Fallbacks`), the matcher also keeps the reading
where it does: the earlier match emitted and the text after it lexed and parsed again; it decides only EOS.
``fill_mask`` copies the precomputed mask of ``(lexer state, top LR state)`` and adds the
token classes whose acceptance depends on the stack below, checked against the real stack.
Each accepted token pushes the previous state on a history list, so ``rollback`` is a pop and
``fork`` a shallow copy (the stacks themselves are shared, never mutated). A matcher created with
a token budget also masks every token after which no complete output fits the budget
(:mod:`grammask.budget`).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from grammask.bitmask import bitmask_words, check_row
from grammask.budget import TokenBudget
from grammask.errors import (
    BudgetUnsupportedError,
    ConfigurationError,
    MatcherStateError,
    TextRejectedError,
    TokenOutOfRangeError,
    TokenRejectedError,
)
from grammask.indentation import START as INDENT_START
from grammask.indentation import ClassCheck
from grammask.parser.kernels import (
    ALWAYS,
    UNKNOWN,
    add_marked_classes,
    check_class_tails,
    or_class_tokens,
)

if TYPE_CHECKING:
    from grammask.compiled import CompiledGrammar

_TERMINATED = -1
# Stack states handed to the compiled class check; deeper stacks fall back to Python when needed.
_STACK_VIEW = 256
# Forced text is found one byte at a time; a grammar cannot force more than this in one call.
_MAX_FORCED = 4096


def token_index(token_id: int, n_logits: int) -> int:
    """``token_id`` as an int.

    Raises :class:`TokenOutOfRangeError` if it is not an integer or not in ``[0, n_logits)``.
    """
    if type(token_id) is not int:
        try:
            token_id = operator.index(token_id)
        except TypeError:
            raise TokenOutOfRangeError(f"token id {token_id!r} is not an integer") from None
    if not 0 <= token_id < n_logits:
        raise TokenOutOfRangeError(f"token id {token_id} is out of range [0, {n_logits})")
    return token_id


def rollback_count(k: int, accepted: int) -> int:
    """``k`` as an int.

    Raises :class:`MatcherStateError` unless it is an integer in ``[0, accepted]``.
    """
    try:
        k = operator.index(k)
    except TypeError:
        raise MatcherStateError(f"cannot roll back {k!r} tokens: give a number of tokens") from None
    if not 0 <= k <= accepted:
        raise MatcherStateError(f"cannot roll back {k} tokens: {accepted} accepted so far")
    return k


class TokenSteps:
    """``accept_token``/``accept_tokens``/``validate_tokens`` for any matcher with ``advance`` and ``rollback``."""

    __slots__ = ()

    def accept_token(self, token_id: int) -> bool:
        """Like :meth:`advance` but returns False instead of raising for a disallowed token.

        Still raises :class:`TokenOutOfRangeError` for an id outside ``[0, vocab.n_logits)`` and
        :class:`MatcherStateError` after EOS.
        """
        try:
            self.advance(token_id)
        except TokenRejectedError:
            return False
        return True

    def accept_tokens(self, token_ids: Sequence[int]) -> int:
        """Accept tokens in order up to the first one not allowed; how many were accepted.

        Speculative decoding checks a draft this way and rolls back what the target model rejects.
        Raises :class:`TokenOutOfRangeError` for an id outside ``[0, vocab.n_logits)``.
        """
        for n, token_id in enumerate(token_ids):
            if not self.accept_token(token_id):
                return n
        return len(token_ids)

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        """How many leading tokens of ``token_ids`` would be accepted in order; the state is unchanged."""
        n = self.accept_tokens(token_ids)
        self.rollback(n)
        return n


class Matcher(TokenSteps):
    """Tracks one sequence's prefix and tells which tokens may come next.

    Semantics (exact, for the grammar's lexing rule and LALR parser): token ``t`` is allowed iff
    prefix + t can still be extended to a sentence's prefix: it lexes, the terminals it completes
    are accepted by the parser, and its pending lexeme can still become a terminal the parser
    accepts next (or an ignored one). EOS is allowed iff the prefix is a whole sentence.

    With ``max_tokens=N`` (a budget on the whole output, EOS included), token ``t`` is allowed
    only if a complete output within ``N`` tokens still follows it; see :mod:`grammask.budget`.
    """

    __slots__ = (
        "_budget",
        "_costs",
        "_counting",
        "_history",
        "_indenter",
        "_late",
        "_lexer",
        "_lexstate",
        "_mask",
        "_mask_key",
        "_post",
        "_rt",
        "_runner",
        "_stack",
        "compiled",
    )

    def __init__(self, compiled: CompiledGrammar, max_tokens: int | None = None, prefix: str | bytes = ""):
        """A matcher at the start of a document, or after ``prefix``; use ``compiled.matcher()`` (which
        documents what it raises)."""
        if not isinstance(prefix, (str, bytes)):
            raise ConfigurationError(f"prefix must be text (str or bytes), got {type(prefix).__name__}")
        engine = compiled._engine
        self.compiled = compiled
        self._rt = engine.view
        self._runner = engine.runner
        self._lexer = engine.lexer
        self._indenter = engine.indenter
        self._counting = engine.counting
        self._lexstate = 0
        self._stack = self._runner.initial
        self._post = INDENT_START if self._indenter is not None else None
        if self._counting is not None:
            self._post = self._lexer.start_count
        self._late: tuple = ()  # the readings kept beside a late lexer state, each (lexstate, stack, post, late)
        self._history: list[tuple[int, tuple, tuple | None, tuple]] = []
        self._mask: np.ndarray | None = None
        self._mask_key: tuple | None = None
        if self._indenter is not None and self._indenter.spec.eof_newline:
            self._lexstate, self._stack, self._post, self._late = self._state_after(b"\n")  # CPython measures line 1 too
        if prefix:
            self._lexstate, self._stack, self._post, self._late = self._state_after(
                prefix.encode() if isinstance(prefix, str) else prefix)
        self._budget = None if max_tokens is None else self._new_budget(max_tokens)
        self._costs = self._budget  # the cost rows min_tokens_to_finish uses (made on first use when unbudgeted)

    # ---- queries -------------------------------------------------------------------------

    def is_terminated(self) -> bool:
        """True once EOS has been accepted."""
        return self._lexstate == _TERMINATED

    def is_accepting(self) -> bool:
        """True iff the text so far is a whole sentence (EOS allowed now)."""
        if self._lexstate == _TERMINATED:
            return False
        return self._ends(self._lexstate, self._stack, self._post, self._late)

    def _ends(self, lexstate: int, stack, post, late: tuple) -> bool:
        """Whether the text may end in this state, or in one of the ``late`` readings kept beside it."""
        return self._accepts_end(lexstate, stack, post) or any(self._ends(*reading) for reading in late)

    def _accepts_end(self, lexstate: int, stack, post) -> bool:
        indenter = self._indenter
        if indenter is not None:
            levels, depth, width = post
            items = indenter.finish(lexstate, width)
            fed = None if items is None else indenter.feed_all(stack, levels, depth, items)
            return fed is not None and indenter.accepts_end(fed[0], fed[1])
        terms = self._rt.end_terms(lexstate)
        return terms is not None and self._runner.feed_all(stack, terms) is not None

    @property
    def lexer_state(self) -> int:
        """The lexer state of the pending lexeme (-1 once EOS is accepted)."""
        return self._lexstate

    @property
    def state_key(self) -> tuple:
        """Everything the masks after this point depend on (lexer state, stack, indentation or count context, late
        readings), hashable and equal by value."""
        return self._lexstate, self._stack, self._post, self._late

    @property
    def stack(self) -> tuple | None:
        """The LR stack as a persistent ``(state, rest)`` tuple chain, top first (equal by value, never mutated)."""
        return self._stack

    @property
    def num_tokens(self) -> int:
        """Tokens accepted so far (EOS included)."""
        return len(self._history)

    @property
    def max_tokens(self) -> int | None:
        """The token budget (EOS included), or None."""
        return None if self._budget is None else self._budget.limit

    @property
    def remaining_budget(self) -> int | None:
        """Tokens the budget still allows (EOS included), or None without a budget."""
        return None if self._budget is None else self._budget.limit - len(self._history)

    def min_tokens_to_finish(self) -> int:
        """Tokens (EOS included) of the shortest complete continuation grammask can guarantee from here.

        An upper bound of the true minimum, realised by a token sequence the matcher accepts; 0 once
        EOS is accepted; ``grammask.budget.INF`` if the pending text can no longer become a sentence.
        """
        if self._lexstate == _TERMINATED:
            return 0
        return self._cost_model().min_tokens(self._lexstate, self._stack, self._post)

    def _cost_model(self) -> TokenBudget:
        if self._costs is None:
            self._costs = self._new_budget(None)
        return self._costs

    def _new_budget(self, max_tokens: int | None) -> TokenBudget:
        grammar = self.compiled.grammar
        if self._counting is not None:
            raise BudgetUnsupportedError(
                f"grammar {grammar.name!r} has counted terminals (length bounds kept beside the lexer state): token "
                f"budgets do not count them yet"
            )
        rt = self.compiled._budget_runtime()
        return TokenBudget(rt, max_tokens, self._lexstate, self._stack, self.compiled.grammar.name, self._post)

    def next_token_costs(self) -> np.ndarray:
        """Per token id: :meth:`min_tokens_to_finish` after it, -1 where it is not allowed (budget included).

        EOS gets 0 where it is allowed. Costs every token group of the lexer state against the stack:
        milliseconds, for search heuristics and tests rather than every decoding step.
        """
        n = self.compiled.vocab.n_logits
        if self._lexstate == _TERMINATED:
            return np.full(n, -1, dtype=np.int64)
        out = self._cost_model().next_token_costs(self._lexstate, self._stack, len(self._history), n, self._post)
        if self.is_accepting() and (self._budget is None or len(self._history) < self._budget.limit):
            out[list(self.compiled.vocab.eos_ids)] = 0
        return out

    # ---- masks ---------------------------------------------------------------------------

    def fill_mask(self, row: np.ndarray) -> None:
        """Write the allowed-token bitmask into ``row`` (int32 words, xgrammar/vLLM layout).

        Raises :class:`ConfigurationError` unless ``row`` is a writable 1-D int32 array of
        ``bitmask_words(vocab.n_logits)`` words (and :class:`MatcherStateError` on an internal error: no mask table
        for the current state).
        """
        rt = self._rt
        check_row(row, rt.n_logits)
        if self._lexstate == _TERMINATED:
            row[:] = 0
            row[rt.eos_words] |= rt.eos_bits
            return
        if self._memo_valid():
            row[:] = self._mask
            if self._budget is not None:
                self._budget.restrict(row, self._lexstate, self._stack, len(self._history), self._post)
            return
        stack = self._stack
        if self._counting is not None and self._counting.near(self._lexstate, self._post):
            self._near_mask(row, stack)
        elif not self._table_mask(row, self._lexstate, stack):
            raise MatcherStateError(
                f"internal error: no mask table for lexer state {self._lexstate} with LR state {stack[0]}"
            )
        if self._ends(self._lexstate, stack, self._post, self._late):
            row[rt.eos_words] |= rt.eos_bits
        self._mask = row.copy()
        self._mask_key = (self._lexstate, stack, self._post, self._late)
        if self._budget is not None:
            self._budget.restrict(row, self._lexstate, self._stack, len(self._history), self._post)

    def _table_mask(self, row: np.ndarray, lexstate: int, stack) -> bool:
        """Write the tokens allowed in ``lexstate`` with ``stack`` (EOS aside) into ``row``; False if no decoding
        reaches that pair (``row`` untouched)."""
        rt = self._rt
        pair = rt.pairs(lexstate)[stack[0]]
        if pair < 0:
            return False
        np.copyto(row, rt.masks[rt.pair_mask[pair]])
        if rt.pair_has_marks[pair]:
            self._add_depends(row, stack, lexstate, rt.pair_marks[pair])
        return True

    def _near_mask(self, row: np.ndarray, stack) -> None:
        """:meth:`_table_mask` for a counted lexeme near its level's end: each level's copy decides the tokens
        that take the count into that level (:mod:`grammask.counting`)."""
        counting = self._counting
        row[:] = 0
        part = np.empty_like(row)
        for copy, lo, hi in counting.levels(self._lexstate, self._post):
            if self._table_mask(part, copy, stack):
                row |= part & counting.tokens_adding(self._lexstate, lo, hi)

    def _memo_valid(self) -> bool:
        """Whether the mask kept from the last fill is this state's."""
        key = self._mask_key
        return (key is not None and key[0] == self._lexstate and key[1] is self._stack and key[2] == self._post
                and key[3] is self._late)

    def _add_depends(self, row: np.ndarray, stack, lexstate: int, marks: np.ndarray) -> None:
        """OR in the marked classes the real stack accepts (compiled check; Python for very deep stacks)."""
        rt = self._rt
        classes, lcp, deps = rt.state_classes[lexstate]
        states = _top_states(stack, _STACK_VIEW)
        unknown = np.empty(len(classes), dtype=np.int32)
        n_unknown = add_marked_classes(row, *rt.lr, states, classes, lcp, deps, marks, *rt.class_tables,
                                       *rt.dep_bits, unknown)
        self._add_unknown_classes(row, stack, unknown[:n_unknown], lexstate)

    def _add_unknown_classes(self, row: np.ndarray, stack, unknown: np.ndarray, lexstate: int | None = None) -> None:
        """OR in the classes ``unknown`` (indices the compiled check left open) of ``lexstate`` (default: the
        matcher's) the real stack accepts."""
        rt = self._rt
        lexstate = self._lexstate if lexstate is None else lexstate
        classes = rt.state_python(lexstate)
        if self._indenter is not None:
            self._add_context_classes(row, stack, unknown)
            return
        taken = []
        for k in unknown.tolist():
            seq, follow, dep = classes[k]
            after = self._runner.feed_all(stack, seq)
            if after is not None and self._follow_ok(after, None, follow):
                taken.append(dep)
        if taken:
            or_class_tokens(row, *rt.dep_bits, np.array(taken, dtype=np.int64))

    def _add_context_classes(self, row: np.ndarray, stack, unknown: np.ndarray) -> None:
        """:meth:`_add_unknown_classes` with indentation: the classes that start with a newline are decided per
        newline (the matcher feeds it with its context, the compiled check takes the rest of each sequence);
        the others, and what the compiled check leaves open, one by one."""
        rt = self._rt
        classes = rt.state_python(self._lexstate)
        check = ClassCheck(self._indenter, stack, self._post)
        todo = np.zeros(len(classes), dtype=bool)
        todo[unknown] = True
        taken = []
        spec = self._indenter.spec
        for first, local, ranks, tail_lcp, modes in rt.context_groups(self._lexstate, spec.base, spec.stride):
            if not todo[local].any():
                continue
            todo[local] = False
            fed = check.step(first)
            if fed is None:
                continue
            if spec.stride > 1:  # the classes whose next lexeme's modes hold the state on top
                keep = self._indenter.mode_ok(fed[0][0], modes)
                if not keep.any():
                    continue
                local, ranks, tail_lcp = local[keep], ranks[keep], _kept_lcp(tail_lcp, np.flatnonzero(keep))
            verdicts = np.empty(len(local), dtype=np.int8)
            check_class_tails(*rt.lr, _top_states(fed[0], _STACK_VIEW), ranks, tail_lcp, *rt.class_tables, verdicts)
            for k, v in zip(local.tolist(), verdicts.tolist(), strict=True):
                seq, follow, dep = classes[k]
                if v == ALWAYS or (v == UNKNOWN and check.accepts(seq, follow)):
                    taken.append(dep)
        for k in np.flatnonzero(todo).tolist():
            seq, follow, dep = classes[k]
            if check.accepts(seq, follow):
                taken.append(dep)
        if taken:
            or_class_tokens(row, *rt.dep_bits, np.array(taken, dtype=np.int64))

    def _follow_ok(self, stack, context, follow: tuple[tuple[int, ...], bool]) -> bool:
        """Whether the pending lexeme (follow set ``follow``) can still become a terminal ``stack`` takes
        (``context``: the indentation context's levels and depth, None without indentation)."""
        if context is not None:
            return self._indenter.follow_ok(stack, *context, follow)
        terms, anything = follow
        return anything or any(self._runner.feed(stack, x) is not None for x in terms)

    def allowed_tokens(self) -> np.ndarray:
        """The allowed token ids, sorted (a convenience built on :meth:`fill_mask`)."""
        n = self.compiled.vocab.n_logits
        row = np.zeros(bitmask_words(n), dtype=np.int32)
        self.fill_mask(row)
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:n]
        return np.nonzero(bits)[0]

    # ---- state changes -------------------------------------------------------------------

    def advance(self, token_id: int) -> None:
        """Accept one token.

        Raises :class:`TokenRejectedError` (state unchanged) if it is not allowed,
        :class:`TokenOutOfRangeError` for an id outside ``[0, vocab.n_logits)``, and
        :class:`MatcherStateError` after EOS.
        """
        vocab = self.compiled.vocab
        token_id = token_index(token_id, vocab.n_logits)
        if self._lexstate == _TERMINATED:
            raise MatcherStateError("the matcher has already accepted EOS; roll back or start a new matcher")
        budget = self._budget
        if budget is not None and len(self._history) >= budget.limit:
            raise TokenRejectedError(token_id, f"is not allowed: the budget of {budget.limit} tokens is used up")
        if token_id in vocab.eos_ids:
            if not self.is_accepting():
                raise TokenRejectedError(token_id, "(EOS) is not allowed: the output is not a complete sentence yet")
            self._push(_TERMINATED, self._stack, self._post, ())
            return
        new = self._step(token_id)
        if new is None:
            raise TokenRejectedError(
                token_id, f"({_show(vocab.tokens[token_id] if token_id < len(vocab.tokens) else None)}) is not allowed here"
            )
        if budget is not None and not budget.allows(token_id, self._lexstate, self._stack, len(self._history), new[0],
                                                    new[1], self._post, new[2]):
            raise TokenRejectedError(
                token_id,
                f"({_show(vocab.tokens[token_id])}) is not allowed: no complete output would fit "
                f"the budget of {budget.limit} tokens after it",
            )
        self._push(*new)

    def _step(self, token_id: int):
        data = self.compiled.vocab.tokens[token_id] if token_id < len(self.compiled.vocab.tokens) else None
        if not data:
            return None
        return self._advance(self._lexstate, self._stack, self._post, self._late, data)

    def _advance(self, lexstate: int, stack, post, late: tuple, data: bytes):
        """:meth:`_read` with the late readings (see the module doc): (lexer state, stack, indentation context,
        late readings) after ``data``, or None.

        Entering a late state from the match it copies starts the reading where the lexeme ends before that byte;
        leaving the late states ends them (the long lexeme is complete)."""
        marks = self._lexer.late
        new = self._read(lexstate, stack, post, data)
        if new is None or marks is None or marks[new[0]] < 0:  # no late state at the end: no reading to keep
            return None if new is None else (*new, ())
        for b in data:
            byte = bytes((b,))
            new = self._read(lexstate, stack, post, byte)
            if new is None:
                return None
            if marks[new[0]] < 0:
                late = ()
            elif marks[lexstate] < 0:
                late = self._ended(lexstate, stack, post, byte)
            else:
                late = tuple(r for r in (self._advance(*reading, byte) for reading in late) if r is not None)
            lexstate, stack, post = new
        return lexstate, stack, post, late

    def _ended(self, lexstate: int, stack, post, byte: bytes) -> tuple:
        """The reading where the match in ``lexstate`` is emitted before ``byte`` and ``byte`` starts the next
        lexeme (as a tuple of late readings: empty if rejected)."""
        lexer = self._lexer
        term = int(lexer.accept[lexstate])
        stack = self._feed_lexer_terminals(stack, [term])
        if stack is None:
            return ()
        again = lexer.restart_after(lexstate, stack[0])
        if again < 0:
            return ()
        new = self._read(again, stack, post, byte)
        return () if new is None else ((*new, ()),)

    def _read(self, lexstate: int, stack, post, data: bytes):
        """The (lexer state, stack, indentation context) after ``data``, or None if no sentence can follow it."""
        indenter = self._indenter
        if indenter is not None:
            read = indenter.read(lexstate, stack, *post, data)
            if read is None:
                return None
            lexstate, stack, levels, depth, width = read
            if not self._pending_ok(lexstate, stack, (levels, depth, width)):
                return None
            return lexstate, stack, (levels, depth, width)
        if self._lexer.contextual:
            lexed = self._lex_contextual(lexstate, stack, data)
            if lexed is None:
                return None
            lexstate, stack = lexed
        elif self._counting is not None:
            lexed = self._lexer.step_counted(lexstate, post, data)
            if lexed is None:
                return None
            emitted, lexstate, post = lexed
            stack = self._feed_lexer_terminals(stack, emitted)
        else:
            lexed = self._lexer.step(lexstate, data)
            if lexed is None:
                return None
            emitted, lexstate = lexed
            stack = self._feed_lexer_terminals(stack, emitted)
        if stack is None or not self._pending_ok(lexstate, stack, None):
            return None
        return lexstate, stack, post

    def _pending_ok(self, lexstate: int, stack, post) -> bool:
        """Whether the lexeme pending in ``lexstate`` can still become a terminal ``stack`` takes (``post``: the
        indentation context, None without); for a fallback state (Lark's backing up, ``LexerAutomaton.alt``) also
        where its long lexeme dies right now and the text after the earlier match lexes on."""
        follow = self._rt.state_follow
        context = None if post is None else post[:2]
        if self._follow_ok(stack, context, follow[lexstate]):
            return True
        alt = self._lexer.alt
        if alt is None or alt[lexstate] < 0:
            return False
        if post is None:
            fell = self._feed_lexer_terminals(stack, self._lexer.fallen(lexstate))
            return fell is not None and self._follow_ok(fell, None, follow[alt[lexstate]])
        fell = self._indenter.fallen(lexstate, stack, *post)
        return fell is not None and self._follow_ok(fell[0], fell[1:], follow[alt[lexstate]])

    def _state_after(self, data: bytes):
        state = self._advance(self._lexstate, self._stack, self._post, self._late, data)
        if state is not None:
            return state
        lexstate, stack, post, late = self._lexstate, self._stack, self._post, self._late
        for i in range(len(data)):  # a byte that no sentence can follow fails every longer text too
            state = self._advance(lexstate, stack, post, late, data[i : i + 1])
            if state is None:
                raise TextRejectedError(
                    i, f"the prefix cannot begin a sentence of the grammar: it fails at byte {i} ({data[i:i + 1]!r}, "
                    f"after {data[max(0, i - 20):i]!r})"
                )
            lexstate, stack, post, late = state
        raise MatcherStateError("internal error: a prefix rejected whole was accepted byte by byte")

    def _lex_contextual(self, lexstate: int, stack, data: bytes):
        """Lex and parse ``data`` together (the contextual lexer's mode follows the stack): (lexer state, stack)
        after it, or None if rejected."""
        lexer = self._lexer
        trans, accept, restart = lexer._lists
        bans = lexer.bans
        parser_term = self.compiled._engine.parser_term
        feed = self._runner.feed
        parting = lexer.parting
        for b in data:
            nxt = trans[lexstate][b]
            while nxt < 0:  # emit; a fallback's restart may emit in turn (LexerAutomaton.alt)
                term = accept[lexstate]
                if term < 0 or (bans is not None and b in bans[lexstate]):
                    return None
                if parser_term[term] >= 0:
                    stack = feed(stack, int(parser_term[term]))
                    if stack is None:
                        return None
                again = restart[lexstate]
                if again < 0:  # a branch: the mode of the state the stack reached
                    again = lexer.restart_after(lexstate, stack[0])
                    if again < 0:
                        return None
                lexstate = again
                nxt = trans[again][b]
            if parting is not None and parting[nxt] >= 0:  # the mode after the pending match picks how the rest lexes
                term = parting[nxt]
                fed = stack if parser_term[term] < 0 else feed(stack, int(parser_term[term]))
                nxt = lexer.member(nxt, -1 if fed is None else int(lexer.lr_mode[fed[0]]))
            lexstate = nxt
        return lexstate, stack

    def _feed_lexer_terminals(self, stack, lexer_terminals):
        parser_term = self.compiled._engine.parser_term
        feed = self._runner.feed
        for t in lexer_terminals:
            pt = parser_term[t]
            if pt >= 0:
                stack = feed(stack, int(pt))
                if stack is None:
                    return None
        return stack

    def _push(self, lexstate: int, stack, post, late: tuple) -> None:
        self._history.append((self._lexstate, self._stack, self._post, self._late))
        self._lexstate = lexstate
        self._stack = stack
        self._post = post
        self._late = late

    def forced_text(self) -> bytes:
        """The longest byte string every continuation must start with (jump-forward text).

        Empty where the output may end here, where several bytes may come next, and after EOS.
        Exact for the grammar's lexing rule and parser, found one byte at a time (at most
        4096 bytes a call).
        """
        if self._lexstate == _TERMINATED:
            return b""
        lexstate, stack, post, late = self._lexstate, self._stack, self._post, self._late
        out = bytearray()
        lexer = self._lexer
        while len(out) < _MAX_FORCED and not self._ends(lexstate, stack, post, late):
            lexable = lexer.trans[lexstate] >= 0
            if lexer.accept[lexstate] >= 0:
                lexable |= (lexer.trans[lexer.next_starts(lexstate)] >= 0).any(axis=0)
            nexts = []
            for b in np.flatnonzero(lexable).tolist():
                state = self._advance(lexstate, stack, post, late, bytes((b,)))
                if state is not None:
                    nexts.append((b, state))
                    if len(nexts) > 1:
                        break
            if len(nexts) != 1:
                break
            b, (lexstate, stack, post, late) = nexts[0]
            out.append(b)
        return bytes(out)

    def forced_tokens(self) -> list[int]:
        """Tokens the tokenizer would write for the start of :meth:`forced_text`, which may be appended at once.

        The tokenizer's encoding of the forced text, without its last token (which might merge with
        text that follows), keeping only tokens whose bytes spell the forced text exactly and that this
        matcher accepts in order: an empty list where none qualifies (e.g. a tokenizer that puts a space
        before the text it encodes).
        """
        forced = self.forced_text()
        text = forced.decode("utf-8", errors="ignore")
        if not text:
            return []
        vocab = self.compiled.vocab
        ids = vocab.encode(text)[:-1]
        if not forced.startswith(vocab.decode(ids)):
            return []
        probe = self.fork()
        return ids[: probe.accept_tokens(ids)]

    def rollback(self, k: int = 1) -> None:
        """Undo the last ``k`` accepted tokens.

        Raises :class:`MatcherStateError` if fewer were accepted or ``k`` is negative (state unchanged).
        """
        k = rollback_count(k, len(self._history))
        if k == 0:
            return
        self._lexstate, self._stack, self._post, self._late = self._history[-k]
        del self._history[-k:]

    def fork(self) -> Matcher:
        """An independent matcher in the same state (shares the immutable stacks)."""
        other = Matcher.__new__(Matcher)
        for name in Matcher.__slots__:
            setattr(other, name, getattr(self, name))
        other._history = list(self._history)
        return other

    def unbudgeted_fork(self) -> Matcher:
        """:meth:`fork` without the budget: its masks and steps are the grammar's alone (its completion costs stay)."""
        other = self.fork()
        other._budget = None
        return other

    def reset(self) -> None:
        """Back to the start of a document."""
        self.rollback(len(self._history))


def _kept_lcp(lcp: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """The common prefixes between consecutive sequences of a list (``lcp[i]``: with the one before) once only the
    ones at sorted indices ``kept`` remain: the least over the stretch each skips."""
    out = np.minimum.reduceat(lcp[: kept[-1] + 1], np.concatenate([[0], kept[:-1] + 1]))
    out[0] = 0
    return out


def _top_states(stack, limit: int) -> np.ndarray:
    """The top ``limit`` states of a persistent stack, bottom first."""
    return np.array(_top_list(stack, limit), dtype=np.int32)


def _top_list(stack, limit: int) -> list[int]:
    """:func:`_top_states` as a list."""
    states = []
    while stack is not None and len(states) < limit:
        states.append(stack[0])
        stack = stack[1]
    states.reverse()
    return states


def _show(data: bytes | None) -> str:
    return "a special token" if data is None else repr(data)
