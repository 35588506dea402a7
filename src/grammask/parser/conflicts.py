"""LALR(1) conflicts, resolved as Lark resolves them or refused, each described by the rules involved.

Lark's rule (``lark.parsers.lalr_analysis.LALR_Analyzer.compute_lalr1_states``), followed here:

* reduce/reduce: the rule of highest priority wins; if two or more share the highest priority,
  the grammar is refused (Lark raises a ``GrammarError``);
* shift/reduce (after the reduce/reduce step): the shift wins, silently in Lark.

grammask records every resolution as a note, and with the ``"error"`` policy refuses shift/reduce
conflicts instead. A refusal also says whether canonical LR(1) tables have the same conflict, or
whether it comes from LALR(1) merging LR(1) states that share a core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lark.grammar import Rule as LarkRule
from lark.parsers.lalr_analysis import LALR_Analyzer

from grammask.errors import GrammarConflictError
from grammask.parser.lr1 import lr1_conflicts


@dataclass(frozen=True)
class Conflict:
    """One LALR(1) conflict: in the state with kernel ``core``, on lookahead ``terminal``.

    ``reduce`` are the rules that survive the priority step (one, or a tie of several),
    ``outranked`` the rules that lost it, ``shift`` the items that shift ``terminal``.
    """

    core: frozenset[tuple[int, int]]
    terminal: str
    reduce: tuple[str, ...]
    outranked: tuple[str, ...]
    shift: tuple[str, ...]

    @property
    def is_tie(self) -> bool:
        """Several rules of equal highest priority reduce: Lark refuses the grammar."""
        return len(self.reduce) > 1

    def note(self, terminals: str) -> str:
        """How the conflict was resolved on ``terminals`` (this one's, or several sharing the same rules)."""
        parts = []
        if self.outranked:
            parts.append(
                f"reduce/reduce conflict on {terminals}: reduce by {self.reduce[0]} (highest priority) "
                f"over {' | '.join(self.outranked)}"
            )
        if self.shift:
            parts.append(
                f"shift/reduce conflict on {terminals} resolved as shift: shift in {' | '.join(self.shift)}, "
                f"not reduce by {' | '.join(self.reduce)}"
            )
        return "; ".join(parts)


def find_conflicts(analyzer: LALR_Analyzer, rule_text: Callable[[LarkRule], str]) -> list[Conflict]:
    """Every conflict of the analyzer's LALR(1) lookaheads, in a deterministic order.

    Call after ``compute_lookaheads()`` and before ``compute_lalr1_states()``.
    """
    found = []
    for itemset in analyzer.lr0_itemsets:
        for la, rules in itemset.lookaheads.items():
            if len(rules) < 2 and la not in itemset.transitions:
                continue
            best = max(_priority(r) for r in rules)
            winners = sorted(rule_text(r) for r in rules if _priority(r) == best)
            losers = sorted(rule_text(r) for r in rules if _priority(r) != best) if len(winners) == 1 else []
            shift = []
            if la in itemset.transitions and len(winners) == 1:
                shift = sorted({rule_text(i.rule) for i in itemset.closure if not i.is_satisfied and i.next == la})
            found.append(Conflict(_core(itemset.kernel), la.name, tuple(winners), tuple(losers), tuple(shift)))
    return sorted(found, key=lambda c: (c.terminal, c.reduce, c.shift, c.outranked))


def check_conflicts(conflicts: list[Conflict], policy: str, lr1_args: tuple) -> tuple[str, ...]:
    """The notes of resolved conflicts; raise where Lark (or the ``"error"`` policy) refuses.

    ``lr1_args`` are the arguments of :func:`~grammask.parser.lr1.lr1_conflicts` (rules, start,
    terminals), which runs only to explain a refusal. Raises :class:`GrammarConflictError` for a
    reduce/reduce conflict between rules of equal highest priority, and under ``policy="error"``
    for any shift/reduce conflict; the message names the terminal and the rules, and says whether
    canonical LR(1) tables would have the same conflict.
    """
    ties = [c for c in conflicts if c.is_tie]
    refused = ties or ([c for c in conflicts if c.shift] if policy == "error" else [])
    if refused:
        raise GrammarConflictError(_refusal(refused, policy, lr1_args))
    return _notes(conflicts)


def _notes(conflicts: list[Conflict]) -> tuple[str, ...]:
    """One note per set of rules involved, naming every terminal (in any state) it was resolved on."""
    terminals: dict[tuple, list[str]] = {}
    first: dict[tuple, Conflict] = {}
    for c in conflicts:
        key = (c.reduce, c.outranked, c.shift)
        first.setdefault(key, c)
        if c.terminal not in terminals.setdefault(key, []):
            terminals[key].append(c.terminal)
    return tuple(first[k].note(" ".join(ts)) for k, ts in terminals.items())


def _refusal(refused: list[Conflict], policy: str, lr1_args: tuple) -> str:
    first = refused[0]
    if first.is_tie:
        msg = (
            f"grammar is not LALR(1): reduce/reduce conflict on terminal {first.terminal} between rules of equal "
            f"priority: {' | '.join(first.reduce)}. Give one rule a higher priority (e.g. 'name.2: ...') or "
            "rewrite the rules so that one terminal of lookahead decides"
        )
    else:
        msg = (
            f"grammar is not LALR(1): shift/reduce conflict on terminal {first.terminal}: reduce by "
            f"{' | '.join(first.reduce)}, or shift {first.terminal} in {' | '.join(first.shift)}. With "
            "conflicts='resolve' (the default, as Lark) the shift is chosen; otherwise rewrite the rules so that "
            "one terminal of lookahead decides (e.g. the matched/unmatched statement split for a dangling else)"
        )
    if len(refused) > 1:
        msg += f" ({len(refused) - 1} more such conflict(s))"
    return msg + _lr1_verdict(refused, policy, lr1_args)


def _lr1_verdict(refused: list[Conflict], policy: str, lr1_args: tuple) -> str:
    """Whether canonical LR(1) tables would have the refused conflicts (empty when too large to tell)."""
    found = lr1_conflicts(*lr1_args)
    if found is None:
        return ""
    canonical = {key for key, kind in found.items() if kind == "tie" or policy == "error"}
    if not canonical:
        return (
            ". LALR(1) itself is the obstacle: the grammar is LR(1) (canonical LR(1) tables have no such conflict) "
            "but LALR(1) merges LR(1) states that share a core; grammask builds LALR(1) tables only"
        )
    artifact = next((c for c in refused if (c.core, c.terminal) not in canonical), None)
    if artifact is not None:
        return (
            f". The conflict on {artifact.terminal} comes from LALR(1) merging LR(1) states that share a core, "
            "but canonical LR(1) tables have conflicts too: the grammar is not LR(1) either"
        )
    return ". Canonical LR(1) tables have the same conflict: the grammar is not LR(1) either"


def _priority(rule: LarkRule) -> int:
    return rule.options.priority or 0


def _core(kernel) -> frozenset[tuple[int, int]]:
    """A kernel as (rule order, dot) pairs; the augmented start rule is ``-1``."""
    return frozenset((-1 if i.rule.origin.name.startswith("$root_") else i.rule.order, i.index) for i in kernel)
