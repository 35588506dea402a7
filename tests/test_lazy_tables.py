"""Mask tables built per lexer state on first visit (``Compiler(lazy=True)``) and from a base state's walk
(:meth:`grammask.mask_tables._StateBuilder._delta`): exact against the brute-force oracle on JSON Schema
grammars, the same masks as tables built whole, from many threads too; ``complete()``, its timeout and the
disk cache.

CI checks a few dozen prefixes, of JSON-Mode-Eval schemas and of schemas with counted length bounds, on cut-down
vocabularies; ``pytest -m slow tests/test_lazy_tables.py`` checks 1,200 of each there, and 1,000 of each on Llama-3's
whole vocabulary.
"""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import get_vocab
from mask_check import check_cuts, unrolled_oracle
from oracle import MaskOracle

import grammask as gm
from grammask import mask_tables
from grammask.automata.lexer import build_lexer
from grammask.batch import fill_masks
from grammask.bitmask import allocate_bitmask
from grammask.errors import CompileTimeoutError, Deadline
from grammask.grammar.json_schema import reader
from grammask.grammar.lark_export import to_lark_text
from grammask.sampler import SentenceSampler

JME = Path(__file__).resolve().parents[2] / "shared" / "data" / "json-mode-eval"
SCHEMAS = (0, 7, 19)  # Lark (the oracle) builds its lexer for these quickly; JME_1 takes it minutes


def _schema(i: int) -> gm.Grammar:
    path = JME / f"JME_{i}.json"
    if not path.exists():
        pytest.skip(f"JSON-Mode-Eval is not at {JME}")
    return gm.Grammar.from_json_schema(json.loads(path.read_text())["schema"], name=f"JME_{i}")


def _small(vocab_name: str, size: int = 4000) -> gm.Vocabulary:
    """The first ``size`` tokens of a vocabulary, its one-byte tokens and EOS (the others dropped: ids kept), so
    that the brute-force oracle stays quick and every text the vocabulary spells still has tokens."""
    vocab = get_vocab(vocab_name)
    tokens = [t if i < size or (t is not None and len(t) == 1) else None for i, t in enumerate(vocab.tokens)]
    return gm.Vocabulary(tokens, eos_ids=sorted(vocab.eos_ids), n_logits=vocab.n_logits, name=f"{vocab_name}-{size}")


def _encode(vocab: gm.Vocabulary, text: str) -> list[int] | None:
    """Greedy longest-match token ids of ``text`` (None where a byte has no token)."""
    ids_of = {t: i for i, t in enumerate(vocab.tokens) if t}
    longest = max(map(len, ids_of))
    data, out, at = text.encode(), [], 0
    while at < len(data):
        for n in range(min(longest, len(data) - at), 0, -1):
            if data[at : at + n] in ids_of:
                out.append(ids_of[data[at : at + n]])
                at += n
                break
        else:
            return None
    return out


def _documents(grammar: gm.Grammar, vocab: gm.Vocabulary, seed: int):
    """Endless (token ids, text) of sampled documents the vocabulary can spell."""
    sampler = SentenceSampler(grammar, max_depth=8)
    rng = random.Random(seed)
    while True:
        text = sampler.sample(rng)
        ids = vocab.encode(text) if vocab.tokenizer is not None else _encode(vocab, text)
        if ids is not None and vocab.decode(ids) == text.encode():
            yield ids, rng


# Schemas whose length bounds are counted beside the lexer state once reader.COUNT_ABOVE is 0 (checked against
# the same schemas with their bounds unrolled).
COUNTED = (
    {"type": "object", "properties": {"name": {"type": "string", "minLength": 2, "maxLength": 12},
                                      "id": {"type": "string", "pattern": "^[a-z]{3,9}$"},
                                      "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}}},
     "required": ["name", "id"]},
    {"type": "object", "properties": {"to": {"type": "string", "minLength": 1, "maxLength": 30},
                                      "n": {"type": "integer"}}, "required": ["to"]},
)


def _cases(vocab: gm.Vocabulary, monkeypatch, counted: bool) -> list[tuple[gm.Grammar, MaskOracle]]:
    """(grammar, its brute-force oracle): JSON-Mode-Eval schemas, or the :data:`COUNTED` ones counted."""
    if not counted:
        return [(g, MaskOracle(to_lark_text(g), build_lexer(g), vocab)) for g in map(_schema, SCHEMAS)]
    out = []
    for i, schema in enumerate(COUNTED):
        with monkeypatch.context() as patch:
            patch.setattr(reader, "COUNT_ABOVE", 0)
            grammar = gm.Grammar.from_json_schema(schema, name=f"counted_{i}")
        assert any(t.count is not None for t in grammar.terminals)
        out.append((grammar, unrolled_oracle(gm.Grammar.from_json_schema(schema, count_lengths=False), vocab)))
    return out


def _oracle_check(vocab: gm.Vocabulary, n_prefixes: int, seed: int, monkeypatch, counted: bool = False) -> int:
    """Lazily compiled schema grammars against the oracle: the number of prefixes checked."""
    compiler = gm.Compiler(vocab, cache=False, lazy=True)
    cases = _cases(vocab, monkeypatch, counted)
    checked = 0
    for k, (grammar, oracle) in enumerate(cases):
        compiled = compiler.compile(grammar)
        assert not compiled.stats.complete
        want = n_prefixes * (k + 1) // len(cases)
        for ids, rng in _documents(grammar, vocab, seed + k):
            if checked >= want:
                break
            cuts = sorted(rng.sample(range(len(ids) + 1), min(6, len(ids) + 1, want - checked)))
            checked += check_cuts(compiled, oracle, vocab, ids, cuts)
    return checked


@pytest.mark.parametrize("counted", [False, True], ids=["plain", "counted"])
@pytest.mark.parametrize("vocab_name", ["smollm2", "llama2"])
def test_lazy_schema_masks_equal_oracle(vocab_name, counted, monkeypatch):
    """On a cut-down vocabulary, states of at least 64 tokens kept as bases so that base-state walks are checked."""
    monkeypatch.setattr(mask_tables, "_BASE_SIZE", 64)
    assert _oracle_check(_small(vocab_name), 12, seed=1, monkeypatch=monkeypatch, counted=counted) == 12


@pytest.mark.slow
@pytest.mark.parametrize("counted", [False, True], ids=["plain", "counted"])
@pytest.mark.parametrize("vocab_name", ["smollm2", "llama2"])
def test_lazy_schema_masks_equal_oracle_many(vocab_name, counted, monkeypatch):
    monkeypatch.setattr(mask_tables, "_BASE_SIZE", 64)
    assert _oracle_check(_small(vocab_name), 1200, seed=2, monkeypatch=monkeypatch, counted=counted) == 1200


@pytest.mark.slow
@pytest.mark.parametrize("counted", [False, True], ids=["plain", "counted"])
def test_lazy_schema_masks_equal_oracle_on_the_full_llama3_vocabulary(counted, monkeypatch):
    """The issue's bar: 1,000 prefixes of schema grammars, lazily built tables, Llama-3's whole vocabulary."""
    assert _oracle_check(get_vocab("llama3"), 1000, seed=3, monkeypatch=monkeypatch, counted=counted) == 1000


def _pairs(tables) -> dict:
    """Every pair's ALWAYS mask and its marked classes (sequence, follow set, tokens), keyed by (lexer state, LR state)."""
    a = tables.arrays()
    out = {}
    for q, p in zip(*np.nonzero(a["pair_index"] >= 0), strict=True):
        i = a["pair_index"][q, p]
        m = a["pair_marks"][i]
        marks = np.unpackbits(a["marks"][a["marks_ptr"][m] : a["marks_ptr"][m + 1]], bitorder="little")
        s0, s1 = a["state_span"][q]
        marked = set()
        for k in np.flatnonzero(marks[: s1 - s0]).tolist():
            c, d = a["state_class"][s0 + k], a["state_dep"][s0 + k]
            seq = tuple(a["class_seq_terms"][a["class_seq_ptr"][c] : a["class_seq_ptr"][c + 1]].tolist())
            lo, hi = a["dep_word_ptr"][d], a["dep_word_ptr"][d + 1]
            tokens = frozenset(zip(a["dep_words"][lo:hi].tolist(), a["dep_bits"][lo:hi].tolist(), strict=True))
            marked.add((seq, int(a["class_follow"][c]), tokens))
        out[int(q), int(p)] = (a["masks"][a["pair_mask"][i]].tobytes(), frozenset(marked))
    return out


@pytest.mark.parametrize("name", ["JME_1", "JME_19", "json"])
def test_base_state_walks_give_the_tables_whole_walks_give(name, monkeypatch):
    vocab = get_vocab("smollm2")
    grammar = gm.Grammar.builtin("json") if name == "json" else _schema(int(name.split("_")[1]))
    walks = gm.Compiler(vocab, cache=False)._trie.walks()
    front = mask_tables.build_front(grammar)
    with_bases = mask_tables.build_mask_tables(front, vocab, walks)[0]
    monkeypatch.setattr(mask_tables, "_DELTA_BYTES", -1)
    whole = mask_tables.build_mask_tables(front, vocab, walks)[0]
    assert (with_bases.built == whole.built).all()
    assert _pairs(with_bases) == _pairs(whole)


def _masks_along(compiled, vocab, documents) -> list[bytes]:
    row = allocate_bitmask(1, vocab.n_logits)[0]
    out = []
    for ids in documents:
        m = compiled.matcher()
        for t in [*ids, None]:
            m.fill_mask(row)
            out.append(row.tobytes())
            if t is not None:
                m.advance(t)
    return out


def test_lazy_tables_from_many_threads_equal_whole_tables():
    vocab = get_vocab("smollm2")
    grammar = _schema(7)
    docs = [ids for (ids, _), _ in zip(_documents(grammar, vocab, 5), range(6), strict=False)]
    want = _masks_along(gm.Compiler(vocab, cache=False).compile(grammar), vocab, docs)
    lazy = gm.Compiler(vocab, cache=False, lazy=True).compile(grammar)
    got: list = [None] * 4
    start = threading.Barrier(4)

    def run(k: int) -> None:
        start.wait()
        got[k] = _masks_along(lazy, vocab, docs[k % 2 :] + docs[: k % 2])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    n_first = sum(len(ids) + 1 for ids in docs[:1])
    assert got[0] == want and got[2] == want
    assert got[1][: len(want) - n_first] == want[n_first:] and got[3] == got[1]


def test_batched_masks_of_a_lazy_grammar():
    vocab = get_vocab("smollm2")
    grammar = _schema(19)
    docs = [ids for (ids, _), _ in zip(_documents(grammar, vocab, 9), range(8), strict=False)]
    whole = gm.Compiler(vocab, cache=False).compile(grammar)
    lazy = gm.Compiler(vocab, cache=False, lazy=True).compile(grammar)
    cuts = [len(ids) // 2 for ids in docs]
    matchers = {}
    for name, compiled in (("whole", whole), ("lazy", lazy)):
        matchers[name] = [compiled.matcher() for _ in docs]
        for m, ids, cut in zip(matchers[name], docs, cuts, strict=True):
            m.accept_tokens(ids[:cut])
    rows = {name: allocate_bitmask(len(docs), vocab.n_logits) for name in matchers}
    fill_masks(matchers["lazy"], rows["lazy"], threads=2)
    for m, row in zip(matchers["whole"], rows["whole"], strict=True):
        m.fill_mask(row)
    assert np.array_equal(rows["lazy"], rows["whole"])


def test_budgeted_masks_of_a_lazy_grammar():
    vocab = get_vocab("smollm2")
    grammar = _schema(1)
    ids, _ = next(_documents(grammar, vocab, 3))
    row = allocate_bitmask(1, vocab.n_logits)[0]
    masks = []
    for lazy in (False, True):
        m = gm.Compiler(vocab, cache=False, lazy=lazy).compile(grammar).matcher(max_tokens=len(ids) + 60)
        seen = []
        for t in ids:
            m.fill_mask(row)
            seen.append(row.tobytes())
            m.advance(t)
        masks.append(seen)
    assert masks[0] == masks[1]


def test_complete_builds_the_rest_writes_the_cache_and_counts(tmp_path):
    vocab = get_vocab("smollm2")
    grammar = _schema(7)
    whole = gm.Compiler(vocab, cache=False).compile(grammar)
    lazy = gm.Compiler(vocab, cache=tmp_path, lazy=True).compile(grammar)
    assert not lazy.stats.complete and lazy.stats.reachable_lexer_states < whole.stats.reachable_lexer_states
    assert not list(tmp_path.glob("*.npz"))
    assert lazy.complete() is lazy
    assert lazy.stats.complete and lazy.stats.reachable_lexer_states == whole.stats.reachable_lexer_states
    assert (lazy.stats.pairs, lazy.stats.masks) == (whole.stats.pairs, whole.stats.masks)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    again = gm.Compiler(vocab, cache=tmp_path, lazy=True).compile(grammar)
    assert again.stats.from_cache and again.stats.complete


def test_complete_stops_at_its_timeout_and_goes_on_later():
    vocab = get_vocab("smollm2")
    lazy = gm.Compiler(vocab, cache=False, lazy=True).compile(_schema(1))
    with pytest.raises(CompileTimeoutError, match="JME_1"):
        lazy.complete(timeout=1e-9)
    assert not lazy.stats.complete
    assert lazy.complete().stats.complete


def test_lazy_compile_keeps_its_deadline():
    vocab = get_vocab("smollm2")
    compiler = gm.Compiler(vocab, cache=False, lazy=True, timeout=1e-9)
    with pytest.raises(CompileTimeoutError):
        compiler.compile(_schema(42))


class _CountingDeadline(Deadline):
    """A deadline that never passes and counts the checks per phase."""

    def __init__(self):
        super().__init__(None)
        self.phases: dict[str, int] = {}

    def check(self, phase: str) -> None:
        self.phases[phase] = self.phases.get(phase, 0) + 1


def test_the_token_verdicts_check_the_deadline_within_a_lexer_state():
    """The branching verdicts of one lexer state can run for seconds (MaskBench's Github_hard---o21322 spent 4.9 s
    there past a 1.9 s timeout): each LR state's classes are preceded by a check."""
    vocab = get_vocab("smollm2")
    deadline = _CountingDeadline()
    front = mask_tables.build_front(gm.Grammar.builtin("c"))
    mask_tables.build_mask_tables(front, vocab, gm.Compiler(vocab, cache=False)._trie.walks(), deadline)
    assert deadline.phases["the token verdicts"] > deadline.phases["the vocabulary walks and token verdicts"]


class _PassesAt(_CountingDeadline):
    """A deadline that passes at its ``n``-th check of the token verdicts."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def check(self, phase: str) -> None:
        super().check(phase)
        if phase == "the token verdicts" and self.phases[phase] == self.n:
            raise CompileTimeoutError("c", phase, 1.0)


@pytest.mark.parametrize("n", [1, 40, 150])
def test_a_timeout_inside_a_lexer_state_loses_nothing(n):
    """Completion stopped inside a state's verdicts goes on later to the same tables as one run through."""
    vocab = get_vocab("smollm2")
    front = mask_tables.build_front(gm.Grammar.builtin("c"))
    walks = gm.Compiler(vocab, cache=False)._trie.walks()
    whole = mask_tables.build_mask_tables(front, vocab, walks)[0]
    stopped = mask_tables.build_mask_tables(front, vocab, walks, lazy=True)[0]
    with pytest.raises(CompileTimeoutError):
        stopped.complete_all(_PassesAt(n))
    stopped.complete_all()
    assert stopped.complete and stopped.counts() == whole.counts()
    assert sorted(stopped.built_order) == sorted(whole.built_order)
    for q in whole.built_order:
        assert _pair_masks(stopped, q) == _pair_masks(whole, q)


def _pair_masks(tables: mask_tables.MaskTables, q: int) -> list[bytes | None]:
    """Lexer state ``q``'s precomputed mask per LR state (None: no pair)."""
    pair_mask = tables.grow["pair_mask"].values
    return [None if p < 0 else tables.masks[pair_mask[p]].tobytes() for p in tables.pair_index(q).tolist()]
