"""vLLM v1 structured-output backend: :class:`GrammaskBackend` and :class:`GrammaskGrammar`.

They implement ``vllm.v1.structured_output.backend_types.StructuredOutputBackend`` and
``StructuredOutputGrammar``: JSON Schema, JSON object, regex, grammar (GBNF or Lark) and choice
requests compile through one :class:`~grammask.compiler.Compiler`; each request's grammar accepts,
validates (without advancing) and rolls back tokens, as vLLM's speculative decoding does, and fills
int32 bitmask rows in vLLM's layout. Structural-tag requests raise
:class:`~grammask.errors.GrammarError`.

vLLM chooses its backend by name from a fixed list and has no hook for another one, so using this
backend means assigning it to the engine's ``StructuredOutputManager`` (see the README); it is not an
official vLLM extension. The official extension point is a custom logits processor:
:mod:`grammask.adapters.vllm_logits`.

This module imports vLLM and torch; ``grammask`` itself needs neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)

from grammask.adapters.engine_vocab import engine_vocabulary
from grammask.adapters.request_state import RequestMatcher
from grammask.adapters.requests import grammar_for_request
from grammask.adapters.torch_bitmask import allocate_token_bitmask
from grammask.compiler import Compiler

BACKEND_NAME = "grammask"

_KINDS = {
    StructuredOutputOptions.JSON: "json",
    StructuredOutputOptions.JSON_OBJECT: "json_object",
    StructuredOutputOptions.REGEX: "regex",
    StructuredOutputOptions.GRAMMAR: "ebnf",
    StructuredOutputOptions.CHOICE: "choice",
    StructuredOutputOptions.STRUCTURAL_TAG: "structural_tag",
}


class GrammaskGrammar(StructuredOutputGrammar):
    """One request's grammar for vLLM's scheduler (tokens after the end of the output are ignored)."""

    def __init__(self, state: RequestMatcher):
        self.state = state

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Advance by ``tokens``; False at the first one the grammar refuses (those before it stay accepted)."""
        for token in tokens:
            if self.state.is_terminated():
                return True
            if not self.state.accept(int(token)):
                return False
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` the grammar accepts, up to the end of the output; state unchanged."""
        if self.state.is_terminated():
            return []
        return list(tokens[: self.state.validate(tokens)])

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens.

        Raises :class:`~grammask.errors.MatcherStateError` if fewer were accepted.
        """
        self.state.rollback(num_tokens)

    def fill_bitmask(self, bitmask: torch.Tensor, batch_index: int) -> None:
        """Write the allowed tokens into row ``batch_index`` of a CPU int32 bitmask."""
        self.state.fill(bitmask[batch_index].numpy())

    def is_terminated(self) -> bool:
        """True once EOS or one of the request's stop tokens has been accepted."""
        return self.state.is_terminated()

    def reset(self) -> None:
        """Back to the start of the output."""
        self.state.rollback(self.state.num_tokens)


@dataclass
class GrammaskBackend(StructuredOutputBackend):
    """Compiles vLLM's structured-output requests with grammask (one compiler per engine).

    JSON Schema output admits RFC 8259 whitespace unless vLLM's ``disable_any_whitespace`` is set.
    Constructing it raises :class:`~grammask.errors.VocabularyError` for a tokenizer grammask cannot read.
    """

    compiler: Compiler = field(init=False, repr=False)
    any_whitespace: bool = field(init=False)

    def __post_init__(self) -> None:
        config = getattr(self.vllm_config, "structured_outputs_config", None)
        self.any_whitespace = not getattr(config, "disable_any_whitespace", False)
        self.compiler = Compiler(engine_vocabulary(self.tokenizer, self.vocab_size), lazy=True)

    def compile_grammar(
        self,
        request_type: StructuredOutputOptions,
        grammar_spec: str,
        stop_token_ids: set[int] | None = None,
    ) -> GrammaskGrammar:
        """The grammar of one request; ``stop_token_ids`` are allowed only where the output may end.

        Raises :class:`~grammask.errors.GrammarError` for a structural tag or a grammar, schema or regex
        grammask refuses, and :class:`~grammask.errors.ConfigurationError` for a malformed spec.
        """
        grammar = grammar_for_request(_KINDS[request_type], grammar_spec, any_whitespace=self.any_whitespace)
        return GrammaskGrammar(RequestMatcher(self.compiler.compile(grammar), stop_token_ids or ()))

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        """A CPU int32 bitmask of ``max_num_seqs`` rows over the model's logits, every token allowed."""
        return allocate_token_bitmask(max_num_seqs, self.vocab_size)

    def destroy(self) -> None:
        """Free the compiler's in-memory cache."""
        self.compiler.clear()
