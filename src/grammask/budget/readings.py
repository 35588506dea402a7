"""Token groups under a contextual lexer: the budget's own vocabulary walks and the parse table columns they need.

After a terminal whose next lexeme's mode the stack decides, a token may be read several ways (one per mode it
may continue in); the walk of :mod:`grammask.contextual_walk` writes such terminals as *aliases* (terminal, set of
modes), and an alias's parse table column takes the terminal only where the state it shifts into is of those
modes. Fed those columns, at most one reading of a token parses on a given stack: the one the contextual lexer
makes there. The budget walks lexer states on first use, so it interns its own aliases and keeps its own columns.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from grammask.contextual_walk import MAX_ALIASES, Superpositions, walk_contextual
from grammask.errors import GrammarError
from grammask.indentation import IndentRuntime, byte_widths
from grammask.mask_tables import may_follow, with_alias_columns
from grammask.parser.stack import LRRunner
from grammask.spanner import NewlineWidths, SequenceTable, TrieWalk, VocabTrie

if TYPE_CHECKING:
    from grammask.engine import Engine


class ModeReadings:
    """A contextual lexer's token readings for the budget: :meth:`walk` and the ``action`` table with the aliases'
    columns (grown as walks add aliases; the caller serializes walks).

    Raises :class:`~grammask.errors.GrammarError` (an internal error) where an indenter's context ids are not laid out
    after the room the budget's aliases take."""

    def __init__(self, engine: Engine):
        lexer, tables = engine.lexer, engine.parse
        self._lexer = lexer
        self._parser_term = engine.parser_term
        self.base = tables.end + 1
        self._tables = dataclasses.replace(tables, action=np.ascontiguousarray(tables.action[:, : self.base]))
        options = int(np.diff(lexer.branch_ptr).max(initial=0))
        self._sup = Superpositions(options, self.base)
        self._may = may_follow(self._tables, lexer, engine.parser_term, options)
        self._bans = None if lexer.ban is None else (lexer.ban_row, lexer.ban)
        self.action = self._tables.action
        self._reading = None
        if lexer.alt is not None:
            self._reading = np.zeros(lexer.n_states, dtype=bool)
            self._reading[lexer.alt[lexer.alt >= 0]] = True
        self.n_ids = self.base + MAX_ALIASES
        """Parser terminal ids a sequence may hold (aliases included): the size of the walks' sequence table."""
        self._newline = self._spec = None
        self.indenter: IndentRuntime | None = None
        """Under an indenter: one that reads this walk's aliases (their brackets, their newlines' modes)."""
        indent = engine.indent
        if indent is not None:
            if indent.alias_base != self.base or indent.base != self.n_ids:
                raise GrammarError("internal error: the indenter's context ids do not follow the budget's aliases")
            widths = byte_widths(indent.tab_len, indent.line_breaks)
            self._newline = NewlineWidths(indent.newline_lexer, indent.base, widths, indent.stride)
            self._spec = dataclasses.replace(indent, opens=frozenset(x for x in indent.opens if x < self.base),
                                             closes=frozenset(x for x in indent.closes if x < self.base))
            self._new_indenter()

    def walk(self, trie: VocabTrie, q: int, seqs: SequenceTable, work: TrieWalk
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every reading of every token from lexer state ``q`` (see
        :func:`~grammask.contextual_walk.walk_contextual`), but where a token leaves a fallback of Lark's backing up
        pending only the one where its long lexeme goes on; ``action`` then has a column for each alias they hold.

        Raises :class:`~grammask.errors.GrammarError` where the walk's tables outgrow their bounds."""
        lexer = self._lexer
        entries, seq, end = walk_contextual(
            trie, lexer.trans, lexer.accept, lexer.restart, lexer.ignored, self._parser_term, lexer.branch_ptr,
            lexer.branch_start, q, seqs, self._sup, work, self._may, self._newline, self._bans, lexer.alt,
            None if lexer.part_row is None else (lexer.part_row, lexer.parts, lexer.part_bits))
        if self._reading is not None:  # budgets count a fallback's long lexeme only: its other reading is dropped
            kept = ~self._reading[end]
            entries, seq, end = entries[kept], seq[kept], end[kept]
        aliases = self._sup.aliases
        if len(aliases) > self.action.shape[1] - self.base:
            self.action = with_alias_columns(self._tables, lexer, self._parser_term, aliases, self._spec).action
            if self._spec is not None:
                self._new_indenter()
        return entries, seq, end

    def _new_indenter(self) -> None:
        spec = self._spec.with_alias_brackets(self._sup.aliases, self._parser_term)
        runner = LRRunner(dataclasses.replace(self._tables, action=self.action))
        self.indenter = IndentRuntime(spec, runner, self._lexer, self._parser_term)

    def parser_terminal(self, x: int) -> int:
        """The parser terminal a sequence item stands for (an alias: its terminal's; a context id: the newline)."""
        if x < self.base:
            return x
        if x >= self.n_ids:
            return self._spec.newline
        return int(self._parser_term[self._sup.alias_term[x - self.base]])
