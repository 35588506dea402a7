"""What a compiled grammar is made of: its lexer, parse tables and mask tables for one vocabulary.

An :class:`Engine` is the immutable bundle the matcher and the token budget read, with the
per-process views built from it on first use (:class:`MatcherView`, the LR runner), and its
encoding as plain arrays plus JSON metadata for the disk cache (:mod:`grammask.cache`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from grammask.automata.counted import CountTables
from grammask.automata.lexer import LexerAutomaton
from grammask.counting import CountRuntime
from grammask.indentation import IndentRuntime, IndentSpec
from grammask.mask_tables import MaskTables
from grammask.parser.stack import LRRunner
from grammask.parser.tables import ParseTables
from grammask.spanner import VocabTrie
from grammask.vocab import Vocabulary

_LEXER_FIELDS = ("trans", "accept", "produce", "ignored")
_LEXER_OPTIONAL = ("restart", "branch_ptr", "branch_start", "branch_mode", "lr_mode", "mode_start", "ban_row", "ban",
                   "alt", "part_row", "parts", "part_bits", "late")
_TABLE_ARRAYS = ("action", "goto", "rule_lhs", "rule_len", "rule_rhs", "dropped")


@dataclass(frozen=True, eq=False)
class Engine:
    """The compiled tables of one grammar for one vocabulary.

    ``trie_of`` gives the vocabulary's byte trie (:attr:`trie`), asked for only when needed (token
    budgets), so loading compiled tables from the disk cache does not build it.
    """

    lexer: LexerAutomaton
    parse: ParseTables
    parser_term: np.ndarray
    masks: MaskTables
    vocab: Vocabulary
    trie_of: Callable[[], VocabTrie] = field(repr=False)
    indent: IndentSpec | None = None
    """The grammar's indentation rules (Lark's ``Indenter``), or None."""

    @property
    def nbytes(self) -> int:
        """Bytes held by the tables (masks, lexer, parser)."""
        lexer = sum(a.nbytes for a in (self.lexer.trans, self.lexer.accept, self.lexer.produce))
        return self.masks.nbytes + lexer + self.parse.action.nbytes + self.parse.goto.nbytes

    @cached_property
    def trie(self) -> VocabTrie:
        """The vocabulary's byte trie."""
        return self.trie_of()

    @cached_property
    def runner(self) -> LRRunner:
        return LRRunner(self.parse)

    @cached_property
    def indenter(self) -> IndentRuntime | None:
        """The indentation rules run on persistent stacks (None for a grammar without them)."""
        return None if self.indent is None else IndentRuntime(self.indent, self.runner, self.lexer, self.parser_term)

    @cached_property
    def counting(self) -> CountRuntime | None:
        """The masks of counted terminals near a level's end (None for a grammar without them)."""
        if self.lexer.counter is None:
            return None
        longest = max((len(t) for t in self.vocab.tokens if t), default=0)
        return CountRuntime(self.lexer, lambda: self.trie, self.vocab.n_logits, longest)

    @cached_property
    def view(self) -> MatcherView:
        return MatcherView(self)

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict]:
        """The tables as named arrays and JSON-able metadata (see :meth:`from_arrays`), all built first."""
        arrays = {f"lexer.{f}": getattr(self.lexer, f) for f in _LEXER_FIELDS}
        for f in _LEXER_OPTIONAL:
            if getattr(self.lexer, f) is not None:
                arrays[f"lexer.{f}"] = getattr(self.lexer, f)
        if self.lexer.counter is not None:
            arrays.update({f"lexer.counter.{f}": getattr(self.lexer.counter, f) for f in CountTables.FIELDS})
        arrays.update({f"tables.{f}": getattr(self.parse, f) for f in _TABLE_ARRAYS})
        self.masks.complete_all()
        arrays.update({f"masks.{f}": a for f, a in self.masks.arrays().items()})
        arrays["parser_term"] = self.parser_term
        meta = {
            "lexer_terminals": list(self.lexer.terminals),
            "parser_terminals": list(self.parse.terminals),
            "nonterminals": list(self.parse.nonterminals),
            "rule_text": list(self.parse.rule_text),
            "parser_notes": list(self.parse.notes),
            "start_state": self.parse.start_state,
            "accept_state": self.parse.accept_state,
            "indent": None if self.indent is None else self.indent.to_json(),
            "lexer_aliases": [list(a) for a in self.lexer.aliases],
            "lexer_end_terminal": self.lexer.end_terminal,
        }
        return arrays, meta

    @classmethod
    def from_arrays(
        cls, arrays: dict[str, np.ndarray], meta: dict, vocab: Vocabulary, trie_of: Callable[[], VocabTrie]
    ) -> Engine:
        """The engine :meth:`to_arrays` encoded; KeyError or TypeError if a field is missing."""
        counter = None
        if "lexer.counter.inc" in arrays:
            counter = CountTables(**{f: arrays[f"lexer.counter.{f}"] for f in CountTables.FIELDS})
        lexer = LexerAutomaton(
            terminals=tuple(meta["lexer_terminals"]), **{f: arrays.get(f"lexer.{f}") for f in _LEXER_OPTIONAL},
            counter=counter,
            aliases=tuple(tuple(a) for a in meta.get("lexer_aliases", ())), end_terminal=meta.get("lexer_end_terminal", -1),
            **{f: arrays[f"lexer.{f}"] for f in _LEXER_FIELDS},
        )
        parse = ParseTables(
            terminals=tuple(meta["parser_terminals"]),
            nonterminals=tuple(meta["nonterminals"]),
            rule_text=tuple(meta["rule_text"]),
            notes=tuple(meta["parser_notes"]),
            start_state=int(meta["start_state"]),
            accept_state=int(meta["accept_state"]),
            **{f: arrays[f"tables.{f}"] for f in _TABLE_ARRAYS},
        )
        masks = MaskTables.from_arrays({f[len("masks."):]: a for f, a in arrays.items() if f.startswith("masks.")})
        indent = None if meta.get("indent") is None else IndentSpec.from_json(meta["indent"])
        return cls(lexer, parse, arrays["parser_term"], masks, vocab, trie_of, indent)


class MatcherView:
    """An engine's tables in the shapes the matcher reads on every step.

    A lexer state's rows are taken in on first use (:meth:`pairs`, which builds the state first where the
    tables are built lazily): ``pair_index[q]`` stays None until then and is set last, so a thread that
    finds it set finds everything it points to.
    """

    def __init__(self, engine: Engine):
        t = engine.masks
        tables = engine.parse
        self.lr = (tables.action, tables.goto, tables.rule_len, tables.rule_lhs)
        n_states = t.pair_after.shape[0]
        self.pair_index: list[list[int] | None] = [None] * n_states
        self.state_classes: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = [None] * n_states
        self.pair_mask: list[int] = []
        self.pair_marks: list[np.ndarray | None] = []
        self.pair_has_marks: list[bool] = []
        fptr, fterms = t.follow_ptr.tolist(), t.follow_terms.tolist()
        self.follow = [(tuple(fterms[fptr[f] : fptr[f + 1]]), bool(a)) for f, a in enumerate(t.follow_any.tolist())]
        self.state_follow = [self.follow[f] for f in t.state_follow.tolist()]
        self._tables = t
        self._python: dict[int, list] = {}
        self._groups: dict[int, list] = {}
        eos = np.array(sorted(engine.vocab.eos_ids), dtype=np.int64)
        self.eos_words = eos // 32
        self.eos_bits = np.left_shift(1, eos % 32).astype(np.uint32).view(np.int32)
        self.n_words = t.masks.shape[1]
        self.n_logits = engine.vocab.n_logits
        self._lexer = engine.lexer
        self._parser_term = engine.parser_term.tolist()
        self._end = int(tables.end)
        self._ends: list[tuple[int, ...] | None | bool] = [False] * n_states  # False: not looked up yet
        # Row q: how many terminals end_terms(q) has, then them (written before _ends[q], where they fit).
        self.end_width = 15
        self.end_table = np.zeros((n_states, self.end_width + 1), dtype=np.int32)
        with t.lock:
            self._arrays()

    def pairs(self, q: int) -> list[int]:
        """Lexer state ``q``'s pair per LR state (-1: none), the state's tables built first if need be."""
        row = self.pair_index[q]
        if row is None:
            with self._tables.lock:
                row = self.pair_index[q]
                if row is None:
                    self._tables.ensure(q)
                    row = self._take(q)
        return row

    def end_terms(self, q: int) -> tuple[int, ...] | None:
        """The parser terminals the end of input makes the pending lexeme of lexer state ``q`` emit, the end marker
        last (the stack accepts the end iff it takes them all), or None where that lexeme is incomplete; those of
        at most ``end_width`` terminals are also in ``end_table[q]``."""
        seq = self._ends[q]
        if seq is False:
            finished = self._lexer.finish(q)
            term = self._parser_term
            seq = None if finished is None else (*[term[t] for t in finished if term[t] >= 0], self._end)
            if seq is not None and len(seq) <= self.end_width:
                self.end_table[q, 1 : len(seq) + 1] = seq
                self.end_table[q, 0] = len(seq)
            self._ends[q] = seq
        return seq

    def _arrays(self) -> dict[str, np.ndarray]:
        """The growing tables' current arrays, also kept as the tuples the kernels take (the caller holds the lock)."""
        t = self._tables
        g = {name: grown.data for name, grown in t.grow.items()}
        self.masks = g["masks"]
        self.class_tables = (g["class_seq_ptr"], g["class_seq_terms"], g["class_follow"], t.follow_ptr,
                             t.follow_terms, t.follow_any)
        self.dep_bits = (g["dep_word_ptr"], g["dep_words"], g["dep_bits"])
        self.fill_args = (g["pair_mask"], g["pair_marks"], g["masks"], g["marks_ptr"], g["marks"], t.state_span,
                          g["state_class"], g["state_lcp"], g["state_dep"], *self.lr, *self.class_tables,
                          *self.dep_bits, self.eos_words, self.eos_bits, self.end_table)
        """The tables as :func:`grammask.batch.fill_masks`'s kernel takes them."""
        return g

    def _take(self, q: int) -> list[int]:
        """Take in built state ``q``: its classes and its pairs' masks and marks (the caller holds the lock)."""
        t = self._tables
        g = self._arrays()
        a, b = t.state_span[q].tolist()
        self.state_classes[q] = (g["state_class"][a:b], g["state_lcp"][a:b], g["state_dep"][a:b])
        more = len(t.grow["pair_mask"]) - len(self.pair_mask)
        self.pair_mask.extend([0] * more)
        self.pair_marks.extend([None] * more)
        self.pair_has_marks.extend([False] * more)
        ids = t.pair_index(q)
        pairs = ids[ids >= 0]
        for pair, mask, m in zip(pairs.tolist(), g["pair_mask"][pairs].tolist(), g["pair_marks"][pairs].tolist(),
                                 strict=True):
            marks = g["marks"][g["marks_ptr"][m] : g["marks_ptr"][m + 1]]
            self.pair_mask[pair] = mask
            self.pair_marks[pair] = marks
            self.pair_has_marks[pair] = bool(marks.any())
        row = ids.tolist()
        self.pair_index[q] = row
        return row

    def class_python(self, c: int) -> tuple[tuple[int, ...], tuple[tuple[int, ...], bool]]:
        """Class ``c`` as (terminal sequence, (follow terminals, follow any)), for the Python fallback."""
        seq_ptr, seq_terms, follow = self.class_tables[:3]
        seq = tuple(seq_terms[seq_ptr[c] : seq_ptr[c + 1]].tolist())
        return seq, self.follow[int(follow[c])]

    def state_python(self, q: int) -> list[tuple[tuple[int, ...], tuple[tuple[int, ...], bool], int]]:
        """Lexer state ``q``'s classes as (terminal sequence, follow, dependent class list), for the Python
        fallback (built on first use per state)."""
        found = self._python.get(q)
        if found is None:
            classes, _, deps = self.state_classes[q]
            found = self._python[q] = [(*self.class_python(c), d) for c, d in zip(classes.tolist(), deps.tolist())]
        return found

    def context_groups(self, q: int, base: int, stride: int,
                       ) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Lexer state ``q``'s classes whose sequence starts with a context terminal (an id >= ``base``), grouped by
        it without its modes (see :mod:`grammask.indentation`; ``stride`` ids per width): (that id, the classes' local
        indices, their class numbers, the common prefixes of their tails, each one's modes ``k``)."""
        found = self._groups.get(q)
        if found is None:
            classes, lcp, _ = self.state_classes[q]
            groups: dict[int, list[int]] = {}
            for k, (seq, _, _) in enumerate(self.state_python(q)):
                if seq and seq[0] >= base:
                    groups.setdefault(seq[0] - (seq[0] - base - 1) % stride, []).append(k)
            found = []
            for first, members in groups.items():
                local = np.array(members, dtype=np.int64)
                tail_lcp = np.maximum(lcp[local].astype(np.int64) - 1, 0)
                firsts = np.array([self.state_python(q)[k][0][0] for k in members], dtype=np.int64)
                tail_lcp[0] = 0
                found.append((first, local, classes[local], tail_lcp, firsts - first))
            self._groups[q] = found
        return found

    def dep_words(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """The bitmask words and bits of the tokens of dependent class list ``d``."""
        ptr, words, bits = self.dep_bits
        return words[ptr[d] : ptr[d + 1]], bits[ptr[d] : ptr[d + 1]]
