"""Issue 15's speed bar: canonical mask time against the plain mask on the mask benchmark's documents.

For each case of ``bench_masks.py`` (JSON, the nested schema, C) on one tokenizer, the document is encoded by
the HF tokenizer (its own, canonical encoding) and replayed token by token through a plain matcher and through
``matcher(canonical=True)`` on the same compiled grammar, each mask fill timed. A canonical mask pays once for
each relation state it meets (the relation's allowed set, the dead-end check's probes), so each side is replayed
``--repeats`` times with fresh matchers: the first replay is *cold* (a fresh relation and fresh checks), the
others *warm* (the relation's and checks' memory kept, as in a server that keeps a compiled grammar). Reported:
p50 and p90 of the mask time per replay kind and the canonical/plain ratio of the p50s; the relation's build
time cold (no disk cache) and from the disk cache. One thread.

    python bench/bench_canonical_masks.py                       # Llama-3, all cases
    python bench/bench_canonical_masks.py --tokenizer smollm2 --cases json
"""

from __future__ import annotations

import os
import sys

from threads import THREAD_VARS

if __name__ == "__main__":
    os.environ.update({var: "1" for var in THREAD_VARS})

import argparse
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
from cases import CASES, load_case, load_tokenizer
from harness import Stepper, percentile, replay

import grammask as gm
from grammask.bitmask import bitmask_words
from grammask.canonical import build_relation

BENCH_DIR = Path(__file__).resolve().parent


def stepper(matcher, n_logits: int) -> Stepper:
    """A :class:`Stepper` over a plain or canonical matcher."""
    row = np.zeros(bitmask_words(n_logits), dtype=np.int32)
    return Stepper(row, partial(matcher.fill_mask, row), matcher.advance, matcher.is_terminated)


def replays(compiled: gm.CompiledGrammar, tokens: list[int], canonical: bool, repeats: int) -> list[np.ndarray]:
    """Mask times (ns) of ``repeats`` replays of ``tokens`` then EOS, each with a fresh matcher."""
    vocab = compiled.vocab
    out = []
    for _ in range(repeats):
        done = replay(stepper(compiled.matcher(canonical=canonical), vocab.n_logits), tokens, vocab.eos_ids,
                      [None] * (len(tokens) + 1))
        if done.failure:
            raise SystemExit(f"{compiled.grammar.name} canonical={canonical}: {done.failure}")
        out.append(done.mask_ns)
    return out


def relation_build_seconds(vocab: gm.Vocabulary) -> tuple[float, float]:
    """The relation's build time with no disk cache, then read back from a fresh disk cache."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        build_relation(vocab, cache=folder)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        build_relation(vocab, cache=folder)
        return cold, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokenizer", default="llama3")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--repeats", type=int, default=4, help="replays per side (the first one cold)")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "canonical_masks.md")
    args = p.parse_args(argv)
    tok = load_tokenizer(args.tokenizer)
    cold_s, cached_s = relation_build_seconds(tok.vocab)
    lines = [
        f"# Canonical masks against plain masks ({args.tokenizer}, one thread)", "",
        f"`python bench/bench_canonical_masks.py {' '.join(argv if argv is not None else sys.argv[1:])}`".rstrip(), "",
        f"Relation build: {cold_s:.1f} s cold (no disk cache), {cached_s:.2f} s from the disk cache.", "",
        "| case | tokens | replay | plain p50 / p90 (us) | canonical p50 / p90 (us) | ratio of p50s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in args.cases.split(","):
        case = load_case(name)
        compiled = gm.Compiler(tok.vocab, cache=False).compile(case.grammar())
        tokens = tok.encode(case.document)
        plain = replays(compiled, tokens, False, args.repeats)
        canon = replays(compiled, tokens, True, args.repeats)
        for label, pick in (("cold (first)", slice(0, 1)), ("warm (the others)", slice(1, None))):
            p_ns, c_ns = np.concatenate(plain[pick]), np.concatenate(canon[pick])
            if not len(p_ns):
                continue
            p50, c50 = percentile(p_ns, 0.5) / 1e3, percentile(c_ns, 0.5) / 1e3
            lines.append(f"| {name} | {len(tokens)} | {label} | {p50:.1f} / {percentile(p_ns, 0.9) / 1e3:.1f} | "
                         f"{c50:.1f} / {percentile(c_ns, 0.9) / 1e3:.1f} | {c50 / p50:.2f}x |")
        print(lines[-1], flush=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
