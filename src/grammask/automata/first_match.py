"""Lexemes that Lark's first-match lexer gives to an earlier terminal: cut from the later terminal.

Lark's lexer tries its terminals as one alternation in a fixed order (higher priority, then longer
maximal width, then longer pattern text, then name) and takes the *first* alternative that matches,
not the longest. A regex terminal ``P`` that comes before a terminal ``K`` in that order and matches a
proper prefix of a string ``w`` of ``K`` therefore wins there: Lark emits ``P``'s lexeme and ``w`` is never
lexed as ``K`` (unless ``P`` matches ``w`` whole: then ``P`` wins a tie, or Lark's keyword rule retypes
``P``'s lexeme as the literal ``K``). grammask's lexing rule grows the lexeme as long as it can, so it would
lex ``w`` as ``K``. SynCode's SQL grammar meets this with case-insensitive keywords: its ``TYPENAME``
``"timestamp"i`` also matches ``TİMESTAMP`` (Python's ``re`` folds ``İ`` to ``i``), which Lark lexes as
``CNAME`` ``T`` followed by an error, because ``CNAME`` is tried first and stops before ``İ``.

For grammars that follow Lark's lexer (``Grammar.first_match``, set by the Lark front end),
:func:`restrict_preempted` removes those strings from each terminal's automaton, so that both lexers agree.
A literal that Lark embeds in a regex (its keyword rule, when the literal's flags are among the regex's)
is kept only on the strings that regex matches whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from grammask.automata.dfa import ByteDFA, build_dfa
from grammask.automata.regex import ByteNFA
from grammask.grammar.ir import Terminal

try:
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # Python 3.10
    import sre_parse  # type: ignore[no-redef]


Cutters = dict[int, tuple[tuple[int, bool], ...]]
"""Per cut terminal, the regex terminals that cut it, each with whether it embeds it (see :func:`restrict_preempted`)."""


def restrict_preempted(
    terminals: Sequence[Terminal], nfas: list[ByteNFA], matches: np.ndarray, after: np.ndarray,
) -> tuple[list[ByteNFA], Cutters]:
    """``nfas`` (one per terminal) with each terminal's language cut to the strings Lark's lexer can lex as it, and
    the terminals that cut each one (each of them alone removes some of its strings).

    ``matches`` and ``after`` describe the DFA of all of ``nfas`` together: ``matches[q, t]``, the lexeme read to
    reach ``q`` is one of terminal ``t``; ``after[q, t]``, some non-empty continuation from ``q`` is. They pick
    the pairs worth the exact cut. Returns ``nfas`` itself where nothing is cut.

    A cut holds only where the cutting terminal competes: Lark's contextual lexer cuts a terminal in an LR state by
    the cutters that state's scanner has (:func:`cut_variant`).
    """
    m = matches.astype(np.int64)
    # continues[P, K]: a lexeme of P continues to one of K; strays[K, P]: some lexeme of K is none of P
    continues = m.T @ after.astype(np.int64) > 0
    strays = m.T @ (1 - m) > 0
    out = list(nfas)
    dfas: dict[int, ByteDFA] = {}

    def dfa(j: int) -> ByteDFA:
        if j not in dfas:
            dfas[j] = build_dfa([nfas[j]])
        return dfas[j]

    keys = [lark_order_key(t) for t in terminals]
    regexes = [j for j, t in enumerate(terminals) if t.literal is None and nfas[j].trailing is None]
    cutters: Cutters = {}
    for i, later in enumerate(terminals):
        if nfas[i].trailing is not None:
            continue
        cuts = []
        for j in regexes:
            if j == i or not (continues[j, i] or strays[i, j]):
                continue
            if later.literal is not None and _embeds(terminals[j], later):
                if strays[i, j]:
                    cuts.append((j, True))
            elif continues[j, i] and keys[j] < keys[i]:
                cuts.append((j, False))
        found = tuple((j, embedded) for j, embedded in cuts if _cut(dfa(i), dfa(j), embedded) is not dfa(i))
        if found:
            cutters[i] = found
            out[i] = _variant(dfa, i, found, nfas[i].name)
    return (out, cutters) if cutters else (nfas, cutters)


def cut_variant(nfas: Sequence[ByteNFA], i: int, cuts: Sequence[tuple[int, bool]]) -> ByteNFA:
    """``nfas[i]`` cut by each ``(j, embedded)`` of ``cuts`` (cutters :func:`restrict_preempted` found for it)."""
    return _variant(lambda j: build_dfa([nfas[j]]), i, cuts, nfas[i].name)


def _variant(dfa, i: int, cuts: Sequence[tuple[int, bool]], name: str) -> ByteNFA:
    lexemes = dfa(i)
    for j, embedded in cuts:
        lexemes = _cut(lexemes, dfa(j), embedded)
    return _as_nfa(lexemes, name)


def lark_order_key(t: Terminal) -> tuple:
    """The place of ``t`` in the order Lark's lexer tries its terminals (smaller first)."""
    value = t.literal if t.literal is not None else _lark_parts(t)[1]
    return (-t.priority, -_lark_max_width(t), -len(value), t.name)


def _lark_parts(t: Terminal) -> tuple[frozenset[str], str]:
    """Lark's flags and pattern text of ``t``: the Lark front end nests the flags around the text as ``(?i:...)``."""
    flags = set(t.flags)
    value = t.pattern
    while (m := _FLAG_GROUP.match(value)) and value.endswith(")") and _closes_at_end(value):
        flags.add(m.group(1))
        value = value[m.end(): -1]
    return frozenset(flags), value


_FLAG_GROUP = re.compile(r"\(\?([aiLmsux]):")


def _closes_at_end(pattern: str) -> bool:
    """Whether the group opened by ``pattern``'s first character closes at its last one."""
    depth, escaped, in_class = 0, False, False
    for k, ch in enumerate(pattern):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return k == len(pattern) - 1
    return False


def _lark_max_width(t: Terminal) -> int:
    if t.literal is not None:
        return len(t.literal)
    try:
        return int(sre_parse.parse(_with_flags(t)).getwidth()[1])
    except (re.error, OverflowError, RecursionError):
        return 0


def _with_flags(t: Terminal) -> str:
    return f"(?{t.flags}:{t.pattern})" if t.flags else t.pattern


def _embeds(regex: Terminal, lit: Terminal) -> bool:
    """Lark's keyword rule takes ``lit`` out of the lexer's alternation into ``regex``'s retyping."""
    try:
        m = re.match(_with_flags(regex), lit.literal or "")
    except re.error:
        return False
    return (m is not None and m.group(0) == lit.literal and _lark_parts(lit)[0] <= _lark_parts(regex)[0]
            and regex.priority == lit.priority)


def _cut(lexemes: ByteDFA, regex: ByteDFA, embedded: bool) -> ByteDFA:
    """The strings of ``lexemes`` that ``regex`` matches whole or (unless ``embedded``) on no proper prefix;
    ``lexemes`` itself where that is all of them.

    A product walk of the two DFAs with one bit: some non-empty proper prefix read so far is a match of
    ``regex`` (at most twice the product of their states).
    """
    regex_accepts = [bool(a) for a in regex.accepts]
    ids: dict[tuple[int, int, bool], int] = {(0, 0, False): 0}
    states = [(0, 0, False)]
    rows: list[np.ndarray] = []
    finals: list[bool] = []
    while len(rows) < len(states):
        k, p, seen = states[len(rows)]
        whole = p >= 0 and regex_accepts[p]
        finals.append(bool(lexemes.accepts[k]) and (whole or (not embedded and not seen)))
        seen_next = seen or (whole and len(rows) > 0)
        row = np.full(256, -1, dtype=np.int32)
        for byte in np.flatnonzero(lexemes.trans[k] >= 0).tolist():
            key = (int(lexemes.trans[k, byte]), int(regex.trans[p, byte]) if p >= 0 else -1, seen_next)
            target = ids.get(key)
            if target is None:
                target = ids[key] = len(states)
                states.append(key)
            row[byte] = target
        rows.append(row)
    if all(f or not lexemes.accepts[k] for f, (k, _, _) in zip(finals, states)):
        return lexemes
    trans = np.array(rows, dtype=np.int32).reshape(len(rows), 256)
    return ByteDFA(trans, tuple(frozenset({0}) if f else frozenset() for f in finals))


def _as_nfa(dfa: ByteDFA, name: str) -> ByteNFA:
    """A DFA as a byte NFA with one final state (reached by an epsilon move from each accepting state)."""
    final = dfa.n_states
    edges: list[tuple[tuple[int, int, int], ...]] = []
    for row in dfa.trans:
        runs: list[tuple[int, int, int]] = []
        for byte in np.flatnonzero(row >= 0).tolist():
            target = int(row[byte])
            if runs and runs[-1][2] == target and runs[-1][1] == byte - 1:
                runs[-1] = (runs[-1][0], byte, target)
            else:
                runs.append((byte, byte, target))
        edges.append(tuple(runs))
    eps = tuple((final,) if accepts else () for accepts in dfa.accepts)
    return ByteNFA(edges=(*edges, ()), eps=(*eps, ()), start=0, final=final, name=name)
