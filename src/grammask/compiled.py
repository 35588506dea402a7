"""``CompiledGrammar``: a grammar compiled for one vocabulary, the factory of matchers.

It shows what a user needs (the grammar, the vocabulary, notes, statistics, size, matchers) and
keeps the tables it is made of (:class:`~grammask.engine.Engine`) to itself. Compile one with
:class:`grammask.Compiler` or :func:`grammask.compile`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, overload

from grammask.budget import (
    BUDGET_KIND,
    BudgetRuntime,
    build_budget_tables,
    decode_budget_tables,
    encode_budget_tables,
)
from grammask.cache import DiskCache
from grammask.canonical import CanonicalRelation, build_relation
from grammask.canonical_matcher import CanonicalMatcher, ForcedTextCheck, RegexProduct
from grammask.engine import Engine
from grammask.errors import (
    BudgetError,
    BudgetUnsupportedError,
    CanonicalError,
    Deadline,
    VocabularyError,
    check_timeout,
)
from grammask.grammar.ir import Grammar
from grammask.matcher import Matcher
from grammask.vocab import Vocabulary


@dataclass(frozen=True)
class CompileStats:
    """What compilation did and how long it took (seconds; ``from_cache``: read from the disk cache).

    ``complete``: whether every table is built; a lazy compile (``Compiler(lazy=True)``) counts the tables
    built so far (``reachable_lexer_states``: the lexer states built) until :meth:`CompiledGrammar.complete`.
    """

    seconds: float
    lexer_states: int
    reachable_lexer_states: int
    parser_states: int
    pairs: int
    masks: int
    depends_classes: int
    from_cache: bool = False
    phases: dict = field(default_factory=dict)
    complete: bool = True


def encode_compiled(engine: Engine, stats: CompileStats) -> tuple[dict, dict]:
    """A compiled grammar's tables and statistics as the disk cache stores them (its tables all built first)."""
    arrays, meta = engine.to_arrays()
    meta["stats"] = {k: v for k, v in stats.__dict__.items() if k not in ("seconds", "from_cache", "phases", "complete")}
    meta["stats"].update(engine.masks.counts())
    return arrays, meta


class CompiledGrammar:
    """A grammar compiled for one vocabulary: immutable, shareable between threads and matchers."""

    def __init__(
        self, grammar: Grammar, engine: Engine, stats: CompileStats, disk: DiskCache, key: str,
        relation_of: Callable[[], CanonicalRelation] | None = None, timeout: float | None = None,
    ):
        self.grammar = grammar
        self.stats = stats
        self._engine = engine
        self._disk = disk
        self._key = key
        self._timeout = timeout
        self._budget: BudgetRuntime | None = None
        self._budget_lock = threading.Lock()
        self._relation_of = relation_of or (lambda: build_relation(engine.vocab))
        self._product: RegexProduct | None = None
        self._forced: ForcedTextCheck | None = None

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

    @overload
    def matcher(self, max_tokens: int | None = None, *, prefix: str | bytes = "",
                canonical: Literal[False] = False) -> Matcher: ...

    @overload
    def matcher(self, max_tokens: int | None = None, *, prefix: str | bytes = "",
                canonical: Literal[True]) -> CanonicalMatcher: ...

    def matcher(self, max_tokens: int | None = None, *, prefix: str | bytes = "",
                canonical: bool = False) -> Matcher | CanonicalMatcher:
        """A fresh matcher at the start of a document, or just after ``prefix``.

        ``prefix``: text the document starts with, as if it had been generated (code already in the
        prompt, say); it may end anywhere, inside a lexeme or indentation too. It is not counted in
        ``max_tokens`` and ``rollback``/``reset`` never go before it.
        ``max_tokens``: a budget ``N`` on the generated output, EOS included; the masks then keep a
        complete output within ``N`` tokens reachable (see :mod:`grammask.budget`).
        ``canonical``: a :class:`~grammask.canonical_matcher.CanonicalMatcher`, whose tokens are also the
        vocabulary's tokenizer's own encoding of the text (no dead ends for a regex grammar without counted bounds); with
        ``max_tokens``, the budget counts canonical tokens (see :mod:`grammask.canonical_budget`); with
        ``prefix``, the output's tokens are the encoding of the output's text (the prompt's tokens are the model's
        business: a tokenizer may join the prefix's last characters with the output's first).

        Raises :class:`~grammask.errors.TextRejectedError` (with the byte position) for a prefix no
        sentence starts with, :class:`~grammask.errors.BudgetError` when no output fits the budget (with
        ``canonical``: when no canonical output is found within it), :class:`~grammask.errors.ConfigurationError`
        when ``max_tokens`` is not an int or ``prefix`` is not text, and :class:`~grammask.errors.CanonicalError` when the
        vocabulary has no tokenizer, its tokenizer's canonical encodings cannot be modelled, or (regex) no string
        of the language has one.
        """
        if not canonical:
            return Matcher(self, max_tokens=max_tokens, prefix=prefix)
        try:
            relation = self._relation_of()
        except VocabularyError as e:
            if isinstance(e, CanonicalError):
                raise
            raise CanonicalError(f"canonical=True needs the tokenizer of vocabulary {self.vocab.name!r}: {e}") from e
        with self._budget_lock:
            if self._product is None and self._forced is None:
                if RegexProduct.applies(self) and self._engine.lexer.counter is None:
                    self._product = RegexProduct(self, relation)
                else:
                    self._forced = ForcedTextCheck(self, relation)
        return CanonicalMatcher(self, relation, self._product, self._forced, max_tokens, prefix)

    @overload
    def limited_matcher(self, max_tokens: int, *, lenient: bool = False,
                        canonical: Literal[False] = False) -> Matcher: ...

    @overload
    def limited_matcher(self, max_tokens: int, *, lenient: bool = False,
                        canonical: Literal[True]) -> CanonicalMatcher: ...

    def limited_matcher(self, max_tokens: int, *, lenient: bool = False,
                        canonical: bool = False) -> Matcher | CanonicalMatcher:
        """A matcher for one output of at most ``max_tokens`` tokens (EOS included); ``canonical`` as in :meth:`matcher`.

        Budgeted (see :meth:`matcher`) where the grammar can have budgets; a grammar that cannot
        (counted terminals; the contextual lexer with an indenter; a lexer that backs up to an earlier match as Lark's
        does) gets an unbudgeted matcher and a warning that its output may be cut at the limit. ``lenient``: the same
        when no output fits ``max_tokens``
        (a serving request is not failed for it). Raises :class:`~grammask.errors.BudgetError` for a
        budget no output fits unless ``lenient``, and what :meth:`matcher` raises for ``canonical``.
        """
        try:
            return self.matcher(max_tokens, canonical=canonical)
        except BudgetError as e:
            if not (lenient or isinstance(e, BudgetUnsupportedError)):
                raise
            warnings.warn(f"grammask: grammar {self.grammar.name!r} is decoded without a token budget, so the "
                          f"output may be cut at {max_tokens} tokens (no token budget: {e})", stacklevel=2)
            return self.matcher(canonical=canonical)

    def complete(self, timeout: float | None = None) -> CompiledGrammar:
        """Build every table now (a lazy compile builds each lexer state's tables when a matcher first reaches it),
        write them to the compiler's disk cache, and update :attr:`stats`; returns this grammar.

        ``timeout``: the seconds it may take (None: the compiler's timeout). Nothing to do for a grammar
        compiled whole. Raises :class:`~grammask.errors.CompileTimeoutError` when the time is up (what is
        built stays built: a later call goes on from there) and
        :class:`~grammask.errors.ConfigurationError` for a timeout that is not a positive number.
        """
        tables = self._engine.masks
        if tables.complete:
            return self
        seconds = self._timeout if timeout is None else check_timeout(timeout)
        start = time.perf_counter()
        tables.complete_all(Deadline(seconds, self.grammar.name))
        phases = {**self.stats.phases, "complete": time.perf_counter() - start}
        self.stats = dataclasses.replace(self.stats, seconds=self.stats.seconds + phases["complete"], phases=phases,
                                         complete=True, **tables.counts())
        self._disk.put(self._key, "", *encode_compiled(self._engine, self.stats))
        return self

    def with_grammar(self, grammar: Grammar) -> CompiledGrammar:
        """The same tables under another grammar object of the same language (its name and notes)."""
        twin = CompiledGrammar(grammar, self._engine, self.stats, self._disk, self._key, self._relation_of,
                               self._timeout)
        twin._budget = self._budget
        twin._product = self._product
        twin._forced = self._forced
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
                    self._warn_uncounted(tables.parser.uncounted)
        return self._budget

    def _warn_uncounted(self, rules: Sequence[int]) -> None:
        if rules:
            text = "; ".join(self._engine.parse.rule_text[r] for r in rules)
            warnings.warn(
                f"grammar {self.grammar.name!r}: token budgets count no completion through {text} where an LALR "
                "conflict resolution drops its reduction; under max_tokens, text that needs it is masked out "
                "(write the rule without the conflict, e.g. one nonterminal per precedence level)",
                stacklevel=4,
            )

    def __repr__(self) -> str:
        s = self.stats
        return (
            f"CompiledGrammar({self.grammar.name!r}, vocab={self.vocab.name!r}, lexer_states={s.lexer_states}, "
            f"parser_states={s.parser_states}, pairs={s.pairs}, masks={s.masks}, {self.nbytes / 1e6:.1f} MB)"
        )
