"""grammask: exact grammar-constrained decoding for LLMs."""

from grammask.compiled import CompiledGrammar, compile
from grammask.decoding import generate
from grammask.errors import GrammaskError
from grammask.grammar import Grammar
from grammask.matcher import Matcher
from grammask.vocab import Vocabulary

__all__ = ["CompiledGrammar", "Grammar", "GrammaskError", "Matcher", "Vocabulary", "compile", "generate"]
__version__ = "0.1.0"
