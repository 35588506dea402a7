"""Greedy decoding: the most likely allowed token at every step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grammask.decoding.strategy import LinearStrategy


@dataclass(frozen=True)
class Greedy(LinearStrategy):
    """Takes the allowed token with the highest logit (the lowest id among ties).

    ``check_first``: try the unmasked argmax before computing the full mask (same output, less mask time).
    """

    check_first: bool = True

    name = "greedy"

    def checks_first(self) -> bool:
        return self.check_first

    def choose(self, logits: np.ndarray, rng: np.random.Generator) -> int:
        return int(np.argmax(logits))
