"""Decoding strategies over a small :class:`LanguageModel` protocol, and :func:`generate` (text in, text out).

Nothing here imports torch: model backends live in :mod:`grammask.adapters`.
"""

from grammask.decoding.beam import BeamSearch
from grammask.decoding.generate import (
    STRATEGIES,
    Generation,
    generate,
    load_model,
    strategy_from_name,
)
from grammask.decoding.greedy import Greedy
from grammask.decoding.mcts import MCTS
from grammask.decoding.model import LanguageModel, ModelState, TextModel, TokenMatcher
from grammask.decoding.sample import Sample
from grammask.decoding.stats import GenerationStats
from grammask.decoding.strategy import Decoded, Strategy

__all__ = [
    "MCTS",
    "STRATEGIES",
    "BeamSearch",
    "Decoded",
    "Generation",
    "GenerationStats",
    "Greedy",
    "LanguageModel",
    "ModelState",
    "Sample",
    "Strategy",
    "TextModel",
    "TokenMatcher",
    "generate",
    "load_model",
    "strategy_from_name",
]
