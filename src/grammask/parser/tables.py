"""LALR(1) parse tables for a grammar IR, built with lark's LALR analyzer and stored as integer arrays."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import numpy as np
from lark.common import ParserConf
from lark.grammar import NonTerminal as LarkNonTerminal
from lark.grammar import Rule as LarkRule
from lark.grammar import RuleOptions
from lark.grammar import Terminal as LarkTerminal
from lark.parsers.lalr_analysis import LALR_Analyzer, Reduce, Shift

from grammask.errors import NO_DEADLINE, Deadline, EmptyLanguageError
from grammask.grammar.ir import Grammar, Rule
from grammask.parser.conflicts import check_conflicts, find_conflicts
from grammask.parser.lalr import LALRConflict, LALRTables, lalr_tables

END = "$END"
ERROR = -1


def encode_reduce(rule: int) -> int:
    """Action code of 'reduce by rule'; shifts are the target state (>= 0), errors are -1."""
    return -rule - 2


def decode_reduce(code: int) -> int:
    return -code - 2


@dataclass(frozen=True)
class ParseTables:
    """An LALR(1) automaton as dense tables.

    ``action[s, t]`` for parser terminal ``t`` (index ``len(terminals)`` is end of input) is the
    target state of a shift (>= 0), ``-1`` for an error, or ``encode_reduce(r)``. Accepting is a
    shift of the end marker into ``accept_state``, a row of errors, so "the parser accepts"
    reads the same as "the terminal was shifted". ``notes`` describe the conflicts resolved
    (shift over reduce, or a reduction by rule priority), as Lark resolves them; ``dropped`` holds
    one row ``(state, rule, terminal)`` per reduction a resolution removed (the LALR(1) lookahead
    ``terminal`` of ``rule`` in ``state`` on which the parser shifts or reduces by another rule).
    """

    terminals: tuple[str, ...]
    nonterminals: tuple[str, ...]
    action: np.ndarray
    goto: np.ndarray
    rule_lhs: np.ndarray
    rule_len: np.ndarray
    rule_rhs: np.ndarray
    rule_text: tuple[str, ...]
    start_state: int
    accept_state: int
    notes: tuple[str, ...] = field(default=())
    dropped: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int32))

    @property
    def end(self) -> int:
        """Index of the end-of-input marker in the terminal axis of ``action``."""
        return len(self.terminals)

    def right_hand_sides(self) -> list[tuple[int, ...]]:
        """Each rule's right-hand side as symbol codes (see the class docstring)."""
        ends = np.cumsum(self.rule_len).tolist()
        flat = self.rule_rhs.tolist()
        return [tuple(flat[e - n : e]) for e, n in zip(ends, self.rule_len.tolist())]

    @property
    def n_states(self) -> int:
        return self.action.shape[0]


def build_parse_tables(grammar: Grammar, parser_terminals: tuple[str, ...], deadline: Deadline | None = None) -> ParseTables:
    """LALR(1) tables over ``parser_terminals`` (the grammar's non-ignored terminals, in lexer order).

    Conflicts are resolved as Lark resolves them (see :mod:`grammask.parser.conflicts`) and listed
    in ``notes``, with one warning per grammar; ``grammar.conflicts == "error"`` refuses
    shift/reduce conflicts instead. Raises :class:`~grammask.errors.EmptyLanguageError` for an
    empty language, :class:`~grammask.errors.GrammarConflictError` for a refused conflict and
    :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` (None: no limit) has passed
    (checked between the steps of the LALR construction).
    """
    deadline = deadline or NO_DEADLINE
    _check_nonempty(grammar, set(parser_terminals))
    deadline.check("the parse tables")
    nonterminals = grammar.nonterminals
    fast = _without_conflicts(grammar, parser_terminals, deadline)
    if fast is not None:
        return fast
    terminal_set = frozenset(parser_terminals)
    lark_rules = []
    for order, rule in enumerate(grammar.rules):
        expansion = [LarkTerminal(s) if s in terminal_set else LarkNonTerminal(s) for s in rule.rhs]
        options = RuleOptions(priority=rule.priority or None)
        lark_rules.append(LarkRule(LarkNonTerminal(rule.lhs), expansion, order=order, options=options))
    deadline.check("the parse tables")
    analyzer = LALR_Analyzer(ParserConf(lark_rules, {}, [grammar.start]), debug=True, strict=False)
    for step in (analyzer.compute_lr0_states, analyzer.compute_reads_relations, analyzer.compute_includes_lookback,
                 analyzer.compute_lookaheads):
        deadline.check("the parse tables")
        step()
    rule_text = [_rule_text(r) for r in grammar.rules]
    conflicts = find_conflicts(analyzer, lambda r: rule_text[r.order])  # lark's augmented rule never reduces
    lr1_args = ([(r.lhs, r.rhs, r.priority) for r in grammar.rules], grammar.start, terminal_set)
    notes = check_conflicts(conflicts, grammar.conflicts, lr1_args)
    if notes:
        shown = "; ".join(notes[:3]) + ("; ..." if len(notes) > 3 else "")
        message = f"grammar '{grammar.name}': {len(notes)} LALR(1) conflict(s) resolved as Lark does: {shown}"
        warnings.warn(message, stacklevel=2)
    deadline.check("the parse tables")
    analyzer.compute_lalr1_states()

    table = analyzer.parse_table
    states = _canonical_order(table, [*parser_terminals, END, *nonterminals], table.start_states[grammar.start], deadline)
    state_id = {s: i for i, s in enumerate(states)}
    term_id = {t: i for i, t in enumerate(parser_terminals)}
    term_id[END] = len(parser_terminals)
    nt_id = {n: i for i, n in enumerate(nonterminals)}
    rule_id = {r: i for i, r in enumerate(lark_rules)}

    n = len(states)
    action = np.full((n + 1, len(parser_terminals) + 1), ERROR, dtype=np.int32)
    goto = np.full((n + 1, len(nonterminals)), ERROR, dtype=np.int32)
    for s, acts in table.states.items():
        i = state_id[s]
        for sym, (kind, arg) in acts.items():
            if sym in nt_id:
                goto[i, nt_id[sym]] = state_id[arg]
            elif kind is Shift:
                action[i, term_id[sym]] = state_id[arg]
            else:
                action[i, term_id[sym]] = encode_reduce(rule_id[arg])
    dropped = [(state_id[itemset.closure], rule_id[r], term_id[la.name])
               for itemset in analyzer.lr0_itemsets for la, rules in itemset.lookaheads.items() for r in rules
               if table.states[itemset.closure].get(la.name) != (Reduce, r)]
    end_state = state_id[table.end_states[grammar.start]]
    action[end_state, term_id[END]] = n
    return ParseTables(
        terminals=tuple(parser_terminals),
        nonterminals=nonterminals,
        action=action,
        goto=goto,
        rule_lhs=np.array([nt_id[r.lhs] for r in grammar.rules], dtype=np.int32),
        rule_len=np.array([len(r.rhs) for r in grammar.rules], dtype=np.int32),
        rule_rhs=np.array(
            [term_id[s] if s in term_id else len(term_id) + nt_id[s] for r in grammar.rules for s in r.rhs],
            dtype=np.int32,
        ),
        rule_text=tuple(rule_text),
        start_state=state_id[table.start_states[grammar.start]],
        accept_state=n,
        notes=notes,
        dropped=np.array(sorted(dropped), dtype=np.int32).reshape(-1, 3),
    )


def lalr_conflict(grammar: Grammar, deadline: Deadline | None = None) -> str | None:
    """The first LALR(1) conflict of ``grammar`` (a shift and a reduction, or two reductions, on one lookahead: what
    lark's analyzer refuses in strict mode) in words, ``""`` where it has none, None where the integer construction
    leaves the question to lark's analyzer (a symbol without rules, a cycle of reads relations). Identical rules
    count once. Raises :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has passed."""
    unique = dict.fromkeys((r.lhs, tuple(r.rhs)) for r in grammar.rules)
    if len(unique) < len(grammar.rules):
        grammar = replace(grammar, rules=tuple(Rule(lhs, rhs) for lhs, rhs in unique))
    terminals = tuple(t.name for t in grammar.terminals)
    _, built = _integer_tables(grammar, terminals, deadline or NO_DEADLINE, goto=False)
    if not isinstance(built, LALRConflict):
        return None if built is None else ""
    on = END if built.terminal == len(terminals) else terminals[built.terminal]
    return f"{'shift/reduce' if built.shift else 'reduce/reduce'} conflict on terminal {on}"


def _integer_tables(grammar: Grammar, parser_terminals: tuple[str, ...], deadline: Deadline,
                    goto: bool = True) -> tuple[list[tuple[int, tuple[int, ...]]], LALRTables | LALRConflict | None]:
    """``grammar``'s rules as :func:`~grammask.parser.lalr.lalr_tables` takes them (over ``parser_terminals``) and
    what it gives for them, with its ``goto`` flag (None also where a rule names a symbol outside the terminals and
    nonterminals)."""
    nonterminals = grammar.nonterminals
    code = {t: i for i, t in enumerate(parser_terminals)}
    base = len(parser_terminals) + 1
    code.update({n: base + i for i, n in enumerate(nonterminals)})
    if any(s not in code for r in grammar.rules for s in r.rhs):
        return [], None
    rules = [(code[r.lhs] - base, tuple(code[s] for s in r.rhs)) for r in grammar.rules]
    return rules, lalr_tables(rules, len(parser_terminals), len(nonterminals), code[grammar.start] - base, deadline,
                             goto)


def _without_conflicts(grammar: Grammar, parser_terminals: tuple[str, ...], deadline: Deadline) -> ParseTables | None:
    """The tables of a grammar without LALR(1) conflicts from the integer construction (:mod:`grammask.parser.lalr`),
    as lark's analyzer would give them; None where that finds a conflict or leaves the grammar to lark."""
    rules, built = _integer_tables(grammar, parser_terminals, deadline)
    if not isinstance(built, LALRTables):
        return None
    action = built.action
    n = action.shape[0] - 1
    action[built.end_state, len(parser_terminals)] = n
    return ParseTables(
        terminals=tuple(parser_terminals),
        nonterminals=grammar.nonterminals,
        action=action,
        goto=built.goto,
        rule_lhs=np.array([lhs for lhs, _ in rules], dtype=np.int32),
        rule_len=np.array([len(rhs) for _, rhs in rules], dtype=np.int32),
        rule_rhs=np.array([s for _, rhs in rules for s in rhs], dtype=np.int32),
        rule_text=tuple(_rule_text(r) for r in grammar.rules),
        start_state=0,
        accept_state=n,
    )


def _rule_text(rule) -> str:
    return f"{rule.lhs} -> {' '.join(rule.rhs) or '<empty>'}"


def _canonical_order(table, symbols: list[str], start, deadline: Deadline) -> list:
    """The LR states in breadth-first order from the start over symbols in a fixed order.

    Lark's state objects are sets whose iteration order varies between builds; numbering them
    this way makes compiled tables (and so cache files) identical from run to run.
    """
    rank = {sym: i for i, sym in enumerate(symbols)}
    order = [start]
    seen = {start}
    for state in order:
        deadline.check("the parse tables")
        shifts = sorted((rank[sym], act[1]) for sym, act in table.states[state].items() if act[0] is Shift and sym in rank)
        for _, target in shifts:
            if target not in seen:
                seen.add(target)
                order.append(target)
    order.extend(s for s in table.states if s not in seen)
    return order


def _check_nonempty(grammar: Grammar, terminals: set[str]) -> None:
    """Raise unless the start symbol derives some finite string of ``terminals``."""
    productive = set(terminals)
    changed = True
    while changed:
        changed = False
        for rule in grammar.rules:
            if rule.lhs not in productive and all(s in productive for s in rule.rhs):
                productive.add(rule.lhs)
                changed = True
    if grammar.start not in productive:
        raise EmptyLanguageError(
            f"the grammar's language is empty: rule '{grammar.start}' derives no finite sentence "
            "(every alternative recurses forever or uses a terminal the lexer can never produce)"
        )
