"""SGLang grammar backend ``grammask``: a plugin for ``--grammar-backend grammask``.

Installing grammask registers the entry point ``grammask`` in the group ``sglang.srt.plugins``; SGLang
runs :func:`register` at start-up, which registers the backend with
``sglang.srt.constrained.base_grammar_backend.register_grammar_backend`` and adds ``grammask`` to the
``--grammar-backend`` choices. Requests' ``json_schema``, ``regex`` and ``ebnf`` (GBNF or Lark)
constraints compile through one :class:`~grammask.compiler.Compiler` per server, in SGLang's own
executor. Structural tags are refused per request (the request fails with the reason). Each request's
grammar object accepts tokens, rolls back (speculative draft trees), fills int32 bitmask rows in
xgrammar's layout, and jumps forward over the text the grammar forces.

This module imports SGLang and torch; ``grammask`` itself needs neither.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    GrammarStats,
    InvalidGrammarObject,
    register_grammar_backend,
)
from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices

from grammask.adapters.engine_vocab import engine_vocabulary
from grammask.adapters.request_state import RequestMatcher
from grammask.adapters.requests import grammar_for_request
from grammask.adapters.torch_bitmask import allocate_token_bitmask, apply_token_bitmask_
from grammask.compiler import Compiler
from grammask.errors import EngineTokenRejectedError, GrammaskError

BACKEND_NAME = "grammask"


class GrammaskGrammar(BaseGrammarObject):
    """One request's grammar for SGLang's scheduler and speculative decoding."""

    def __init__(self, state: RequestMatcher, key_string: str, grammar_stats: GrammarStats | None = None):
        super().__init__()
        self.state = state
        self.key_string = key_string
        self.grammar_stats = grammar_stats

    def accept_token(self, token: int) -> None:
        """Advance by one token; ignored once the output has ended (as SGLang expects).

        Raises :class:`~grammask.errors.EngineTokenRejectedError` (a ``ValueError``) for a token the mask
        did not allow; the state is unchanged.
        """
        if self.state.is_terminated():
            return
        self.current_token = token
        if not self.state.accept(int(token)):
            raise EngineTokenRejectedError(int(token), f"is not allowed by the grammar of {self.key_string[:200]!r}")

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens.

        Raises :class:`~grammask.errors.MatcherStateError` if fewer were accepted.
        """
        self.state.rollback(k)

    def is_terminated(self) -> bool:
        """True once EOS (or a stop token) has been accepted."""
        return self.state.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        """A CPU int32 bitmask of ``batch_size`` rows with every token allowed (rows left unfilled stay so)."""
        return allocate_token_bitmask(batch_size, vocab_size)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        """Write this request's allowed tokens into row ``idx``."""
        if vocab_mask.device.type == "cpu":
            self.state.fill(vocab_mask[idx].numpy())
        else:
            row = vocab_mask[idx].cpu()
            self.state.fill(row.numpy())
            vocab_mask[idx].copy_(row)

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        """Allow every token in every row again."""
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
        """The mask on the logits' device."""
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        """Set the logits of disallowed tokens to -inf in place."""
        apply_token_bitmask_(logits, vocab_mask)

    def copy(self) -> GrammaskGrammar:
        """The same grammar at the start of a new output (what SGLang's cache hands to the next request)."""
        stats = self.grammar_stats
        if stats is not None:
            stats = dataclasses.replace(stats, is_cache_hit=True, tree_traversal_time=[])
        return GrammaskGrammar(self.state.fresh(), self.key_string, stats)

    def try_jump_forward(self, tokenizer: Any) -> tuple[list[int], str] | None:
        """The tokens and text every continuation starts with, or None where nothing is forced."""
        text = self.state.jump_forward_text()
        if not text:
            return None
        return self.state.jump_forward_tokens(), text

    def jump_forward_str_state(self, helper: tuple[list[int], str]) -> tuple[str, int]:
        """The jump-forward text of ``helper`` (no state number is needed: -1)."""
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: list[int], new_output_ids: list[int], next_state: int) -> None:
        """Follow a re-tokenized output: roll back to the common prefix and accept the new tokens.

        Raises :class:`~grammask.errors.EngineTokenRejectedError` if a new token is not allowed (the tokens
        before it stay accepted).
        """
        k = 0
        for old, new in zip(old_output_ids, new_output_ids):
            if old != new:
                break
            k += 1
        self.state.rollback(len(old_output_ids) - k)
        for token in new_output_ids[k:]:
            if not self.state.accept(int(token)):
                raise EngineTokenRejectedError(int(token), "is not allowed after jump-forward re-tokenization")

    def __repr__(self) -> str:
        return f"GrammaskGrammar(key_string={self.key_string[:80]!r}, tokens={self.state.num_tokens})"


class GrammaskGrammarBackend(BaseGrammarBackend):
    """Compiles SGLang's ``json``, ``regex`` and ``ebnf`` constraints with grammask.

    ``any_whitespace`` admits RFC 8259 whitespace in JSON Schema output (SGLang's default; the server
    flag ``--constrained-json-disable-any-whitespace`` turns it off). Compile errors become an
    ``InvalidGrammarObject`` carrying grammask's message, which SGLang reports to the request.

    Raises :class:`~grammask.errors.VocabularyError` for a tokenizer grammask cannot read.
    """

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None, *, any_whitespace: bool = True):
        super().__init__()
        self.vocab = engine_vocabulary(tokenizer, vocab_size, eos_token_ids)
        self.compiler = Compiler(self.vocab, lazy=True)
        self.any_whitespace = any_whitespace

    def _dispatch(self, kind: str, key_string: str) -> BaseGrammarObject:
        try:
            grammar = grammar_for_request(kind, key_string, any_whitespace=self.any_whitespace)
            compiled = self.compiler.compile(grammar)
        except GrammaskError as exc:
            return InvalidGrammarObject(f"grammask: {exc}")
        return GrammaskGrammar(RequestMatcher(compiled), key_string, GrammarStats(dispatch_type=kind))

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        """A JSON Schema, or ``$$ANY$$`` for any JSON value."""
        return self._dispatch("json", key_string)

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        """A whole-match regex."""
        return self._dispatch("regex", key_string)

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        """A GBNF (``::=``) or Lark grammar."""
        return self._dispatch("ebnf", key_string)

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        """Refused: an ``InvalidGrammarObject`` saying structural tags are not supported."""
        return self._dispatch("structural_tag", key_string)

    def reset(self) -> None:
        """Forget SGLang's cached grammar objects and the compiler's in-memory cache."""
        super().reset()
        self.compiler.clear()


def create_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None) -> GrammaskGrammarBackend:
    """The backend for one server: SGLang's ``register_grammar_backend`` init function.

    Raises :class:`~grammask.errors.VocabularyError` for a tokenizer grammask cannot read.
    """
    disable = bool(getattr(server_args, "constrained_json_disable_any_whitespace", False))
    return GrammaskGrammarBackend(tokenizer, vocab_size, eos_token_ids, any_whitespace=not disable)


def register() -> None:
    """The ``sglang.srt.plugins`` entry point: register the ``grammask`` backend and its CLI choice."""
    register_grammar_backend(BACKEND_NAME, create_backend)
    if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([BACKEND_NAME])
