"""Grammar front ends and the IR they share."""

from grammask.grammar.ir import Grammar, Rule, Terminal

__all__ = ["Grammar", "Rule", "Terminal"]
