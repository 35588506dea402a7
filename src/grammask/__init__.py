"""grammask: exact grammar-constrained decoding for LLMs."""

from grammask.errors import GrammaskError
from grammask.grammar import Grammar

__all__ = ["Grammar", "GrammaskError"]
__version__ = "0.1.0"
