"""Decoding strategies on a tiny deterministic bigram model with the real grammar engine."""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grammask
import grammask.decoding as dec
from grammask.compiler import compile
from grammask.errors import DecodingError, GrammarError
from grammask.grammar import Grammar
from grammask.vocab import Vocabulary

TOKENS = [None, b"[", b"]", b",", b"1", b"2", b"12", b" ", b"a", None]
EOS, BOS = 0, 9
LIST_GRAMMAR = Grammar.from_lark(
    """
start: "[" (NUM ("," NUM)*)? "]"
NUM: /[0-9]+/
%ignore " "
"""
)


@dataclass(frozen=True)
class ToyState:
    length: int
    logits: np.ndarray


class BigramModel:
    """Logits of the next token depend on the last token only: a fixed table. Counts forward passes."""

    def __init__(self, table: np.ndarray, eos_ids=(EOS,)):
        self.table = np.asarray(table, dtype=np.float32)
        self.n_logits = self.table.shape[1]
        self.eos_ids = frozenset(eos_ids)
        self.forwards = 0

    @classmethod
    def random(cls, seed: int, n: int = len(TOKENS), scale: float = 3.0) -> BigramModel:
        return cls(np.random.default_rng(seed).normal(size=(n, n)) * scale)

    def start(self, prompt_ids):
        return ToyState(len(prompt_ids), self.table[prompt_ids[-1]])

    def extend(self, states, token_ids):
        self.forwards += len(states)
        return [ToyState(s.length + 1, self.table[t]) for s, t in zip(states, token_ids)]


class ToyTextModel(BigramModel):
    """The bigram model with a vocabulary and byte-level text, for :func:`grammask.generate`."""

    vocab = Vocabulary(TOKENS, eos_ids=[EOS], special_ids=[BOS])
    context_window = 64

    def encode_prompt(self, prompt, *, chat=None):
        return [BOS] + [TOKENS.index(c.encode()) for c in prompt]

    def decode(self, token_ids):
        return b"".join(TOKENS[t] for t in token_ids).decode()


@pytest.fixture(scope="module")
def compiled():
    return compile(LIST_GRAMMAR, ToyTextModel.vocab, cache=False)


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    return x - (x.max() + np.log(np.exp(x - x.max()).sum()))


def allowed(matcher) -> np.ndarray:
    return matcher.allowed_tokens()


def accepts_whole(compiled, tokens, reason) -> bool:
    """True iff a fresh matcher takes every token, and the output is a whole sentence when it ended."""
    m = compiled.matcher()
    for t in tokens:
        if not m.accept_token(t):
            return False
    return m.is_accepting() or reason == "max_tokens"


def test_greedy_unconstrained_follows_the_argmax_chain_to_eos():
    table = np.zeros((10, 10))
    table[BOS, 4] = table[4, 3] = table[3, 5] = table[5, EOS] = 5.0
    model = BigramModel(table)
    out = dec.Greedy().decode(model, [BOS], max_tokens=10)
    assert out.tokens == [4, 3, 5]
    assert out.stats.stop_reason == "eos" and out.stats.steps == 4 and out.stats.tokens == 3
    assert model.forwards == 3 == out.stats.forward_passes


def test_greedy_stops_at_max_tokens():
    out = dec.Greedy().decode(BigramModel(np.eye(10) * 5), [4], max_tokens=3)
    assert out.tokens == [4, 4, 4] and out.stats.stop_reason == "max_tokens"


@given(seed=st.integers(0, 10_000))
@settings(max_examples=30, deadline=None)
def test_constrained_greedy_takes_the_best_allowed_token_each_step(seed, compiled):
    model = BigramModel.random(seed)
    out = dec.Greedy().decode(model, [BOS], compiled.matcher(), max_tokens=12)
    m, last = compiled.matcher(), BOS
    for t in out.tokens + ([EOS] if out.stats.stop_reason == "eos" else []):
        ok = allowed(m)
        assert t in ok
        assert t == ok[np.argmax(model.table[last][ok])]
        m.advance(t)
        last = t
    assert out.stats.mask_seconds > 0


@pytest.mark.parametrize(
    "strategy",
    [
        dec.Greedy(),
        dec.Sample(),
        dec.Sample(temperature=0.5, top_k=3, top_p=0.9),
        dec.BeamSearch(3),
        dec.MCTS(trials=8),
        dec.MCTS(trials=8, batch=4),
    ],
    ids=["greedy", "sample", "sample-filtered", "beam", "mcts", "mcts-batched"],
)
@given(seed=st.integers(0, 10_000))
@settings(max_examples=15, deadline=None)
def test_every_strategy_keeps_the_output_in_the_grammar(strategy, seed, compiled):
    out = strategy.decode(BigramModel.random(seed), [BOS], compiled.matcher(), max_tokens=10, seed=seed)
    assert 1 <= out.stats.steps <= 11
    assert accepts_whole(compiled, out.tokens, out.stats.stop_reason)


@given(seed=st.integers(0, 10_000))
@settings(max_examples=30, deadline=None)
def test_checking_the_unmasked_choice_first_changes_no_greedy_output(seed, compiled):
    model = BigramModel.random(seed)
    fast = dec.Greedy().decode(model, [BOS], compiled.matcher(), max_tokens=12)
    full = dec.Greedy(check_first=False).decode(model, [BOS], compiled.matcher(), max_tokens=12)
    assert fast.tokens == full.tokens and fast.stats.stop_reason == full.stats.stop_reason


class CountingMatcher:
    """Wraps a matcher and counts full-mask computations."""

    def __init__(self, inner, counts):
        self.inner, self.counts = inner, counts

    def fill_mask(self, row):
        self.counts["fill_mask"] += 1
        self.inner.fill_mask(row)

    def advance(self, token_id):
        self.inner.advance(token_id)

    def is_accepting(self):
        return self.inner.is_accepting()

    def is_terminated(self):
        return self.inner.is_terminated()

    def fork(self):
        return CountingMatcher(self.inner.fork(), self.counts)


def test_no_full_mask_is_computed_while_the_model_follows_the_grammar(compiled):
    table = np.full((10, 10), -5.0)
    table[BOS, 1] = table[1, 4] = table[4, 3] = table[3, 5] = table[5, 2] = table[2, EOS] = 5.0
    for strategy, expected_masks in [(dec.Greedy(), 0), (dec.Sample(), 0), (dec.Greedy(check_first=False), 6)]:
        counts = {"fill_mask": 0}
        out = strategy.decode(
            BigramModel(table), [BOS], CountingMatcher(compiled.matcher(), counts), max_tokens=10, seed=0
        )
        if expected_masks == 0:
            assert out.tokens == [1, 4, 3, 5, 2]
        assert counts["fill_mask"] == expected_masks, strategy
    table[3, 2] = 9.0  # after ",", the model now prefers "]": rejected, so that step computes the mask
    counts = {"fill_mask": 0}
    out = dec.Greedy().decode(BigramModel(table), [BOS], CountingMatcher(compiled.matcher(), counts), max_tokens=10)
    assert out.tokens == [1, 4, 3, 5, 2] and counts["fill_mask"] == 1


class CompilingMatcher(CountingMatcher):
    """A matcher whose first mask readies a numba kernel (compiles it, or loads it from numba's disk cache),
    as grammask's own do on first use."""

    def __init__(self, inner, counts, kernel):
        super().__init__(inner, counts)
        self.kernel = kernel

    def fill_mask(self, row):
        self.kernel(np.arange(3))
        super().fill_mask(row)

    def fork(self):
        return CompilingMatcher(self.inner.fork(), self.counts, self.kernel)


def decode_with_kernel(compiled, kernel, counts: dict) -> dec.GenerationStats:
    """The stats of a greedy decode whose masks call ``kernel``."""
    matcher = CompilingMatcher(compiled.matcher(), counts, kernel)
    return dec.Greedy(check_first=False).decode(BigramModel.random(0), [BOS], matcher, max_tokens=5).stats


def test_kernel_compilation_is_kept_out_of_the_mask_time(compiled):
    import numba

    @numba.njit
    def kernel(a):
        return a.sum()

    counts = {"fill_mask": 0}
    stats = decode_with_kernel(compiled, kernel, counts)
    assert counts["fill_mask"] >= 1
    assert stats.compile_seconds > 0.01
    assert 0 < stats.mask_seconds < stats.compile_seconds
    assert stats.seconds >= stats.compile_seconds + stats.mask_seconds
    assert ("kernels compiled or loaded on first use" in stats.summary()) == (stats.compile_seconds >= 0.05)


def test_kernels_loaded_from_numbas_disk_cache_are_kept_out_of_the_mask_time(compiled, tmp_path, monkeypatch):
    import importlib
    import subprocess
    import sys

    (tmp_path / "cached_kernel.py").write_text(
        "import numba\n\n@numba.njit(cache=True)\ndef kernel(a):\n    return a.sum() * 3 + a.max()\n"
    )
    subprocess.run([sys.executable, "-c", "import cached_kernel, numpy; cached_kernel.kernel(numpy.arange(3))"],
                   cwd=tmp_path, check=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    kernel = importlib.import_module("cached_kernel").kernel
    stats = decode_with_kernel(compiled, kernel, {"fill_mask": 0})
    assert sum(kernel.stats.cache_hits.values()) == 1 and not kernel.stats.cache_misses
    assert stats.compile_seconds > 0
    assert 0 < stats.mask_seconds
    assert stats.seconds >= stats.compile_seconds + stats.mask_seconds


def test_unconstrained_outputs_leave_the_grammar_for_some_model(compiled):
    outs = [dec.Greedy().decode(BigramModel.random(s), [BOS], max_tokens=10) for s in range(20)]
    assert not all(accepts_whole(compiled, o.tokens, o.stats.stop_reason) for o in outs)


def test_sampling_is_reproducible_with_a_seed_and_varies_without_one(compiled):
    model = BigramModel.random(3, scale=0.5)
    runs = [dec.Sample().decode(model, [BOS], compiled.matcher(), max_tokens=8, seed=7).tokens for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    others = {
        tuple(dec.Sample().decode(model, [BOS], compiled.matcher(), max_tokens=8, seed=s).tokens) for s in range(20)
    }
    assert len(others) > 1


def test_top_k_one_is_greedy(compiled):
    for seed in range(10):
        model = BigramModel.random(seed)
        greedy = dec.Greedy().decode(model, [BOS], compiled.matcher(), max_tokens=10).tokens
        assert dec.Sample(top_k=1).decode(model, [BOS], compiled.matcher(), max_tokens=10, seed=seed).tokens == greedy


def test_sampling_distribution_is_the_masked_tempered_softmax():
    logits = np.array([0.0, 1.0, 2.0, -np.inf, 0.5, 3.0], dtype=np.float32)
    p = dec.Sample(temperature=2.0).probabilities(logits)
    expected = np.exp(np.where(np.isinf(logits), -np.inf, logits / 2.0))
    assert np.allclose(p, expected / expected.sum())
    assert p[3] == 0
    top_k = dec.Sample(top_k=2).probabilities(logits)
    assert set(np.flatnonzero(top_k)) == {2, 5}
    top_p = dec.Sample(top_p=0.7).probabilities(logits)
    full = dec.Sample().probabilities(logits)
    assert set(np.flatnonzero(top_p)) == {2, 5} and full[5] < 0.7 <= full[5] + full[2]
    assert np.isclose(top_p.sum(), 1.0)


def test_sampled_first_tokens_follow_the_masked_distribution(compiled):
    model = BigramModel.random(11, scale=1.0)
    m = compiled.matcher()
    m.advance(1)  # "[": several tokens allowed next
    counts = np.zeros(model.n_logits)
    n = 3000
    rng = np.random.default_rng(0)
    for _ in range(n):
        out = dec.Sample().decode(model, [1], m.fork(), max_tokens=1, seed=int(rng.integers(1 << 30)))
        counts[out.tokens[0] if out.tokens else EOS] += 1
    ok = allowed(m)
    expected = np.zeros(model.n_logits)
    expected[ok] = np.exp(log_softmax(model.table[1][ok]))
    assert counts[np.setdiff1d(np.arange(model.n_logits), ok)].sum() == 0
    assert np.abs(counts / n - expected).max() < 0.04


def all_outputs(compiled, max_tokens):
    """Every (tokens, reason) a decoding could end with: EOS after a sentence, or a sentence of max_tokens."""
    out = []
    for length in range(max_tokens + 1):
        for seq in itertools.product(range(1, 9), repeat=length):
            m = compiled.matcher()
            if not all(m.accept_token(t) for t in seq):
                continue
            if m.is_accepting():
                out.append((seq, "eos"))
                if length == max_tokens:
                    out.append((seq, "max_tokens"))
    return out


def normalised_score(model, seq, reason, length_penalty):
    path = [BOS, *seq] + ([EOS] if reason == "eos" else [])
    logp = sum(log_softmax(model.table[a])[b] for a, b in itertools.pairwise(path))
    return logp / (len(path) - 1) ** length_penalty


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_wide_beam_search_finds_the_best_normalised_output(compiled, length_penalty):
    max_tokens = 4
    outputs = all_outputs(compiled, max_tokens)
    for seed in range(5):
        model = BigramModel.random(seed)
        best = max(outputs, key=lambda o, m=model: normalised_score(m, *o, length_penalty))
        beam = dec.BeamSearch(width=5000, length_penalty=length_penalty)
        out = beam.decode(model, [BOS], compiled.matcher(), max_tokens=max_tokens)
        got = normalised_score(model, tuple(out.tokens), out.stats.stop_reason, length_penalty)
        assert math.isclose(got, normalised_score(model, *best, length_penalty), rel_tol=1e-9)


def test_beam_search_extends_all_beams_in_one_batch(compiled):
    calls = []

    class Recording(BigramModel):
        def extend(self, states, token_ids):
            calls.append(len(states))
            return super().extend(states, token_ids)

    model = Recording(BigramModel.random(5).table)
    out = dec.BeamSearch(width=3).decode(model, [BOS], compiled.matcher(), max_tokens=8)
    assert max(calls) == 3 and len(calls) <= 8
    assert out.stats.forward_passes == sum(calls)


def test_beam_search_returns_a_truncated_beam_when_nothing_finished(compiled):
    table = np.zeros((10, 10))
    table[BOS, 1] = table[1, 4] = table[4, 6] = table[6, 4] = 9.0
    out = dec.BeamSearch(width=2).decode(BigramModel(table), [BOS], compiled.matcher(), max_tokens=4)
    assert out.stats.stop_reason == "max_tokens" and len(out.tokens) == 4


def trap_model() -> BigramModel:
    """Greedy opens with "1" (likely), after which the grammar forces "]"... which the model finds very unlikely;
    opening with "2" is a little less likely but its continuation "]" and EOS are very likely."""
    table = np.full((10, 10), -4.0)
    table[1, 4], table[1, 5] = 3.0, 2.6  # after "[": "1" slightly preferred over "2"
    table[4, 3] = 8.0  # after "1" the model wants ","
    table[4, 2] = -6.0  # ... and finds "]" very unlikely
    table[5, 2] = 8.0  # after "2": "]"
    table[2, EOS] = 8.0
    table[3, 4] = 8.0  # after ",": "1"
    return BigramModel(table)


ONE_NUMBER = Grammar.from_lark('start: "[" ("1" | "2") "]"')


@pytest.mark.parametrize("batch", [1, 5])
def test_mcts_avoids_a_grammar_trap_that_greedy_walks_into(batch):
    c = compile(ONE_NUMBER, ToyTextModel.vocab, cache=False)
    start = c.matcher()
    start.advance(1)
    greedy = dec.Greedy().decode(trap_model(), [1], start.fork(), max_tokens=5)
    mcts = dec.MCTS(batch=batch).decode(trap_model(), [1], start.fork(), max_tokens=5)
    assert greedy.tokens == [4, 2]
    assert mcts.tokens == [5, 2] and mcts.stats.stop_reason == "eos"


def test_batched_mcts_shares_forward_passes_between_the_trials_of_a_wave(compiled):
    calls = {1: [], 5: []}

    class Recording(BigramModel):
        def __init__(self, table, log):
            super().__init__(table)
            self.log = log

        def extend(self, states, token_ids):
            self.log.append(len(states))
            return super().extend(states, token_ids)

    table = BigramModel.random(6).table
    for batch, log in calls.items():
        out = dec.MCTS(trials=20, batch=batch).decode(Recording(table, log), [BOS], compiled.matcher(), max_tokens=8)
        assert accepts_whole(compiled, out.tokens, out.stats.stop_reason)
        assert out.stats.forward_passes == sum(log)
    assert max(calls[1]) == 1 and max(calls[5]) > 1
    assert len(calls[5]) < len(calls[1])


def test_mcts_reuses_its_tree_and_simulations_instead_of_rerunning_the_model():
    model = BigramModel.random(2)
    out = dec.MCTS(trials=20).decode(
        model, [BOS], compile(ONE_NUMBER, ToyTextModel.vocab, cache=False).matcher(), max_tokens=6
    )
    # "[" is forced (one forward pass, no search); each of "1" and "2" costs one pass when expanded and one
    # for the "]" its simulation reaches; committing them later reuses those nodes: 20 trials, 5 passes.
    assert out.tokens[0] == 1 and out.tokens[2] == 2 and out.stats.stop_reason == "eos"
    assert model.forwards <= 5


def test_mcts_is_deterministic(compiled):
    runs = {
        tuple(dec.MCTS(trials=10).decode(BigramModel.random(4), [BOS], compiled.matcher(), max_tokens=8).tokens)
        for _ in range(2)
    }
    assert len(runs) == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda: dec.Sample(temperature=0),
        lambda: dec.Sample(top_p=0),
        lambda: dec.Sample(top_k=0),
        lambda: dec.BeamSearch(width=0),
        lambda: dec.MCTS(trials=0),
        lambda: dec.MCTS(batch=0),
        lambda: dec.strategy_from_name("nucleus"),
        lambda: dec.strategy_from_name("beam", widht=2),
    ],
)
def test_bad_strategy_parameters_are_reported(make):
    with pytest.raises(DecodingError):
        make()


def test_max_tokens_must_be_positive():
    with pytest.raises(DecodingError, match="max_tokens"):
        dec.Greedy().decode(BigramModel.random(0), [BOS], max_tokens=0)


def test_generate_runs_text_to_text_on_any_text_model(compiled):
    model = ToyTextModel(BigramModel.random(8).table)
    for name in dec.STRATEGIES:
        gen = dec.generate(model, "[1", LIST_GRAMMAR, max_tokens=6, strategy=name, seed=1)
        assert gen.text == model.decode(gen.tokens)
        assert accepts_whole(compiled, gen.tokens, gen.stats.stop_reason)
        assert gen.stats.prompt_tokens == 3
    assert grammask.generate(model, "[", compiled, max_tokens=3).stats.tokens <= 3
    assert dec.generate(model, "[", None, max_tokens=3).stats.mask_seconds == 0


def test_generate_rejects_prompts_past_the_context_window():
    model = ToyTextModel(BigramModel.random(8).table)
    with pytest.raises(DecodingError, match="context window of 64"):
        dec.generate(model, "1" * 70, None, max_tokens=2)
    with pytest.raises(DecodingError, match="lower max_tokens to at most 54"):
        dec.generate(model, "1" * 9, None, max_tokens=60)


def test_generate_rejects_a_grammar_compiled_for_another_vocabulary():
    other = Vocabulary([None, b"[", b"]", b"1"], eos_ids=[0])
    with pytest.raises(GrammarError, match="compiled for vocabulary"):
        dec.generate(ToyTextModel(BigramModel.random(0).table), "[", compile(ONE_NUMBER, other, cache=False))


class BatchRecording(BigramModel):
    """The bigram model, logging the size of every forward pass."""

    def __init__(self, table):
        super().__init__(table)
        self.batches = []

    def extend(self, states, token_ids):
        self.batches.append(len(states))
        return super().extend(states, token_ids)


@pytest.mark.parametrize(
    "strategy",
    [dec.Greedy(), dec.Sample(), dec.BeamSearch(3), dec.MCTS(trials=8), dec.MCTS(trials=8, batch=4)],
    ids=["greedy", "sample", "beam", "mcts", "mcts-batched"],
)
@given(seed=st.integers(0, 10_000))
@settings(max_examples=10, deadline=None)
def test_decode_many_gives_each_prompt_what_decode_gives_alone(strategy, seed, compiled):
    table = BigramModel.random(seed).table
    prompts, limits = [[BOS], [3], [BOS, 7], [4]], [10, 4, 7, 1]
    together = BatchRecording(table)
    outs = strategy.decode_many(together, prompts, [compiled.matcher() for _ in prompts], max_tokens=limits, seed=seed)
    alone_batches = []
    for prompt, limit, out in zip(prompts, limits, outs):
        model = BatchRecording(table)
        alone = strategy.decode(model, prompt, compiled.matcher(), max_tokens=limit, seed=seed)
        alone_batches += model.batches
        assert out.tokens == alone.tokens and out.stats.stop_reason == alone.stats.stop_reason
        assert out.stats.forward_passes == alone.stats.forward_passes
        assert accepts_whole(compiled, out.tokens, out.stats.stop_reason)
    assert sum(together.batches) == sum(alone_batches)
    assert len(together.batches) <= len(alone_batches)


def test_decode_many_batches_the_searches_forward_passes(compiled):
    model = BatchRecording(BigramModel.random(5).table)
    outs = dec.MCTS(trials=10).decode_many(model, [[BOS]] * 6, [compiled.matcher() for _ in range(6)], max_tokens=8)
    assert len({tuple(o.tokens) for o in outs}) == 1
    assert max(model.batches) == 6
    assert sum(o.stats.model_seconds for o in outs) > 0 and all(o.stats.seconds > 0 for o in outs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"prompts": [[BOS], [BOS]], "matchers": [None], "max_tokens": 3}, "2 prompts but 1 matchers"),
        ({"prompts": [[BOS], [BOS]], "max_tokens": [3]}, "2 prompts but 1 max_tokens limits"),
        ({"prompts": [[BOS], [BOS]], "max_tokens": [3, 0]}, "max_tokens must be at least 1"),
        ({"prompts": [[BOS], []], "max_tokens": 3}, "a prompt has no tokens"),
    ],
)
def test_decode_many_rejects_mismatched_arguments(kwargs, message):
    with pytest.raises(DecodingError, match=message):
        dec.Greedy().decode_many(BigramModel.random(0), **kwargs)


# ---- stop sequences ---------------------------------------------------------------------------


def test_stop_rule_ends_only_where_the_text_before_is_a_sentence(compiled):
    rule = dec.StopRule(["  "], compiled)
    assert rule.cut(b"[1]  ") == 3
    assert rule.cut(b"[1  ,2]") is None
    assert rule.cut(b"[1  ,2]  ", since=7) == 7
    assert dec.StopRule(["  "], None).cut(b"[1  ,2]") == 2
    assert dec.StopRule(["2", "  "], None).cut(b"[1  ,2]") == 2
    with pytest.raises(DecodingError):
        dec.StopRule([""], None)


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam", "mcts"])
def test_generate_stops_at_a_stop_sequence_with_a_sentence_before_it(strategy, compiled):
    stopped = 0
    for seed in range(12):
        table = BigramModel.random(seed).table
        for digits in (b"1", b"2", b"12"):
            table[TOKENS.index(digits), TOKENS.index(b"]")] += 3.0  # lists that end early ...
        table[TOKENS.index(b"]"), TOKENS.index(b" ")] += 6.0  # ... then a space, where stopping may happen
        model = ToyTextModel(table)
        params = {"trials": 4} if strategy == "mcts" else {}
        out = grammask.generate(
            model, "[", compiled, max_tokens=20, strategy=dec.strategy_from_name(strategy, **params), seed=seed,
            stop=[" ", "1,"],
        )
        full = model.vocab.decode(out.tokens)
        if out.stats.stop_reason == "stop":
            stopped += 1
            assert compiled.matcher(prefix=out.text).is_accepting(), (seed, out.text)
            assert full[len(out.text):].startswith((b" ", b"1,"))
        else:
            assert out.text == full.decode()
    assert stopped >= 2


def test_generate_keeps_budgets_for_a_grammar_with_resolved_conflicts():
    dangling = Grammar.from_lark('start: "[" s "]"\ns: "a" s | "a" s "," s | "1"\n')
    model = ToyTextModel(BigramModel.random(3).table)
    for seed in range(5):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*no token budget")
            out = grammask.generate(model, "[", dangling, max_tokens=8, strategy="sample", seed=seed)
        assert out.stats.stop_reason == "eos" and len(out.tokens) <= 8
        assert accepts_whole(compile(dangling, model.vocab, cache=False), out.tokens, out.stats.stop_reason)
