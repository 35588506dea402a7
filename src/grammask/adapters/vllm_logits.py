"""A vLLM v1 custom logits processor that constrains requests to grammask grammars.

This is vLLM's official extension point: pass the class to the engine
(``LLM(model, logits_processors=[GrammaskLogitsProcessor])`` or
``vllm serve ... --logits-processors grammask.adapters.vllm_logits:GrammaskLogitsProcessor``) and give
a request its constraint in ``SamplingParams.extra_args["grammask"]``, one of
``{"json_schema": schema}`` (a dict or its JSON text), ``{"json_object": True}``, ``{"regex": r"..."}``,
``{"grammar": "GBNF or Lark text"}`` or ``{"choice": ["a", "b"]}``; add ``"any_whitespace": True`` to
let JSON Schema output have RFC 8259 whitespace. Requests without it are left alone. The request's
``max_tokens`` is a token budget: the masks keep a complete output within it, so it ends with EOS
rather than being cut (``"budget": False`` turns that off).

vLLM refuses custom logits processors when speculative decoding is on; use
:mod:`grammask.adapters.vllm` there. This module imports vLLM, torch and transformers.
"""

from __future__ import annotations

import json
from typing import Any

import torch
import transformers
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import (
    BatchUpdate,
    LogitsProcessor,
    MoveDirectionality,
)

from grammask.adapters.engine_vocab import engine_vocabulary
from grammask.adapters.request_state import RequestMatcher, fill_rows
from grammask.adapters.requests import grammar_for_request
from grammask.adapters.torch_bitmask import allocate_token_bitmask, apply_token_bitmask_
from grammask.compiler import Compiler
from grammask.errors import ConfigurationError, GrammaskError
from grammask.grammar import Grammar

ARGS_KEY = "grammask"
_KINDS = {"json_schema": "json", "json_object": "json_object", "regex": "regex", "grammar": "ebnf", "choice": "choice"}


def request_grammar(params: SamplingParams) -> Grammar | None:
    """The grammar a request asks for in ``extra_args["grammask"]``, or None when it asks for none.

    Raises :class:`~grammask.errors.ConfigurationError` (a ``ValueError``, which vLLM reports as a bad
    request) for arguments that are not one known key with a valid value, or a grammar grammask refuses.
    """
    args = (params.extra_args or {}).get(ARGS_KEY)
    if args is None:
        return None
    kinds = [k for k in _KINDS if k in (args if isinstance(args, dict) else {})]
    if len(kinds) != 1:
        raise ConfigurationError(f"extra_args[{ARGS_KEY!r}] needs exactly one of {', '.join(_KINDS)}, got {args!r}")
    kind = kinds[0]
    spec = args[kind]
    if kind == "json_schema" and not isinstance(spec, str) or kind == "choice":
        spec = json.dumps(spec)
    try:
        return grammar_for_request(_KINDS[kind], "" if kind == "json_object" else spec,
                                   any_whitespace=bool(args.get("any_whitespace", False)))
    except GrammaskError as exc:
        if isinstance(exc, ValueError):
            raise
        raise ConfigurationError(f"grammask cannot use the {kind} of this request: {exc}") from exc


class GrammaskLogitsProcessor(LogitsProcessor):
    """Masks each constrained request's logits row to the tokens its grammar allows next.

    Grammars compile on the engine's thread when a request joins the batch (cached by the compiler). The rows of a
    step are filled in one batched call (:func:`~grammask.adapters.request_state.fill_rows`).
    Constructing it raises :class:`~grammask.errors.VocabularyError` for a tokenizer grammask cannot read.
    """

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Check a request's ``extra_args["grammask"]`` at submission (raises what :func:`request_grammar` raises)."""
        request_grammar(sampling_params)

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool):
        model_config = vllm_config.model_config
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            model_config.tokenizer,
            revision=getattr(model_config, "tokenizer_revision", None),
            trust_remote_code=getattr(model_config, "trust_remote_code", False),
        )
        self.vocab_size = model_config.get_vocab_size()
        self.compiler = Compiler(engine_vocabulary(tokenizer, self.vocab_size), lazy=True)
        self._rows: dict[int, tuple[RequestMatcher, list[int], list[int]]] = {}

    def is_argmax_invariant(self) -> bool:
        """False: masking changes the greedy choice."""
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Follow requests joining, leaving and moving within the batch."""
        if batch_update is None:
            return
        for index in batch_update.removed:
            self._rows.pop(index, None)
        for index, params, _prompt, output_ids in batch_update.added:
            grammar = request_grammar(params) if params is not None else None
            if grammar is None:
                self._rows.pop(index, None)
            else:
                budget = params.max_tokens if params.extra_args[ARGS_KEY].get("budget", True) else None
                state = RequestMatcher(self.compiler.compile(grammar), max_tokens=budget)
                self._rows[index] = (state, output_ids, [0])
        for a, b, direction in batch_update.moved:
            row_a, row_b = self._rows.pop(a, None), self._rows.pop(b, None)
            if row_a is not None:
                self._rows[b] = row_a
            if direction == MoveDirectionality.SWAP and row_b is not None:
                self._rows[a] = row_b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Advance each constrained request by its new output tokens and mask its row; returns ``logits``."""
        if not self._rows:
            return logits
        indices = sorted(self._rows)
        bitmask = allocate_token_bitmask(len(indices), logits.shape[1])
        for index in indices:
            state, output_ids, seen = self._rows[index]
            for token in output_ids[seen[0]:]:
                if token < 0:  # a placeholder for a token not sampled yet
                    break
                if not state.is_terminated():
                    state.accept(token)
                seen[0] += 1
        fill_rows([self._rows[index][0] for index in indices], bitmask.numpy(), range(len(indices)))
        if len(indices) == logits.shape[0]:
            apply_token_bitmask_(logits, bitmask)
        else:
            rows = torch.tensor(indices, device=logits.device)
            logits[rows] = apply_token_bitmask_(logits[rows], bitmask)
        return logits
