"""Ancestral sampling from the masked distribution, with temperature, top-k and top-p (nucleus) filtering."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grammask.decoding.strategy import LinearStrategy
from grammask.errors import DecodingError


@dataclass(frozen=True)
class Sample(LinearStrategy):
    """Samples each token from softmax(masked logits / temperature), keeping only the ``top_k`` most likely
    tokens (if set) and then the smallest set whose probability reaches ``top_p`` (if below 1).

    ``check_first``: without top-k/top-p filtering, draw from the unmasked distribution and fall back to
    the masked one only when the grammar rejects the draw (the same distribution, less mask time).

    Raises :class:`~grammask.errors.DecodingError` for ``temperature <= 0``, ``top_k < 1`` or ``top_p``
    outside (0, 1].
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    check_first: bool = True

    name = "sample"

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise DecodingError(f"temperature must be > 0, got {self.temperature} (use the greedy strategy for 0)")
        if self.top_k is not None and self.top_k < 1:
            raise DecodingError(f"top_k must be at least 1, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise DecodingError(f"top_p must be in (0, 1], got {self.top_p}")

    def checks_first(self) -> bool:
        return self.check_first and self.top_k is None and self.top_p == 1

    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        """The distribution a token is drawn from (float64, sums to 1)."""
        x = logits.astype(np.float64) / self.temperature
        if self.top_k is not None and self.top_k < len(x):
            kth = np.partition(x, len(x) - self.top_k)[len(x) - self.top_k]
            x[x < kth] = -np.inf
        probs = np.exp(x - np.max(x))
        probs /= probs.sum()
        if self.top_p < 1:
            order = np.argsort(-probs, kind="stable")
            before = np.cumsum(probs[order]) - probs[order]
            probs[order[before >= self.top_p]] = 0.0
            probs /= probs.sum()
        return probs

    def choose(self, logits: np.ndarray, rng: np.random.Generator) -> int:
        probs = self.probabilities(logits)
        return int(rng.choice(len(probs), p=probs))
