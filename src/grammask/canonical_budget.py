"""Token budgets for canonical matchers: a complete canonical output within ``N`` tokens kept reachable.

The plain budget (:mod:`grammask.budget`) counts the fewest tokens of any spelling. The tokenizer's own
spelling can need more (SmolLM2 writes ``"}}`` as one token, so after ``"}`` the way to close the outer
object is `` }``, not ``}``), so a plain cost only guides. :class:`CanonicalBudget` keeps a *witness*:
canonical tokens that finish the output from the current state, found by :func:`complete` and taken one
by one by the canonical matcher itself, so it is a real way on; it always fits in the tokens left. A token
``t`` of the (unbudgeted) canonical mask, which the plain budget also allows, is kept when

* it is the witness's first token (so the mask is never empty while a witness is held); or
* it is *near* the limit (its plain cost plus ``slack`` does not fit in what is left after it) and
  :func:`complete` finds a witness after it that fits. At most ``searches`` near tokens a mask are
  searched, plain-cheapest first; the other near tokens are cleared (the inexact part); or
* it is *far* from the limit (its plain cost plus ``slack`` fits): kept without a search, on the
  assumption that a canonical completion needs at most ``slack`` tokens more than the plain one. Where the
  grammar allows at most ``narrow`` tokens after it, its cost is first taken one step further along the
  canonical ones only (after ``"}`` where only ``}`` or ``,`` may follow and the tokenizer writes ``"}}``,
  the way on is a whole new member, so the token is near, not far). After
  such a token the matcher searches a witness; ``broken`` counts the times none was found (the
  assumption failed; the attack bench measures it), and the mask then keeps the searched near tokens,
  or the plain-cheapest canonical one so that it is never empty.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from grammask.bitmask import bitmask_words, bool_to_bitmask
from grammask.canonical import NOT_CANONICAL

if TYPE_CHECKING:
    from grammask.canonical_matcher import CanonicalMatcher

_REMEMBERED = 4096
_TRIES = 32  # tokens tried in plain-cost order at one search node before the canonical mask is asked


def complete(matcher: CanonicalMatcher, limit: int, nodes: int = 200, branch: int = 3) -> list[int] | None:
    """Canonical tokens (EOS not included) after which ``matcher`` may take EOS, at most ``limit`` of them.

    A best-first search from forks of ``matcher`` (which is not changed): states in the order of tokens so far
    plus twice the plain completion cost (weighted A* with the plain cost as its guide: after ``"}`` where the
    tokenizer writes ``"`` ``}}``, the plain cost of going on jumps, and the search turns back), the ``branch`` plain
    cheapest canonical tokens taken from each state, ``nodes`` states expanded in all. Every step is the
    canonical matcher's own ``advance``, so what it returns is a canonical way to finish. None when the search
    finds none within its bounds (there may still be one).
    """
    eos = list(matcher.compiled.vocab.eos_ids)
    start = matcher.unbudgeted_fork()
    queue: list[tuple[int, int, list[int], CanonicalMatcher]] = [(0, 0, [], start)]
    pushed = 1
    for _ in range(nodes):
        if not queue:
            return None
        _, _, path, node = heapq.heappop(queue)
        if node.is_accepting():
            return path
        if len(path) >= limit:
            continue
        costs = node.plain.next_token_costs()
        costs[eos] = -1
        for t in _cheapest_canonical(node, costs, branch):
            child = node.fork()
            child.advance(t)
            heapq.heappush(queue, (len(path) + 1 + 2 * int(costs[t]), pushed, [*path, t], child))
            pushed += 1
    return None


def _cheapest_canonical(node: CanonicalMatcher, costs: np.ndarray, branch: int) -> list[int]:
    """Up to ``branch`` tokens ``node`` takes, plain-cheapest first (tried one by one, then through its mask)."""
    cand = np.flatnonzero(costs >= 0)
    order = cand[np.argsort(costs[cand], kind="stable")].tolist()
    found: list[int] = []
    for k, t in enumerate(order):
        if k == _TRIES and not found:  # the plain-cheapest tokens are not canonical here: ask the mask
            allowed = set(node.allowed_tokens().tolist())
            return [u for u in order[k:] if u in allowed][:branch]
        if node.validate_tokens([t]):
            found.append(t)
            if len(found) == branch:
                break
    return found


def without_ids(ids: np.ndarray, drop: Iterable[int]) -> np.ndarray:
    """``ids`` less the few ids of ``drop`` (EOS ids), order kept: ``ids[~np.isin(ids, drop)]`` without its sort."""
    keep = np.ones(len(ids), dtype=bool)
    for d in drop:
        keep &= ids != d
    return ids[keep]


class CanonicalBudget:
    """The budget of one canonical matcher's output: ``limit`` tokens, EOS included (see the module docstring).

    ``slack``: how many tokens more than the plain cost a far token may need; ``searches``: near tokens
    searched per mask. ``broken`` counts the far tokens after which no witness was found, ``cleared`` the
    near tokens cleared unsearched or without a witness found.
    """

    def __init__(self, limit: int, groups: Callable[[int], list[list[int]]], slack: int = 12, searches: int = 16,
                 narrow: int = 64):
        self.limit = limit
        self._groups = groups
        self.narrow = narrow
        self.slack = slack
        self.searches = searches
        self.broken = 0
        self.cleared = 0
        self._found: OrderedDict[tuple, list[int] | None] = OrderedDict()
        self._rows: OrderedDict[tuple, tuple[np.ndarray, dict[int, list[int]]]] = OrderedDict()

    def witness_after(self, matcher: CanonicalMatcher, left: int) -> list[int] | None:
        """A witness from ``matcher``'s state that fits in ``left`` tokens with EOS, remembered per state."""
        key = (matcher.plain.lexer_state, matcher.plain.stack, matcher.relation_state, matcher.num_tokens)
        if key in self._found:
            self._found.move_to_end(key)
            return self._found[key]
        found = complete(matcher, left - 1) if left >= 1 else None
        self._found[key] = found
        if len(self._found) > _REMEMBERED:
            self._found.popitem(last=False)
        return found

    def verdict(self, matcher: CanonicalMatcher, token: int, witness: list[int] | None) -> list[int] | None | bool:
        """Whether the budget keeps ``token`` (not EOS) at ``matcher``'s state: False where it clears it, else the
        witness after it (None for a far token, which has none yet). The unbudgeted checks are the caller's."""
        if witness and token == witness[0]:
            return witness[1:]
        kept, witnesses = self.kept(matcher, witness)
        return witnesses.get(token) if kept[token >> 5] >> (token & 31) & 1 else False

    def kept(self, matcher: CanonicalMatcher, witness: list[int] | None) -> tuple[np.ndarray, dict[int, list[int]]]:
        """The budgeted canonical mask at ``matcher``'s state: the unbudgeted one (EOS set where allowed) less the
        tokens the budget refuses, and the witnesses found after the near tokens kept (token -> witness).
        Remembered per state, so trying several tokens at one state, or a mask and then the token chosen from it,
        computes the unbudgeted mask once."""
        key = (matcher.plain.lexer_state, matcher.plain.stack, matcher.relation_state, matcher.num_tokens,
               witness[0] if witness else None)
        found = self._rows.get(key)
        if found is not None:
            self._rows.move_to_end(key)
            return found
        row = np.zeros(bitmask_words(matcher.compiled.vocab.n_logits), dtype=np.int32)
        matcher.unbudgeted_fork().fill_mask(row)
        found = self._rows[key] = self._restricted(row, matcher, witness)
        if len(self._rows) > _REMEMBERED:
            self._rows.popitem(last=False)
        return found

    def _restricted(self, row: np.ndarray, matcher: CanonicalMatcher, witness: list[int] | None
                    ) -> tuple[np.ndarray, dict[int, list[int]]]:
        n = matcher.compiled.vocab.n_logits
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:n].astype(bool)
        left = self.limit - matcher.num_tokens  # tokens left, EOS included
        eos = list(matcher.compiled.vocab.eos_ids)
        costs = matcher.plain.next_token_costs()
        candidates = np.flatnonzero(bits)
        candidates = without_ids(candidates, eos)
        costs = self._with_lookahead(matcher, costs, candidates, left)
        near = candidates[costs[candidates] + self.slack > left - 1]
        keep = bits.copy()
        keep[near] = False
        witnesses: dict[int, list[int]] = {}
        first = witness[0] if witness else None
        if first is not None and bits[first]:
            keep[first] = True
            witnesses[first] = witness[1:]
        order = near[np.argsort(costs[near], kind="stable")].tolist()
        searched = 0
        for t in order:
            if t == first:
                continue
            if searched >= self.searches:
                break
            searched += 1
            probe = matcher.unbudgeted_fork()
            if not probe.accept_token(t):
                continue
            found = self.witness_after(probe, left - 1)
            if found is not None:
                keep[t] = True
                witnesses[t] = found
        self.cleared += int(len(near) - keep[near].sum())
        if not keep.any() and len(candidates):  # no witness held: never an empty mask
            cheapest = int(candidates[np.argmin(costs[candidates])])
            keep[cheapest] = True
        return bool_to_bitmask(keep), witnesses

    def _with_lookahead(self, matcher: CanonicalMatcher, costs: np.ndarray, candidates: np.ndarray, left: int
                        ) -> np.ndarray:
        """``costs`` with the far tokens that have few continuations costed one token further along canonical steps
        only: after ``"}`` where the grammar allows only ``}`` or ``,``, and the tokenizer writes ``"}}``, the plain
        cost (``}``, EOS) is 2, the canonical one goes through ``,`` and a whole new member."""
        costs = costs.copy()
        relation = matcher.relation
        far = np.zeros(len(costs), dtype=bool)
        far[candidates[costs[candidates] + self.slack <= left - 1]] = True
        eos = list(matcher.compiled.vocab.eos_ids)
        for group in self._groups(matcher.plain.lexer_state):
            mine = [t for t in group if t < len(far) and far[t]]
            if not mine:
                continue
            probe = matcher.plain.unbudgeted_fork()
            probe.advance(mine[0])
            after = probe.allowed_tokens()
            after = without_ids(after, eos)
            if len(after) > self.narrow:
                continue
            ends = probe.is_accepting()
            next_costs = probe.next_token_costs()
            for t in mine:
                r = relation.step(matcher.relation_state, t)
                if ends and relation.can_end(r):
                    continue  # EOS right after it: the plain cost is the canonical one
                steps = [int(next_costs[u]) for u in after.tolist()
                         if next_costs[u] >= 0 and relation.step(r, u) != NOT_CANONICAL]
                costs[t] = max(int(costs[t]), 1 + min(steps, default=left))
        return costs
