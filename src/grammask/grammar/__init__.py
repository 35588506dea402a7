"""Grammar front ends and the IR they share.

The IR (:mod:`.ir`) knows no front end; this package attaches the front ends to it as the public
doors ``Grammar.from_lark``, ``Grammar.from_json_schema``, ``Grammar.from_regex``,
``Grammar.from_gbnf`` and ``Grammar.builtin``, so ``grammask.Grammar`` is the one name a user needs.
"""

from grammask.grammar.builtin import load_builtin
from grammask.grammar.gbnf import grammar_from_gbnf
from grammask.grammar.ir import Grammar, Rule, Terminal
from grammask.grammar.json_schema import SchemaOptions, grammar_from_json_schema
from grammask.grammar.lark_frontend import grammar_from_lark
from grammask.grammar.regex_frontend import grammar_from_regex

Grammar.from_lark = staticmethod(grammar_from_lark)
Grammar.from_json_schema = staticmethod(grammar_from_json_schema)
Grammar.from_regex = staticmethod(grammar_from_regex)
Grammar.from_gbnf = staticmethod(grammar_from_gbnf)
Grammar.builtin = staticmethod(load_builtin)

__all__ = [
    "Grammar",
    "Rule",
    "SchemaOptions",
    "Terminal",
    "grammar_from_gbnf",
    "grammar_from_json_schema",
    "grammar_from_lark",
    "grammar_from_regex",
    "load_builtin",
]
