"""The budget in every generation path: ``grammask.generate`` with each strategy, the HF logits processor, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from lark import Lark
from lark.exceptions import LarkError

import grammask.decoding as dec
from grammask import Grammar, Vocabulary, compile

NESTED = r"""
start: value
value: "[" (value ("," value)*)? "]" | NUM
NUM: /[0-9]+/
%ignore " "
"""
TOKENS = [None, b"[", b"]", b",", b"1", b"[[", b"]]", b" ", None]
BOS, EOS = 0, len(TOKENS) - 1
# What the toy model likes after any token: opening brackets most, the end least.
PREFERENCE = np.array([-9, 5, 1, 2, 3, 4, 0, 0.5, -5], dtype=np.float32)


@dataclass(frozen=True)
class _State:
    length: int
    logits: np.ndarray


class RamblingModel:
    """A text model that would nest brackets forever: without a budget its output is cut off."""

    vocab = Vocabulary(TOKENS, eos_ids=[EOS], special_ids=[BOS], name="rambling")
    n_logits = len(TOKENS)
    eos_ids = frozenset([EOS])
    context_window = None

    def encode_prompt(self, prompt: str, *, chat: bool | None = None) -> list[int]:
        return [BOS]

    def decode(self, token_ids) -> str:
        return b"".join(TOKENS[t] for t in token_ids if TOKENS[t]).decode()

    def start(self, prompt_ids):
        return _State(len(prompt_ids), PREFERENCE)

    def extend(self, states, token_ids):
        noise = np.random.default_rng(sum(token_ids)).normal(scale=0.3, size=len(TOKENS)).astype(np.float32)
        return [_State(s.length + 1, PREFERENCE + noise) for s in states]


def _parses(text: str) -> bool:
    try:
        Lark(NESTED, parser="lalr").parse(text)
    except LarkError:
        return False
    return True


@pytest.mark.parametrize("strategy", list(dec.STRATEGIES))
@pytest.mark.parametrize("budget", [3, 8, 15])
def test_generate_ends_complete_within_max_tokens(strategy, budget):
    model = RamblingModel()
    grammar = Grammar.from_lark(NESTED, name="nested")
    gen = dec.generate(model, "go", grammar, max_tokens=budget, strategy=strategy, seed=0)
    assert gen.stats.stop_reason == "eos"
    assert len(gen.tokens) + 1 <= budget  # EOS counts in the budget
    assert _parses(gen.text), gen.text
    # The same decoding with the grammar's masks alone runs into the limit and is cut off.
    compiled = compile(grammar, model.vocab)
    cut = dec.strategy_from_name(strategy).decode(model, [BOS], compiled.matcher(), max_tokens=budget, seed=0)
    assert cut.stats.stop_reason == "max_tokens" and not _parses(model.decode(cut.tokens))


def test_generate_reports_a_budget_below_the_shortest_output():
    from grammask.errors import BudgetError

    with pytest.raises(BudgetError, match="max_tokens=2"):
        dec.generate(RamblingModel(), "go", Grammar.from_lark('start: "[" "1" "]"'), max_tokens=2)


# ---- the real default model: the HF logits processor and the command line ---------------------


def test_hf_logits_processor_keeps_model_generate_within_max_new_tokens():
    torch = pytest.importorskip("torch", reason="the 'hf' extra is not installed")
    pytest.importorskip("transformers", reason="the 'hf' extra is not installed")
    from grammask.adapters.hf import GrammarLogitsProcessor
    from grammask.models.default import default_model_dir
    from grammask.models.hf import load_hf_model

    torch.set_num_threads(1)
    model = load_hf_model(default_model_dir())
    compiled = compile(Grammar.builtin("json"), model.vocab)
    prompt = torch.tensor([model.encode_prompt("Write a JSON list of the numbers from 1 to 100.")])
    for budget in (6, 12):
        proc = GrammarLogitsProcessor(compiled, batch_size=1, max_new_tokens=budget)
        out = model.model.generate(prompt, logits_processor=[proc], max_new_tokens=budget, do_sample=False,
                                   eos_token_id=sorted(model.eos_ids), pad_token_id=2)
        new = out[0, prompt.shape[1]:].tolist()
        assert len(new) <= budget and new[-1] in model.eos_ids
        json.loads(model.decode(new[:-1]))


def test_cli_max_tokens_bounds_a_complete_output():
    pytest.importorskip("transformers", reason="the 'hf' extra is not installed")
    done = subprocess.run(
        [sys.executable, "-m", "grammask.cli", "generate", "Write a JSON list of the numbers from 1 to 100.",
         "--grammar", "json", "--max-tokens", "9", "--json-out"],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["stats"]["stop_reason"] == "eos" and len(out["tokens"]) <= 8
    json.loads(out["text"])
