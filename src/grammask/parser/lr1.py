"""Canonical LR(1) item sets, built only to tell whether an LALR(1) conflict is LALR's own doing.

LALR(1) merges the canonical LR(1) states that share an LR(0) core; a conflict that appears only
after the merge means the grammar needs LR(1) (or IELR(1)) tables rather than a rewrite.
"""

from __future__ import annotations

END = "$END"


def lr1_conflicts(
    rules: list[tuple[str, tuple[str, ...], int]], start: str, terminals: frozenset[str], max_states: int = 20000
) -> dict[tuple[frozenset[tuple[int, int]], str], str] | None:
    """The conflicts of the canonical LR(1) automaton, keyed by (LR(0) core, terminal).

    ``rules`` are ``(lhs, rhs, priority)``; a core is a set of ``(rule index, dot)`` with ``-1``
    for the augmented start rule, as in :func:`grammask.parser.conflicts.find_conflicts`. The
    value is ``"tie"`` (reduce/reduce between rules of equal highest priority) or ``"shift"``
    (a shift/reduce conflict left after priorities). ``None`` when the automaton would exceed
    ``max_states`` states (the question is then left open).
    """
    bodies = [rhs for _, rhs, _ in rules] + [(start,)]
    by_lhs: dict[str, list[int]] = {}
    for i, (lhs, _, _) in enumerate(rules):
        by_lhs.setdefault(lhs, []).append(i)
    first, nullable = _first_sets(rules, terminals)
    suffix: dict[tuple[int, int], tuple[frozenset[str], bool]] = {}

    def follow(r: int, d: int) -> tuple[frozenset[str], bool]:
        """FIRST of the symbols after the dot's next symbol, and whether they can all be empty."""
        key = (r, d)
        if key not in suffix:
            out: set[str] = set()
            for sym in bodies[r][d + 1 :]:
                out |= {sym} if sym in terminals else first[sym]
                if sym in terminals or sym not in nullable:
                    suffix[key] = (frozenset(out), False)
                    break
            else:
                suffix[key] = (frozenset(out), True)
        return suffix[key]

    def closure(kernel: dict[tuple[int, int], frozenset[str]]) -> dict[tuple[int, int], set[str]]:
        items = {k: set(v) for k, v in kernel.items()}
        work = list(items)
        while work:
            r, d = work.pop()
            body = bodies[r]
            if d >= len(body) or body[d] not in by_lhs:
                continue
            head, empty = follow(r, d)
            las = head | items[(r, d)] if empty else head
            for r2 in by_lhs[body[d]]:
                cur = items.setdefault((r2, 0), set())
                if not las <= cur:
                    cur |= las
                    work.append((r2, 0))
        return items

    augmented = len(rules)
    start_kernel = frozenset({(augmented, 0, frozenset({END}))})
    seen = {start_kernel}
    todo = [start_kernel]
    found: dict[tuple[frozenset[tuple[int, int]], str], str] = {}
    while todo:
        kernel = todo.pop()
        core = frozenset((-1 if r == augmented else r, d) for r, d, _ in kernel)
        items = closure({(r, d): las for r, d, las in kernel})
        moves: dict[str, dict[tuple[int, int], frozenset[str]]] = {}
        reducing: dict[str, list[int]] = {}
        for (r, d), las in items.items():
            if d < len(bodies[r]):
                moves.setdefault(bodies[r][d], {})[(r, d + 1)] = frozenset(las)
            elif r != augmented:
                for a in las:
                    reducing.setdefault(a, []).append(r)
        for a, rs in reducing.items():
            best = max(rules[r][2] for r in rs)
            if sum(rules[r][2] == best for r in rs) > 1:
                found[(core, a)] = "tie"
            elif a in moves:
                found[(core, a)] = "shift"
        for nxt in moves.values():
            k = frozenset((r, d, las) for (r, d), las in nxt.items())
            if k not in seen:
                if len(seen) >= max_states:
                    return None
                seen.add(k)
                todo.append(k)
    return found


def _first_sets(
    rules: list[tuple[str, tuple[str, ...], int]], terminals: frozenset[str]
) -> tuple[dict[str, set[str]], set[str]]:
    """FIRST sets of the nonterminals and the set of nullable nonterminals (a fixpoint)."""
    first: dict[str, set[str]] = {lhs: set() for lhs, _, _ in rules}
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for lhs, rhs, _ in rules:
            before = (len(first[lhs]), lhs in nullable)
            for sym in rhs:
                first[lhs] |= {sym} if sym in terminals else first[sym]
                if sym in terminals or sym not in nullable:
                    break
            else:
                nullable.add(lhs)
            changed |= before != (len(first[lhs]), lhs in nullable)
    return first, nullable
