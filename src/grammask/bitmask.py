"""Token bitmasks in the xgrammar/vLLM layout: int32 words, bit ``t % 32`` of word ``t // 32`` is token ``t``."""

from __future__ import annotations

import numpy as np

from grammask.errors import ConfigurationError

_INT32 = np.dtype(np.int32)


def bitmask_words(n_tokens: int) -> int:
    """Number of int32 words that hold one mask row over ``n_tokens`` tokens."""
    return (n_tokens + 31) // 32


def allocate_bitmask(n_rows: int, n_tokens: int) -> np.ndarray:
    """A zeroed ``(n_rows, words)`` int32 array for ``fill_mask`` to write into.

    Raises :class:`ConfigurationError` for a negative count.
    """
    if n_rows < 0 or n_tokens < 0:
        raise ConfigurationError(f"a bitmask needs counts >= 0, got {n_rows} rows of {n_tokens} tokens")
    return np.zeros((n_rows, bitmask_words(n_tokens)), dtype=np.int32)


def check_row(row: np.ndarray, n_tokens: int) -> None:
    """Check that ``row`` is what ``fill_mask`` writes into.

    Raises :class:`ConfigurationError` unless ``row`` is a writable 1-D int32 NumPy array of
    ``bitmask_words(n_tokens)`` words.
    """
    words = bitmask_words(n_tokens)
    if type(row) is np.ndarray and row.dtype is _INT32 and row.ndim == 1 and row.shape[0] == words and row.flags.writeable:
        return  # (the common case, checked first: every fill_mask asks)
    if not isinstance(row, np.ndarray) or (row.dtype is not _INT32 and row.dtype != _INT32) or row.ndim != 1:
        what = f"a {row.ndim}-D {row.dtype} array" if isinstance(row, np.ndarray) else f"a {type(row).__name__}"
        raise ConfigurationError(f"a mask row must be a 1-D int32 NumPy array (a bitmask's row), got {what}")
    if row.shape[0] != words:
        raise ConfigurationError(f"mask row has {row.shape[0]} words, expected {words} for {n_tokens} logits")
    if not row.flags.writeable:
        raise ConfigurationError("mask row is read-only")


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
