"""Canonical matchers: a grammar matcher whose tokens also stay the tokenizer's own encoding of the text.

:class:`CanonicalMatcher` walks a plain :class:`~grammask.matcher.Matcher` and a state of the tokenizer's
canonical successor relation (:mod:`grammask.canonical`) side by side. Its mask is the grammar's mask AND
the relation's allowed tokens, with EOS only where the grammar accepts and the relation may end.

For a regex grammar (one terminal, as :meth:`Grammar.from_regex <grammask.grammar.ir.Grammar>` makes)
the matcher's state is the lexer state, so the pairs (lexer state, relation state) are the states of the
product of the regex's token-level automaton with the relation (CartesianMerge, Alg. 5-6 of the seed
paper). :class:`RegexProduct` keeps in the mask only tokens that lead to a pair from which an accepting
pair (a complete match that the relation may end on) is reachable, so a canonical regex matcher never
reaches a dead end. The product is explored lazily: a depth-first search per pair, tokens in order of the
bytes left to a match, remembered once decided. A search that would expand more than ``search_limit``
pairs, or go 400 tokens deep, gives up and keeps the token (counted in ``undecided``), which only happens
for languages whose canonical tokenizations never settle (long runs inside one pre-token). A mask with
more than ``mask_searches`` tokens to search from (a wide character class before a required suffix) leaves
the rest out, for time: it then holds only tokens proven alive, a subset of those ``advance`` takes. The
exactness holds where nothing is undecided or left out; the no-dead-end guarantee where nothing is undecided.

Other grammars get the mask AND the relation, less the tokens :class:`ForcedTextCheck` finds dead (a
keyword left unfinished that only non-canonical tokens could finish), without a full guarantee: a token
may still be allowed after which every way on the grammar allows is non-canonical (tests measure how
often on JSON and C).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from grammask.bitmask import bitmask_words, bool_to_bitmask, check_row
from grammask.canonical import NOT_CANONICAL, CanonicalRelation
from grammask.canonical_budget import CanonicalBudget, without_ids
from grammask.errors import (
    BudgetError,
    CanonicalError,
    MatcherStateError,
    TokenRejectedError,
)
from grammask.matcher import Matcher, TokenSteps, token_index
from grammask.parser.stack import StackNumbers
from grammask.spanner import SequenceTable, walk_alive

if TYPE_CHECKING:
    from grammask.compiled import CompiledGrammar

_REMEMBERED_MASKS = 4096
_REMEMBERED_VERDICTS = 1 << 17  # the dead-end check's yes/no answers: small, and a document asks ~10^5 of them
# With a product, a mask of at most this many grammar tokens is checked token by token (``step``) rather
# than ANDed with the relation's whole allowed set, which a new relation state pays for once.
_FEW_TOKENS = 4096
# A product mask with more candidates than this reads the relation's may-end set instead of stepping each.
_FEW_STEPS = 64
_MAX_DEPTH = 400  # product pairs on one search path (Python recursion)
_NARROW_DEPTH = 8  # tokens ForcedTextCheck follows through unfinished lexemes
_RECENT = 8  # continuations ForcedTextCheck tries first


class _Undecided(Exception):
    """A product search went past its limit."""


class MaskRows:
    """Whole canonical mask rows by (grammar state, relation state), the last ``limit`` made, shared by a grammar's
    canonical matchers: a state met again costs a copy (16 KB a row on Llama-3's vocabulary). Reading needs no
    lock (dict lookups); :meth:`put` is called under the relation's lock. A key names the LR stack by its
    :class:`~grammask.parser.stack.StackNumbers` number, so a lookup neither hashes nor compares a stack chain.
    """

    def __init__(self, limit: int = 512, nodes: int = 16_384):
        self._rows: dict[tuple, np.ndarray] = {}
        self._limit = limit
        self._stacks = StackNumbers(nodes)

    def key(self, matcher: Matcher, r: int) -> tuple:
        """The key of ``matcher``'s state with relation state ``r``."""
        lexstate, stack, post, late = matcher.state_key
        return lexstate, self._stacks.number(stack), post, late, r

    def get(self, key: tuple) -> np.ndarray | None:
        """The row made for ``key``, or None."""
        return self._rows.get(key)

    def put(self, key: tuple, row: np.ndarray) -> None:
        """Remember a copy of ``row`` for ``key`` (the oldest is forgotten past ``limit``)."""
        self._rows[key] = row.copy()
        if len(self._rows) > self._limit:
            del self._rows[next(iter(self._rows))]


class RegexProduct:
    """The product of a regex grammar's token-level automaton with a canonical relation, explored on demand.

    ``alive(q, r)``: whether from lexer state ``q`` and relation state ``r`` some token sequence reaches a
    complete match the relation may end on. ``restrict(row, q, r)`` clears the tokens of a mask row that
    lead to dead pairs. ``pairs`` counts the pairs decided so far, ``undecided`` the searches given up.
    One mask searches from at most ``mask_searches`` tokens (those that do not end a match the relation may
    end on, in id order: BPE's frequent tokens first; a step and a search cost 0.1-1 ms each, and a wide
    class such as ``\\w+`` before a required suffix has tens of thousands), more only until one is kept;
    the tokens past them are left out (counted in ``left_out``): the mask never holds a token that is not
    proven alive, and :meth:`CanonicalMatcher.advance` still takes a left-out token that is.
    """

    def __init__(self, compiled: CompiledGrammar, relation: CanonicalRelation, search_limit: int = 20_000,
                 mask_searches: int = 512):
        engine = compiled._engine
        self._lexer = engine.lexer
        self._engine = engine
        self._relation = relation
        self._search_limit = search_limit
        self._empty_ok = compiled.matcher().is_accepting()
        self._distance = _distance_to_accept(engine.lexer.trans, engine.lexer.accept)
        self._succ: dict[int, tuple[list[int], dict[int, int], np.ndarray, np.ndarray]] = {}
        self._alive: dict[tuple[int, int], bool] = {}
        self._masks: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self.undecided = 0
        self.left_out = 0
        self.mask_searches = mask_searches
        self.rows = MaskRows()

    @staticmethod
    def applies(compiled: CompiledGrammar) -> bool:
        """Whether ``compiled`` is a regex grammar: one terminal, nothing ignored, ``start`` is it or empty."""
        g = compiled.grammar
        return (len(g.terminals) <= 1 and not g.ignore
                and all(r.lhs == g.start and r.rhs in ((), tuple(t.name for t in g.terminals)) for r in g.rules))

    @property
    def pairs(self) -> int:
        """How many (lexer state, relation state) pairs have been decided."""
        return len(self._alive)

    def accepting(self, q: int, r: int) -> bool:
        """Whether the text may end at lexer state ``q`` and relation state ``r``."""
        done = self._empty_ok if q == 0 else self._lexer.accept[q] >= 0
        return bool(done) and self._relation.can_end(r)

    def restrict(self, row: np.ndarray, q: int, r: int) -> None:
        """Clears, in a grammar mask row (maybe already ANDed with the relation), the tokens that are not canonical
        steps from ``r`` or lead to dead pairs."""
        key = (q, r)
        keep = self._masks.get(key)
        if keep is None:
            bits = np.unpackbits(row.view(np.uint8), bitorder="little").astype(bool)
            candidates = np.flatnonzero(bits)
            after = self._after(q, candidates)  # -1: not read from q (EOS, which the caller sets itself)
            complete = np.zeros(len(candidates), dtype=bool)  # a complete match the relation may end on: kept
            if len(candidates) > _FEW_STEPS:  # the relation's answer for every token beats many steps
                ends = np.unpackbits(self._relation.ending_words(r).view(np.uint8), bitorder="little").astype(bool)
                inside = (after >= 0) & (candidates < len(ends))
                complete[inside] = (self._lexer.accept[after[inside]] >= 0) & ends[candidates[inside]]
            kept = self.accepting(q, r) or bool(complete.any())  # EOS, or one of those
            rest = np.flatnonzero(~complete)
            searched = 0
            for i in rest.tolist():
                if searched >= self.mask_searches and kept:
                    break
                searched += 1
                t, q2 = int(candidates[i]), int(after[i])
                r2 = NOT_CANONICAL if q2 < 0 else self._relation.step(r, t)
                bits[t] = r2 != NOT_CANONICAL and self.alive(q2, r2)
                kept = kept or bits[t]
            unsearched = rest[searched:]  # past this mask's searches: never kept unproven
            bits[candidates[unsearched]] = False
            self.left_out += int((after[unsearched] >= 0).sum())
            keep = bool_to_bitmask(bits)[: row.shape[-1]]
            self._masks[key] = keep
            if len(self._masks) > _REMEMBERED_MASKS:
                self._masks.popitem(last=False)
        else:
            self._masks.move_to_end(key)
        row &= keep

    def successors(self, q: int) -> tuple[list[int], dict[int, int]]:
        """The tokens readable from lexer state ``q`` without ending the match, nearest to a match first, and
        each one's next lexer state."""
        found = self._succ.get(q)
        if found is None:
            trie = self._engine.trie
            seqs = SequenceTable(max(1, len(self._lexer.terminals)))
            entries, seq, end = walk_alive(trie, self._lexer.trans, self._lexer.accept, self._engine.parser_term,
                                           q, seqs, restart=self._lexer.restart)
            keep = seq == 0
            ids, ends = trie.token_ids[entries[keep]], end[keep]
            order = np.lexsort((ids, self._distance[ends]))
            by_id = np.argsort(ids, kind="stable")
            found = (ids[order].tolist(), dict(zip(ids.tolist(), ends.tolist())), ids[by_id], ends[by_id])
            self._succ[q] = found
        return found[0], found[1]

    def _after(self, q: int, tokens: np.ndarray) -> np.ndarray:
        """Per token of ``tokens``: the lexer state it leaves from ``q`` (-1 where it is not read from ``q``)."""
        self.successors(q)
        ids, ends = self._succ[q][2:]
        at = _positions(ids, tokens)
        out = np.full(len(tokens), -1, dtype=np.int64)
        out[at >= 0] = ends[at[at >= 0]]
        return out

    def token_groups(self, q: int) -> list[list[int]]:
        """The tokens readable from lexer state ``q``, in groups that leave the same lexer state."""
        groups: dict[int, list[int]] = {}
        for t, q2 in self.successors(q)[1].items():
            groups.setdefault(q2, []).append(t)
        return list(groups.values())

    def alive(self, q: int, r: int) -> bool:
        """Whether an accepting pair is reachable from ``(q, r)`` (True when the search gives up)."""
        found = self._alive.get((q, r))
        if found is not None:
            return found
        try:
            return self._visit((q, r), {}, [], [self._search_limit])[0]
        except _Undecided:
            self.undecided += 1
            return True

    def _visit(self, node: tuple[int, int], index: dict, order: list, budget: list[int]) -> tuple[bool, int]:
        """Tarjan-style search: (alive, lowest index on the path it reached); dead pairs are remembered per
        strongly connected part, once its root is done."""
        found = self._alive.get(node)
        if found is not None:
            return found, len(order) + 1
        if node in index:
            return False, index[node]
        q, r = node
        if self.accepting(q, r):
            self._alive[node] = True
            return True, len(order) + 1
        budget[0] -= 1
        if budget[0] < 0 or len(order) >= _MAX_DEPTH:
            raise _Undecided
        me = index[node] = len(order)
        order.append(node)
        low = me
        tokens, targets = self.successors(q)
        for t in tokens:
            r2 = self._relation.step(r, t)
            if r2 == NOT_CANONICAL:
                continue
            ok, reached = self._visit((targets[t], r2), index, order, budget)
            if ok:
                self._alive[node] = True
                for other in order[me:]:
                    del index[other]
                del order[me:]
                return True, len(order) + 1
            low = min(low, reached)
        if low == me:
            for other in order[me:]:
                self._alive[other] = False
                del index[other]
            del order[me:]
        return False, low


class ForcedTextCheck:
    """For any grammar: tokens after which every continuation the grammar allows soon stops being canonical.

    For each token ``t`` of a mask (one probe per group of tokens that leave the same grammar state;
    groups of more than ``probes`` tokens, such as the contents of a string, are not probed), ``restrict``
    asks the grammar matcher which tokens it allows after ``t`` (remembered per grammar state) and
    whether any is a canonical step: the ``few`` found lately and the first ``few`` in order one by one, then
    all the others at once (:meth:`~grammask.canonical.CanonicalRelation.allowed_among`). Where none is, or
    each one that is leads again to a narrow state and is dead in turn, ``t`` is a dead end and is cleared. A
    narrow state is one where the pending lexeme cannot end as a terminal the parser accepts (``" fals"`` in
    JSON; ``"sta"`` at the top of a C file, where only ``static`` or ``struct`` may come; ``"n"``, ``"ul"``
    before ``"l"``: ``null`` is one token), or where the grammar forces the next bytes (a schema's ``{`` before
    its one key ``"ssid"``, where the tokenizer writes ``{"``); the search goes up to 8 tokens deep. So JSON's
    ``"}"`` ``"\n"`` + ``"\n"`` is cleared (only whitespace or the end may follow, and the tokenizer writes
    ``"\n\n"`` at the end of a text); a string closed by ``'"'`` where only ``'",'`` or ``'"}'`` could
    follow; a lone ``" "`` after white space where the grammar wants a value next (SmolLM2 writes the space
    with the value: `` {``); and Llama-3's ``"0"`` where a date's year needs three more digits (it writes
    digits in threes). Sound (it clears only dead ends) but not complete: dead ends further away (a string
    that only a non-canonical token could close after many tokens, say) stay. :meth:`rejects` gives the same
    verdict for one token. Remembered per (grammar state, relation state); ``cleared`` counts the tokens
    found dead.
    """

    def __init__(self, compiled: CompiledGrammar, relation: CanonicalRelation, few: int = 16, probes: int = 2048):
        engine = compiled._engine
        self._engine = engine
        self._runner = engine.runner
        # A group's tokens leave one grammar state unless an indenter, a count or a late reading tells them apart.
        self._exact_groups = engine.indenter is None and engine.lexer.counter is None and engine.lexer.late is None
        self._relation = relation
        self._few = few
        self._probes = probes
        self._eos = frozenset(compiled.vocab.eos_ids)
        self._by_end: dict[int, list[tuple[int, tuple[int, ...], list[int]]]] = {}
        self._sizes: dict[int, np.ndarray] = {}
        self._n_tokens = compiled.vocab.n_logits
        self._allowed_memo: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._dead_memo: OrderedDict[tuple, bool] = OrderedDict()
        self._verdicts: OrderedDict[tuple, list[int]] = OrderedDict()
        self._steps: OrderedDict[tuple, Matcher | None] = OrderedDict()
        self.cleared = 0
        self._recent: list[int] = []  # canonical continuations found lately: tried first
        self._last_among: tuple[np.ndarray, tuple[int, ...], list[int]] | None = None
        self.rows = MaskRows()

    def restrict(self, row: np.ndarray, matcher: Matcher, r: int) -> None:
        """Clears, in a mask row of ``matcher`` at relation state ``r``, the tokens found to be dead ends.

        Remembered per (grammar state, relation state): ``Matcher.state_key``, equal by value.
        """
        key = (matcher.state_key, r)
        dead = self._verdicts.get(key)
        if dead is None:
            dead = []
            for _, terminals, tokens in self._tokens_by_end(matcher.lexer_state):
                if self._exact_groups and terminals and self._runner.feed_all(matcher.stack, terminals) is None:
                    continue
                present = _set_in(row, tokens)
                if not present or len(tokens) > self._probes:
                    continue
                for probe, same in self._by_state(matcher, present):
                    allowed = self._allowed(probe)
                    for t in same:
                        after = self._relation.step(r, t)
                        if after != NOT_CANONICAL and self._dead(probe, after, _NARROW_DEPTH, allowed):
                            dead.append(t)
                            self.cleared += 1
            self._verdicts[key] = dead
            if len(self._verdicts) > _REMEMBERED_MASKS:
                self._verdicts.popitem(last=False)
        else:
            self._verdicts.move_to_end(key)
        for t in dead:
            row[t >> 5] &= ~np.int32(np.uint32(1 << (t & 31)).view(np.int32))

    def _by_state(self, matcher: Matcher, tokens: list[int]) -> list[tuple[Matcher, list[int]]]:
        """``tokens`` (of one group) split by the grammar state each leaves, with a matcher in that state."""
        if self._exact_groups:
            probe = matcher.unbudgeted_fork()
            probe.advance(tokens[0])
            return [(probe, tokens)]
        found: dict[tuple, tuple[Matcher, list[int]]] = {}
        for t in tokens:
            probe = matcher.unbudgeted_fork()
            probe.advance(t)
            found.setdefault(probe.state_key, (probe, []))[1].append(t)
        return list(found.values())

    def rejects(self, matcher: Matcher, r: int, token_id: int) -> bool:
        """Whether :meth:`restrict` clears ``token_id`` (a canonical step from ``r``) at ``matcher``'s state: the same
        verdict, for one token, without a mask.

        Raises :class:`~grammask.errors.TokenRejectedError` when the grammar does not allow ``token_id``.
        """
        dead = self._verdicts.get((matcher.state_key, r))
        if dead is not None:
            return token_id in dead
        if self._group_sizes(matcher.lexer_state)[token_id] > self._probes:
            return False
        probe = matcher.unbudgeted_fork()
        probe.advance(token_id)
        allowed = self._allowed(probe)
        after = self._relation.step(r, token_id)
        return after != NOT_CANONICAL and self._dead(probe, after, _NARROW_DEPTH, allowed)

    def _dead(self, probe: Matcher, r: int, depth: int, allowed: np.ndarray | None = None) -> bool:
        """Whether no canonical continuation ends from grammar state ``probe`` (``allowed``: its :meth:`_allowed`, if
        known) and relation state ``r``, as far as narrow states go (``depth`` more tokens); False where it cannot tell.
        Remembered per (grammar state, relation state, depth): runs of whitespace meet the same ones often."""
        key = (probe.state_key, r, depth)
        found = self._dead_memo.get(key)
        if found is None:
            found = self._dead_memo[key] = self._search_dead(probe, r, depth, allowed)
            if len(self._dead_memo) > _REMEMBERED_VERDICTS:
                self._dead_memo.popitem(last=False)
        return found

    def _search_dead(self, probe: Matcher, r: int, depth: int, allowed: np.ndarray | None) -> bool:
        """:meth:`_dead`, not remembered."""
        if probe.is_accepting() and self._relation.can_end(r):
            return False
        if allowed is None:
            allowed = self._allowed(probe)
        recent = self._recent_among(allowed)
        first = allowed[: self._few].tolist()
        for u in itertools.chain(recent, first):
            if self._goes_on(probe, u, r, depth):
                return False
        if len(allowed) <= self._few:
            return True
        rest = self._relation.allowed_among(r, allowed[self._few :], limit=self._few + 1).tolist()
        for k, u in enumerate(rest):
            if k == self._few:
                return False  # more canonical steps than are worth searching: not known dead
            if self._goes_on(probe, u, r, depth):
                return False
        return True

    def _recent_among(self, allowed: np.ndarray) -> list[int]:
        """The continuations found lately that ``allowed`` holds, in order; the last answer is kept (a group's tokens
        ask it of one ``allowed`` while the continuations stay the same)."""
        key = tuple(self._recent)
        last = self._last_among
        if last is not None and last[0] is allowed and last[1] == key:
            return last[2]
        found = _among(allowed, self._recent)
        self._last_among = (allowed, key, found)
        return found

    def _goes_on(self, probe: Matcher, u: int, r: int, depth: int) -> bool:
        """Whether ``u`` is a canonical step from ``r`` that is not found dead in turn; remembered in ``_recent``."""
        after = self._relation.step(r, u)
        if after == NOT_CANONICAL or not (depth == 0 or self._continued(probe, u, after, depth)):
            return False
        recent = self._recent
        if u not in recent:
            recent.insert(0, u)
            del recent[_RECENT:]
        return True

    def _continued(self, probe: Matcher, u: int, after: int, depth: int) -> bool:
        """Whether the canonical step ``u`` from ``probe`` is not found dead in turn (only narrow states are searched)."""
        deeper = self._narrow_after(probe, u)
        return deeper is None or not self._dead(deeper, after, depth - 1)

    def _narrow_after(self, probe: Matcher, u: int) -> Matcher | None:
        """A matcher in the grammar state after ``u`` from ``probe``'s where that state is narrow, else None;
        remembered per (grammar state, token): the tokens of a group try the same continuations."""
        key = (probe.state_key, u)
        if key in self._steps:
            self._steps.move_to_end(key)
            return self._steps[key]
        deeper = probe.fork()
        deeper.advance(u)
        found = self._steps[key] = deeper if self._narrow(deeper) else None
        if len(self._steps) > _REMEMBERED_MASKS:
            self._steps.popitem(last=False)
        return found

    def _narrow(self, probe: Matcher) -> bool:
        """Whether few continuations follow ``probe``'s state: its pending lexeme is unfinished, or the grammar forces
        the next bytes."""
        return self._unfinished(probe.lexer_state, probe.stack) or bool(probe.forced_text())

    def _unfinished(self, q: int, stack) -> bool:
        """Whether a pending lexeme in lexer state ``q`` cannot end as a terminal the parser takes on ``stack`` (with
        an indenter, a count or late readings: cannot end as a terminal at all)."""
        if q <= 0:
            return False  # nothing pending (0) or after EOS
        term = int(self._engine.lexer.accept[q])
        if term < 0:
            return True
        if not self._exact_groups:
            return False  # what the parser takes there depends on the indentation or count context too
        parser_term = int(self._engine.parser_term[term])
        return parser_term >= 0 and self._runner.feed(stack, parser_term) is None

    def _allowed(self, probe: Matcher) -> np.ndarray:
        """The tokens the grammar allows at ``probe``'s state, EOS left out, ascending; remembered per (lexer state,
        stack)."""
        key = probe.state_key
        if key in self._allowed_memo:
            self._allowed_memo.move_to_end(key)
            return self._allowed_memo[key]
        found = without_ids(probe.allowed_tokens(), self._eos)
        self._allowed_memo[key] = found
        if len(self._allowed_memo) > _REMEMBERED_MASKS:
            self._allowed_memo.popitem(last=False)
        return found

    def token_groups(self, q: int) -> list[list[int]]:
        """The tokens the lexer reads from lexer state ``q``, in groups that leave the same lexer state and stack."""
        return [tokens for _, _, tokens in self._tokens_by_end(q)]

    def _group_sizes(self, q: int) -> np.ndarray:
        """Per token id: how many tokens its group in :meth:`_tokens_by_end` holds (0 for tokens not read from ``q``)."""
        found = self._sizes.get(q)
        if found is None:
            ids, key, _ = self._walk(q)
            _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
            found = self._sizes[q] = np.zeros(self._n_tokens, dtype=np.int32)
            found[ids] = counts[inverse.ravel()]
        return found

    def _tokens_by_end(self, q: int) -> list[tuple[int, tuple[int, ...], list[int]]]:
        """The tokens the lexer reads from ``q``, grouped by the parser terminals they complete and the lexer state
        after them: ``(lexer state, terminals, tokens)`` per group, in the order the vocabulary walk first meets
        them, tokens ascending."""
        found = self._by_end.get(q)
        if found is None:
            ids, key, seqs = self._walk(q)
            n_states = self._engine.lexer.n_states
            keys, first, inverse, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
            members = np.split(ids[np.lexsort((ids, inverse.ravel()))], np.cumsum(counts)[:-1])
            found = self._by_end[q] = [
                (int(keys[g] % n_states), seqs.sequence(int(keys[g] // n_states)), members[g].tolist())
                for g in np.argsort(first, kind="stable").tolist()
            ]
        return found

    def _walk(self, q: int) -> tuple[np.ndarray, np.ndarray, SequenceTable]:
        """The token ids the lexer reads from ``q``, in the walk's order, each one's group key (terminals completed
        times lexer states, plus the lexer state after it), and the table the terminal sequences are interned in."""
        lexer, trie = self._engine.lexer, self._engine.trie
        seqs = SequenceTable(max(1, len(lexer.terminals)))
        entries, seq, end = walk_alive(trie, lexer.trans, lexer.accept, self._engine.parser_term, q, seqs,
                                       restart=lexer.restart)
        return trie.token_ids[entries], seq.astype(np.int64) * lexer.n_states + end, seqs


def _distance_to_accept(trans: np.ndarray, accept: np.ndarray) -> np.ndarray:
    """Per lexer state: the fewest bytes to an accepting state (a large number where there is none)."""
    n = trans.shape[0]
    far = np.int64(1 << 30)
    dist = np.full(n, far, dtype=np.int64)
    dist[accept >= 0] = 0
    dist[0] = min(dist[0], far)
    sources, _ = np.nonzero(trans >= 0)
    targets = trans[trans >= 0]
    changed = True
    while changed:
        best = np.full(n, far, dtype=np.int64)
        np.minimum.at(best, sources, dist[targets] + 1)
        new = np.minimum(dist, best)
        changed = bool((new != dist).any())
        dist = new
    return dist


def _positions(ids: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Per token of ``tokens``: its index in the ascending ``ids``, or -1 where ``ids`` does not hold it."""
    if not len(ids):
        return np.full(len(tokens), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(ids, tokens), len(ids) - 1)
    return np.where(ids[at] == tokens, at, -1)


def _among(ids: np.ndarray, tokens: list[int]) -> list[int]:
    """The ``tokens`` the ascending ``ids`` hold, in their order."""
    wanted = np.array(tokens, dtype=np.int64)
    return wanted[_positions(ids, wanted) >= 0].tolist()


def _set_in(row: np.ndarray, tokens: list[int]) -> list[int]:
    """The ``tokens`` whose bit is set in the mask row, in their order."""
    ids = np.array(tokens, dtype=np.int64)
    return ids[(row[ids >> 5] >> (ids & 31)) & 1 == 1].tolist()


def _popcount(row: np.ndarray) -> int:
    """Set bits in a mask row."""
    return int(np.unpackbits(row.view(np.uint8)).sum())


class CanonicalMatcher(TokenSteps):
    """A grammar matcher whose masks also keep the token sequence the tokenizer's own encoding of its text.

    Token ``t`` is allowed iff the grammar allows it and the sequence stays a prefix of the canonical
    encoding of some text (for a regex grammar: of some string of the language, see :class:`RegexProduct`).
    EOS is allowed iff the grammar accepts and the sequence is the encoding of its text. Made by
    ``compiled.matcher(canonical=True)``; the operations are those of :class:`~grammask.matcher.Matcher`.
    """

    __slots__ = ("_budget", "_eos", "_forced", "_history", "_matcher", "_product", "_relation", "_rows", "_state",
                 "_witness", "compiled")

    def __init__(self, compiled: CompiledGrammar, relation: CanonicalRelation, product: RegexProduct | None,
                 forced: ForcedTextCheck | None = None, max_tokens: int | None = None, prefix: str | bytes = ""):
        """A canonical matcher at the start of a document, or after ``prefix`` (whose text is not tokenized: the
        output's own tokens start the relation); use ``compiled.matcher(canonical=True)`` (which documents what it
        raises)."""
        self.compiled = compiled
        self._matcher = Matcher(compiled, max_tokens=max_tokens, prefix=prefix)
        self._relation = relation
        self._product = product
        self._forced = forced
        self._rows = (product or forced).rows
        self._state = relation.start_state()
        self._history: list[tuple[int, list[int] | None]] = []
        self._eos = sorted(compiled.vocab.eos_ids)
        self._budget: CanonicalBudget | None = None
        self._witness: list[int] | None = None
        if product is not None:
            with relation.lock:
                if not product.alive(self._matcher.lexer_state, self._state):
                    after = f" after the prefix {prefix!r}" if prefix else ""
                    raise CanonicalError(
                        f"no string of {compiled.grammar.name!r} has a canonical tokenization with {compiled.vocab.name}"
                        f"{after} (a tokenizer that writes a space before the text needs a pattern that starts with one)"
                    )
        if max_tokens is not None:
            budget = CanonicalBudget(max_tokens, (product or forced).token_groups)
            with relation.lock:
                self._witness = budget.witness_after(self, max_tokens)
            if self._witness is None:
                raise BudgetError(f"no canonical output of grammar {compiled.grammar.name!r} was found within "
                                  f"{max_tokens} tokens (EOS included)")
            self._budget = budget

    @property
    def plain(self) -> Matcher:
        """The grammar matcher inside (with the plain budget where there is one); read it, do not advance it."""
        return self._matcher

    @property
    def max_tokens(self) -> int | None:
        """The budget (EOS included), or None."""
        return None if self._budget is None else self._budget.limit

    @property
    def budget(self) -> CanonicalBudget | None:
        """The canonical budget's bookkeeping (``broken``, ``cleared``), or None without a budget."""
        return self._budget

    def unbudgeted_fork(self) -> CanonicalMatcher:
        """An independent matcher in the same state without the canonical budget (the plain one stays)."""
        other = self.fork()
        other._budget = None
        other._witness = None
        return other

    @property
    def relation(self) -> CanonicalRelation:
        """The tokenizer's canonical relation (shared; hold its ``lock`` around calls)."""
        return self._relation

    @property
    def relation_state(self) -> int:
        """The canonical relation's state (see :class:`~grammask.canonical.CanonicalRelation`)."""
        return self._state

    @property
    def num_tokens(self) -> int:
        """Tokens accepted so far (EOS included)."""
        return self._matcher.num_tokens

    def is_terminated(self) -> bool:
        """True once EOS has been accepted."""
        return self._matcher.is_terminated()

    def is_accepting(self) -> bool:
        """True iff the text so far is a whole sentence and the tokens are its encoding (EOS allowed now)."""
        if not self._matcher.is_accepting():
            return False
        with self._relation.lock:
            return self._relation.can_end(self._state)

    def fill_mask(self, row: np.ndarray) -> None:
        """Write the allowed-token bitmask into ``row`` (int32 words, xgrammar/vLLM layout).

        Raises :class:`~grammask.errors.ConfigurationError` unless ``row`` is a writable 1-D int32 array of
        ``bitmask_words(vocab.n_logits)`` words.
        """
        plain = self._matcher
        key = None
        if plain.max_tokens is None and not plain.is_terminated():  # unbudgeted (a canonical budget has a plain one)
            key = self._rows.key(plain, self._state)  # the row is a function of these (remembered in ``rows``)
            made = self._rows.get(key)
            if made is not None:
                check_row(row, self.compiled.vocab.n_logits)  # (plain.fill_mask checks it otherwise)
                np.copyto(row, made)
                return
        plain.fill_mask(row)
        if plain.is_terminated():
            return
        if self._budget is not None:
            with self._relation.lock:
                kept, _ = self._budget.kept(self, self._witness)  # within the unbudgeted mask: see below
            row &= kept[: row.shape[-1]]
            return
        eos = _set_in(row, self._eos)
        with self._relation.lock:
            if _popcount(row) > _FEW_TOKENS:
                allowed = self._relation.allowed_words(self._state)
                n = min(len(allowed), row.shape[-1])
                row[:n] &= allowed[:n]
                row[n:] = 0
            elif self._product is None:  # the row's tokens alone: a new relation state's whole answer costs ~0.1 s
                ids = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little"))
                keep = np.zeros(row.shape[-1] * 32, dtype=bool)
                keep[self._relation.allowed_among(self._state, ids)] = True
                row &= bool_to_bitmask(keep)
            if self._product is not None:
                self._product.restrict(row, plain.lexer_state, self._state)
            elif self._forced is not None:
                self._forced.restrict(row, self._matcher, self._state)
            if eos and self._relation.can_end(self._state):
                for t in eos:
                    row[t >> 5] |= np.uint32(1 << (t & 31)).view(np.int32)
            if key is not None:
                self._rows.put(key, row)

    def allowed_tokens(self) -> np.ndarray:
        """The allowed token ids, sorted (a convenience built on :meth:`fill_mask`)."""
        n = self.compiled.vocab.n_logits
        row = np.zeros(bitmask_words(n), dtype=np.int32)
        self.fill_mask(row)
        return np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[:n])

    def advance(self, token_id: int) -> None:
        """Accept one token.

        Raises :class:`~grammask.errors.TokenRejectedError` (state unchanged) if it is not allowed,
        :class:`~grammask.errors.TokenOutOfRangeError` for an id outside ``[0, vocab.n_logits)``, and
        :class:`~grammask.errors.MatcherStateError` after EOS.
        """
        vocab = self.compiled.vocab
        token_id = token_index(token_id, vocab.n_logits)
        if self._matcher.is_terminated():
            raise MatcherStateError("the matcher has already accepted EOS; roll back or start a new matcher")
        rel = self._relation
        with rel.lock:
            if token_id in vocab.eos_ids:
                if not rel.can_end(self._state):
                    raise TokenRejectedError(token_id, "(EOS) is not allowed: the tokens are not the tokenizer's "
                                             "encoding of the text")
                self._matcher.advance(token_id)
                self._history.append((self._state, self._witness))
                return
            witness = self._budgeted_witness(token_id) if self._budget is not None else None
            after = rel.step(self._state, token_id)
            if after == NOT_CANONICAL:
                raise TokenRejectedError(token_id, "is not allowed: the tokenizer would not write the text this way")
            if self._product is not None:
                lexstate = self._product.successors(self._matcher.lexer_state)[1].get(token_id, -1)
                if lexstate >= 0 and not self._product.alive(lexstate, after):
                    raise TokenRejectedError(token_id, "is not allowed: no string of the regex goes on from it in "
                                             "the tokenizer's own encoding")
            elif self._forced is not None and self._forced.rejects(self._matcher, self._state, token_id):
                raise TokenRejectedError(token_id, "is not allowed: every way the grammar goes on from it leaves "
                                         "the tokenizer's own encoding")
            self._matcher.advance(token_id)
            self._history.append((self._state, self._witness))
            self._state = after
            if self._budget is not None:
                self._witness = witness if witness is not None else self._budget.witness_after(
                    self, self._budget.limit - self.num_tokens)
                if self._witness is None:
                    self._budget.broken += 1

    def _budgeted_witness(self, token_id: int) -> list[int] | None:
        """Under a budget: the witness after ``token_id`` where one is known (None for a far token, see
        :mod:`grammask.canonical_budget`); raises :class:`~grammask.errors.TokenRejectedError` where the budget's
        mask clears it."""
        budget = self._budget
        found = budget.verdict(self, token_id, self._witness)
        if found is False:
            raise TokenRejectedError(token_id, f"is not allowed: no canonical output found to fit the budget of "
                                     f"{budget.limit} tokens after it")
        return found

    def rollback(self, k: int = 1) -> None:
        """Undo the last ``k`` accepted tokens.

        Raises :class:`~grammask.errors.MatcherStateError` if fewer were accepted or ``k`` is negative.
        """
        self._matcher.rollback(k)
        if k:
            self._state, self._witness = self._history[-k]
            del self._history[-k:]

    def fork(self) -> CanonicalMatcher:
        """An independent matcher in the same state."""
        other = CanonicalMatcher.__new__(CanonicalMatcher)
        for name in CanonicalMatcher.__slots__:
            setattr(other, name, getattr(self, name))
        other._matcher = self._matcher.fork()
        other._history = list(self._history)
        return other

    def reset(self) -> None:
        """Back to the start of a document."""
        self.rollback(len(self._history))
