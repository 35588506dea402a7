"""``CompiledGrammar``: a grammar compiled for one vocabulary, the factory of matchers.

It shows what a user needs (the grammar, the vocabulary, notes, statistics, size, matchers) and
keeps the tables it is made of (:class:`~grammask.engine.Engine`) to itself. Compile one with
:class:`grammask.Compiler` or :func:`grammask.compile`.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field

from grammask.budget import (
    BUDGET_KIND,
    BudgetRuntime,
    build_budget_tables,
    decode_budget_tables,
    encode_budget_tables,
)
from grammask.cache import DiskCache
from grammask.engine import Engine
from grammask.errors import BudgetError, BudgetUnsupportedError
from grammask.grammar.ir import Grammar
from grammask.matcher import Matcher
from grammask.vocab import Vocabulary


@dataclass(frozen=True)
class CompileStats:
    """What compilation did and how long it took (seconds; ``from_cache``: read from the disk cache)."""

    seconds: float
    lexer_states: int
    reachable_lexer_states: int
    parser_states: int
    pairs: int
    masks: int
    depends_classes: int
    from_cache: bool = False
    phases: dict = field(default_factory=dict)


class CompiledGrammar:
    """A grammar compiled for one vocabulary: immutable, shareable between threads and matchers."""

    def __init__(self, grammar: Grammar, engine: Engine, stats: CompileStats, disk: DiskCache, key: str):
        self.grammar = grammar
        self.stats = stats
        self._engine = engine
        self._disk = disk
        self._key = key
        self._budget: BudgetRuntime | None = None
        self._budget_lock = threading.Lock()

    @property
    def vocab(self) -> Vocabulary:
        """The vocabulary the grammar was compiled for."""
        return self._engine.vocab

    @property
    def notes(self) -> tuple[str, ...]:
        """What the grammar's front end could not enforce (e.g. schema keywords dropped with ``strict=False``),
        then the LALR(1) conflicts resolved as Lark resolves them."""
        return self.grammar.notes + self._engine.parse.notes

    @property
    def nbytes(self) -> int:
        """Bytes held by the compiled tables (masks, lexer, parser)."""
        return self._engine.nbytes

    def matcher(self, max_tokens: int | None = None, *, prefix: str | bytes = "") -> Matcher:
        """A fresh matcher at the start of a document, or just after ``prefix``.

        ``prefix``: text the document starts with, as if it had been generated (code already in the
        prompt, say); it may end anywhere, inside a lexeme or indentation too. It is not counted in
        ``max_tokens`` and ``rollback``/``reset`` never go before it.
        ``max_tokens``: a budget ``N`` on the generated output, EOS included; the masks then keep a
        complete output within ``N`` tokens reachable (see :mod:`grammask.budget`).

        Raises :class:`~grammask.errors.TextRejectedError` (with the byte position) for a prefix no
        sentence starts with, :class:`~grammask.errors.BudgetError` when no output fits the budget,
        and :class:`~grammask.errors.ConfigurationError` when ``max_tokens`` is not an int.
        """
        return Matcher(self, max_tokens=max_tokens, prefix=prefix)

    def limited_matcher(self, max_tokens: int, *, lenient: bool = False) -> Matcher:
        """A matcher for one output of at most ``max_tokens`` tokens (EOS included).

        Budgeted (see :meth:`matcher`) where the grammar can have budgets; a grammar that cannot
        (LALR(1) conflicts resolved as Lark does) gets an unbudgeted matcher and a warning that its
        output may be cut at the limit. ``lenient``: the same when no output fits ``max_tokens``
        (a serving request is not failed for it). Raises :class:`~grammask.errors.BudgetError` for a
        budget no output fits unless ``lenient``.
        """
        try:
            return Matcher(self, max_tokens=max_tokens)
        except BudgetError as e:
            if not (lenient or isinstance(e, BudgetUnsupportedError)):
                raise
            warnings.warn(f"grammask: grammar {self.grammar.name!r} is decoded without a token budget, so the "
                          f"output may be cut at {max_tokens} tokens (no token budget: {e})", stacklevel=2)
            return Matcher(self)

    def with_grammar(self, grammar: Grammar) -> CompiledGrammar:
        """The same tables under another grammar object of the same language (its name and notes)."""
        twin = CompiledGrammar(grammar, self._engine, self.stats, self._disk, self._key)
        twin._budget = self._budget
        return twin

    def _budget_runtime(self) -> BudgetRuntime:
        """The token-budget tables (built on first use, kept in the disk cache beside the grammar's tables)."""
        if self._budget is None:
            with self._budget_lock:
                if self._budget is None:
                    tables, _ = self._disk.get_or_build(
                        self._key, BUDGET_KIND, lambda: build_budget_tables(self._engine),
                        encode_budget_tables, decode_budget_tables,
                    )
                    self._budget = BudgetRuntime(self._engine, tables)
        return self._budget

    def __repr__(self) -> str:
        s = self.stats
        return (
            f"CompiledGrammar({self.grammar.name!r}, vocab={self.vocab.name!r}, lexer_states={s.lexer_states}, "
            f"parser_states={s.parser_states}, pairs={s.pairs}, masks={s.masks}, {self.nbytes / 1e6:.1f} MB)"
        )
