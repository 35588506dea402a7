"""The loop every mask-exactness test runs: a matcher's masks against an oracle's at cut points of a document."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
from oracle import MaskOracle

from grammask.automata.lexer import build_lexer
from grammask.bitmask import allocate_bitmask, bitmask_to_bool
from grammask.grammar.ir import Grammar, Terminal
from grammask.grammar.lark_export import to_lark_text


def unrolled_oracle(reference: Grammar, vocab) -> MaskOracle:
    """The brute-force oracle of ``reference`` (a grammar without counted terminals: a counted grammar's bounds
    unrolled) that lexes with the grammar's own lexer and gives Lark only terminal names to parse (Lark's checks of
    big unrolled regexes take minutes)."""
    terminals = tuple(Terminal(t.name, re.escape(f"<{t.name}>"), literal=f"<{t.name}>") for t in reference.terminals)
    return MaskOracle(to_lark_text(dataclasses.replace(reference, terminals=terminals)), build_lexer(reference), vocab)


def check_cuts(compiled, oracle, vocab, ids: list[int], cuts: list[int]) -> int:
    """Advance a fresh matcher through ``ids`` and, at each of the sorted ``cuts``, assert that its mask equals
    ``oracle.mask`` of the prefix's bytes (naming the tokens that differ); returns the number of cuts checked."""
    row = allocate_bitmask(1, vocab.n_logits)[0]
    matcher = compiled.matcher()
    done = 0
    for cut in cuts:
        for t in ids[done:cut]:
            matcher.advance(t)
        done = cut
        matcher.fill_mask(row)
        got = bitmask_to_bool(row, vocab.n_logits)
        want = oracle.mask(vocab.decode(ids[:cut]))
        extra = np.flatnonzero(got & ~want)[:5].tolist()
        missing = np.flatnonzero(want & ~got)[:5].tolist()
        assert not extra and not missing, (
            f"mask differs from the oracle after {vocab.decode(ids[:cut])[-60:]!r}: wrongly allowed "
            f"{[vocab.tokens[i] for i in extra]}, wrongly masked {[vocab.tokens[i] for i in missing]}"
        )
    return len(cuts)
