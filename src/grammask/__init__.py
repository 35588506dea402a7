"""grammask: exact grammar-constrained decoding for LLMs."""

from grammask.compiled import CompiledGrammar
from grammask.compiler import Compiler, clear_caches, compile
from grammask.decoding import generate
from grammask.errors import (
    BudgetError,
    CompileTimeoutError,
    ConfigurationError,
    GrammarError,
    GrammaskError,
    TokenRejectedError,
    UnsupportedRegexError,
    UnsupportedSchemaError,
)
from grammask.grammar import Grammar, SchemaOptions
from grammask.matcher import Matcher
from grammask.vocab import Vocabulary

__all__ = [
    "BudgetError",
    "CompileTimeoutError",
    "CompiledGrammar",
    "Compiler",
    "ConfigurationError",
    "Grammar",
    "GrammarError",
    "GrammaskError",
    "Matcher",
    "SchemaOptions",
    "TokenRejectedError",
    "UnsupportedRegexError",
    "UnsupportedSchemaError",
    "Vocabulary",
    "clear_caches",
    "compile",
    "generate",
]
__version__ = "0.1.0"
