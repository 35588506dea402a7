"""Token budgets (TruncProof, extended to LALR grammars): a complete output within ``N`` tokens, guaranteed.

* :mod:`.lexical`: tokens to finish a pending lexeme, terminal witnesses, separators.
* :mod:`.parser_costs`: nonterminal costs and the exits of LR states.
* :mod:`.bounds`: stack-independent bounds that let most masks skip the budget.
* :mod:`.tables`: the precomputed tables and their encoding for the disk cache.
* :mod:`.runtime`: completion costs of matcher states, per-state token groups.
* :mod:`.limit`: :class:`TokenBudget`, the limit a budgeted matcher enforces.

Use it through ``compiled.matcher(max_tokens=N)``, ``Matcher.min_tokens_to_finish()`` and
``Matcher.remaining_budget``.
"""

from grammask.budget.costs import INF
from grammask.budget.limit import TokenBudget
from grammask.budget.runtime import REJECTED, BudgetRuntime
from grammask.budget.tables import (
    BUDGET_KIND,
    BudgetTables,
    build_budget_tables,
    decode_budget_tables,
    encode_budget_tables,
)

__all__ = [
    "BUDGET_KIND",
    "INF",
    "REJECTED",
    "BudgetRuntime",
    "BudgetTables",
    "TokenBudget",
    "build_budget_tables",
    "decode_budget_tables",
    "encode_budget_tables",
]
