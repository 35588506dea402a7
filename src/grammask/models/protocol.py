"""What decoding needs from a language model: the protocols every model backend implements.

A model hands out immutable *states*: a state is a token sequence the model has read, with the
logits of the next token. ``extend`` runs one forward pass of one token per state, batched, and
returns new states; the old ones stay valid, so forking a sequence (beam search, tree search) is
extending the same state with different tokens. Backends share the prefix cache between a state
and its extensions where they can.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from grammask.vocab import Vocabulary


@runtime_checkable
class ModelState(Protocol):
    """A sequence the model has read: its length in tokens and the logits of the next token."""

    @property
    def length(self) -> int:
        """Tokens in the sequence, prompt included."""

    @property
    def logits(self) -> np.ndarray:
        """float32 logits of the next token, shape ``(n_logits,)``; read-only for callers."""


@runtime_checkable
class LanguageModel(Protocol):
    """Next-token logits for batches of sequences, one forward pass of one token per sequence per step."""

    @property
    def n_logits(self) -> int:
        """Width of the logits (may exceed the tokenizer's vocabulary)."""

    @property
    def eos_ids(self) -> frozenset[int]:
        """Token ids that end a sequence."""

    def start(self, prompt_ids: Sequence[int]) -> ModelState:
        """Read a prompt (at least one token)."""

    def extend(self, states: Sequence[ModelState], token_ids: Sequence[int]) -> list[ModelState]:
        """Append ``token_ids[i]`` to ``states[i]``; the given states stay valid."""


@runtime_checkable
class ReadingModel(LanguageModel, Protocol):
    """A language model that can also append several tokens to one state in one forward pass (jump-forward)."""

    def read(self, state: ModelState, token_ids: Sequence[int]) -> ModelState:
        """Append ``token_ids`` (at least one) to ``state`` in one pass; ``state`` stays valid."""


@runtime_checkable
class TextModel(LanguageModel, Protocol):
    """A language model with its tokenizer: what :func:`grammask.generate` needs to go from text to text."""

    @property
    def vocab(self) -> Vocabulary:
        """The vocabulary grammars are compiled against (``n_logits`` equal to the model's)."""

    @property
    def context_window(self) -> int | None:
        """Most tokens (prompt + output) the model can attend to, if it has a limit."""

    def encode_prompt(self, prompt: str, *, chat: bool | None = None) -> list[int]:
        """Token ids of a user prompt; ``chat`` None applies the chat template when the model has one."""

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of generated token ids (special tokens left out)."""
