"""Decoding strategies over the small :class:`~grammask.models.protocol.LanguageModel` protocol, and
:func:`generate` (text in, text out).

Nothing here imports torch: models and their backends live in :mod:`grammask.models`.
"""

from grammask.decoding.beam import BeamSearch
from grammask.decoding.generate import (
    STRATEGIES,
    Generation,
    generate,
    strategy_from_name,
)
from grammask.decoding.greedy import Greedy
from grammask.decoding.mcts import MCTS
from grammask.decoding.run import TokenMatcher
from grammask.decoding.sample import Sample
from grammask.decoding.stats import GenerationStats
from grammask.decoding.stops import StopMatcher, StopRule
from grammask.decoding.strategy import Decoded, Strategy

__all__ = [
    "MCTS",
    "STRATEGIES",
    "BeamSearch",
    "Decoded",
    "Generation",
    "GenerationStats",
    "Greedy",
    "Sample",
    "StopMatcher",
    "StopRule",
    "Strategy",
    "TokenMatcher",
    "generate",
    "strategy_from_name",
]
