"""Token bitmasks in the xgrammar/vLLM layout: int32 words, bit ``t % 32`` of word ``t // 32`` is token ``t``."""

from __future__ import annotations

import numpy as np


def bitmask_words(n_tokens: int) -> int:
    """Number of int32 words that hold one mask row over ``n_tokens`` tokens."""
    return (n_tokens + 31) // 32


def allocate_bitmask(n_rows: int, n_tokens: int) -> np.ndarray:
    """A zeroed ``(n_rows, words)`` int32 array for ``fill_mask`` to write into."""
    return np.zeros((n_rows, bitmask_words(n_tokens)), dtype=np.int32)


def bitmask_to_bool(row: np.ndarray, n_tokens: int) -> np.ndarray:
    """The boolean view of one mask row: ``out[t]`` is True iff token ``t`` is allowed."""
    bits = np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little")
    return bits[:n_tokens].astype(bool)


def bool_to_bitmask(allowed: np.ndarray) -> np.ndarray:
    """Pack a boolean vector over tokens into one int32 mask row."""
    words = bitmask_words(len(allowed))
    packed = np.packbits(np.asarray(allowed, dtype=bool), bitorder="little")
    out = np.zeros(words * 4, dtype=np.uint8)
    out[: len(packed)] = packed
    return out.view(np.int32)


def apply_bitmask(logits: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Set the logits of disallowed tokens to -inf in place (NumPy); returns ``logits``."""
    allowed = bitmask_to_bool(row, logits.shape[-1])
    logits[..., ~allowed] = -np.inf
    return logits
