"""The vocabulary of a serving engine's model, from the tokenizer and logits width the engine holds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from grammask.vocab import Vocabulary


def engine_vocabulary(tokenizer: Any, vocab_size: int, eos_ids: Iterable[int] | None = None) -> Vocabulary:
    """The :class:`~grammask.vocab.Vocabulary` of a Hugging Face fast tokenizer as an engine uses it.

    Its width is the larger of ``vocab_size`` (the model's logits, often padded past the tokenizer)
    and the tokenizer's length; its EOS ids are ``eos_ids`` with the tokenizer's ``eos_token_id``.

    Raises :class:`~grammask.errors.VocabularyError` for a tokenizer without a ``tokenizers`` backend,
    one that is neither byte-level nor SentencePiece-style BPE, or no EOS id at all.
    """
    width = max(int(vocab_size), len(tokenizer))
    eos = [int(t) for t in (eos_ids or ())]
    if getattr(tokenizer, "eos_token_id", None) is not None:
        eos.append(int(tokenizer.eos_token_id))
    return Vocabulary.from_hf(tokenizer, eos_ids=list(dict.fromkeys(eos)) or None, n_logits=width)
