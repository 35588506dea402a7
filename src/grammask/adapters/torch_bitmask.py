"""Applying int32 token bitmasks (xgrammar/vLLM layout) to torch logits, on whatever device they are."""

from __future__ import annotations

import numpy as np
import torch

from grammask.bitmask import bitmask_words


def allocate_token_bitmask(rows: int, vocab_size: int) -> torch.Tensor:
    """A CPU ``(rows, words)`` int32 bitmask with every token allowed (all bits set)."""
    return torch.full((rows, bitmask_words(vocab_size)), -1, dtype=torch.int32)


def apply_token_bitmask_(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """Set ``logits[..., t]`` to -inf in place wherever bit ``t`` of the matching bitmask row is clear.

    ``logits`` is ``(rows, vocab)`` or ``(vocab,)`` and ``bitmask`` has as many rows (or is one row);
    logits columns past the bitmask are disallowed. Returns ``logits``.
    """
    if logits.device.type == "cpu":
        words = np.ascontiguousarray(bitmask.cpu().numpy())
        allowed = torch.from_numpy(np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little").view(np.bool_))
    else:
        shifts = torch.arange(32, dtype=torch.int32, device=logits.device)
        allowed = ((bitmask.to(logits.device).unsqueeze(-1) >> shifts) & 1).bool().flatten(-2)
    width = logits.shape[-1]
    if allowed.shape[-1] >= width:
        allowed = allowed[..., :width]
    else:
        allowed = torch.nn.functional.pad(allowed, (0, width - allowed.shape[-1]))
    return logits.masked_fill_(~allowed, float("-inf"))
