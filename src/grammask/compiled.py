"""``grammask.compile``: a grammar and a vocabulary in, an immutable :class:`CompiledGrammar` out.

Compiled grammars are cached on disk, keyed by the grammar's and the vocabulary's
fingerprints and the format version (see :mod:`grammask.cache`), and in memory for the life
of the process. A corrupt or stale cache file is reported in the log and rebuilt.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import logging
import threading
import time
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from grammask.automata.lexer import LexerAutomaton
from grammask.cache import load_arrays, save_arrays
from grammask.compile import (
    FORMAT_VERSION,
    CompileStats,
    MaskTables,
    build_front,
    build_mask_tables,
)
from grammask.errors import CacheError
from grammask.fetch import cache_dir
from grammask.grammar.ir import Grammar
from grammask.parser.stack import LRRunner
from grammask.parser.tables import ParseTables
from grammask.spanner import VocabTrie

if TYPE_CHECKING:
    from grammask.budget import BudgetRuntime
    from grammask.matcher import Matcher
    from grammask.vocab import Vocabulary

log = logging.getLogger("grammask")

_memory: dict[str, CompiledGrammar] = {}
_tries: dict[str, VocabTrie] = {}
_lock = threading.Lock()


class CompiledGrammar:
    """A grammar compiled for one vocabulary: immutable, shareable between threads and matchers."""

    def __init__(
        self,
        grammar: Grammar,
        vocab: Vocabulary,
        lexer: LexerAutomaton,
        tables: ParseTables,
        parser_term: np.ndarray,
        masks: MaskTables,
        stats: CompileStats,
    ):
        self.grammar = grammar
        self.vocab = vocab
        self.lexer = lexer
        self.tables = tables
        self.parser_term = parser_term
        self.mask_tables = masks
        self.stats = stats
        self.cache_path: Path | None = None  # set by compile(); the budget tables are cached beside it
        self.notes: tuple[str, ...] = _notes(grammar, tables)
        """What the grammar's front end could not enforce (e.g. schema keywords dropped with ``strict=False``),
        then the LALR(1) conflicts resolved as Lark resolves them."""

    def matcher(self, max_tokens: int | None = None) -> Matcher:
        """A fresh matcher at the start of a document.

        ``max_tokens``: a budget ``N`` on the whole output, EOS included; the masks then keep a complete
        output within ``N`` tokens reachable (see :mod:`grammask.budget`). Raises
        :class:`~grammask.errors.BudgetError` when no output of the grammar fits.
        """
        from grammask.matcher import Matcher

        return Matcher(self, max_tokens=max_tokens)

    @property
    def nbytes(self) -> int:
        """Bytes held by the compiled tables (masks, lexer, parser)."""
        lexer = sum(a.nbytes for a in (self.lexer.trans, self.lexer.accept, self.lexer.produce))
        parser = self.tables.action.nbytes + self.tables.goto.nbytes
        return self.mask_tables.nbytes + lexer + parser

    @cached_property
    def runner(self) -> LRRunner:
        return LRRunner(self.tables)

    @cached_property
    def runtime(self) -> Runtime:
        return Runtime(self)

    @cached_property
    def budget_runtime(self) -> BudgetRuntime:
        """The token-budget tables (computed on first use, cached on disk beside the compiled grammar)."""
        from grammask.budget import BudgetRuntime

        return BudgetRuntime(self)

    def __repr__(self) -> str:
        s = self.stats
        return (
            f"CompiledGrammar({self.grammar.name!r}, vocab={self.vocab.name!r}, lexer_states={s.lexer_states}, "
            f"parser_states={s.parser_states}, pairs={s.pairs}, masks={s.masks}, {self.nbytes / 1e6:.1f} MB)"
        )


class Runtime:
    """Views of a compiled grammar's tables in the shapes the matcher reads on every step."""

    def __init__(self, compiled: CompiledGrammar):
        t = compiled.mask_tables
        tables = compiled.tables
        self.lr = (tables.action, tables.goto, tables.rule_len, tables.rule_lhs)
        self.pair_index = t.pair_index.tolist()
        self.pair_mask = t.pair_mask.tolist()
        self.masks = t.masks
        mptr = t.marks_ptr.tolist()
        self.pair_marks = [t.marks[mptr[m] : mptr[m + 1]] for m in t.pair_marks.tolist()]
        sptr = t.state_ptr.tolist()
        self.state_classes = [
            (t.state_class[a:b], t.state_lcp[a:b], t.state_dep[a:b]) for a, b in itertools.pairwise(sptr)
        ]
        self.class_tables = (t.class_seq_ptr, t.class_seq_terms, t.class_follow, t.follow_ptr, t.follow_terms,
                             t.follow_any)
        self.dep_bits = (t.dep_word_ptr, t.dep_words, t.dep_bits)
        fptr, fterms = t.follow_ptr.tolist(), t.follow_terms.tolist()
        self.follow = [(tuple(fterms[fptr[f] : fptr[f + 1]]), bool(a)) for f, a in enumerate(t.follow_any.tolist())]
        self.state_follow = [self.follow[f] for f in t.state_follow.tolist()]
        self._tables = t
        eos = np.array(sorted(compiled.vocab.eos_ids), dtype=np.int64)
        self.eos_words = eos // 32
        self.eos_bits = np.left_shift(1, eos % 32).astype(np.uint32).view(np.int32)
        self.n_words = t.masks.shape[1]

    def class_python(self, c: int) -> tuple[tuple[int, ...], tuple[tuple[int, ...], bool]]:
        """Class ``c`` as (terminal sequence, (follow terminals, follow any)), for the Python fallback."""
        t = self._tables
        seq = tuple(t.class_seq_terms[t.class_seq_ptr[c] : t.class_seq_ptr[c + 1]].tolist())
        return seq, self.follow[int(t.class_follow[c])]

    def dep_words(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        t = self._tables
        a, b = t.dep_word_ptr[d], t.dep_word_ptr[d + 1]
        return t.dep_words[a:b], t.dep_bits[a:b]


def compile(grammar: Grammar, vocab: Vocabulary, *, cache: bool | str | Path = True) -> CompiledGrammar:
    """Compile ``grammar`` for ``vocab``.

    ``cache``: True uses the user cache directory (``$GRAMMASK_CACHE`` or ``~/.cache/grammask``),
    a path uses that directory, False neither reads nor writes the disk cache. Compiled
    grammars are also kept in memory, per process, by the same key.
    """
    key = cache_key(grammar, vocab)
    with _lock:
        hit = _memory.get(key)
    if hit is not None:
        if hit.notes != _notes(grammar, hit.tables):  # same language, but this grammar's front end left different notes
            hit = copy.copy(hit)
            hit.grammar, hit.notes = grammar, _notes(grammar, hit.tables)
        return hit
    path = _cache_path(cache, key)
    compiled = None
    if path is not None and path.exists():
        start = time.perf_counter()
        try:
            compiled = _load(path, key, grammar, vocab)
            compiled.stats = dataclasses.replace(compiled.stats, seconds=time.perf_counter() - start)
        except CacheError as e:
            log.warning("grammask: %s; rebuilding it", e)
    if compiled is None:
        compiled = _build(grammar, vocab)
        if path is not None:
            _save(path, key, compiled)
    compiled.cache_path = path
    with _lock:
        _memory[key] = compiled
    return compiled


def _notes(grammar: Grammar, tables: ParseTables) -> tuple[str, ...]:
    return tuple(getattr(grammar, "notes", ())) + tables.notes


def clear_memory_cache() -> None:
    """Forget compiled grammars held in memory (the disk cache is untouched)."""
    with _lock:
        _memory.clear()
        _tries.clear()


def cache_key(grammar: Grammar, vocab: Vocabulary) -> str:
    text = f"{FORMAT_VERSION}:{grammar.fingerprint()}:{vocab.fingerprint()}"
    return hashlib.sha256(text.encode()).hexdigest()


def _cache_path(cache: bool | str | Path, key: str) -> Path | None:
    if cache is False:
        return None
    folder = cache_dir("compiled") if cache is True else Path(cache)
    return folder / f"{key[:32]}.npz"


def _vocab_trie(vocab: Vocabulary) -> VocabTrie:
    fp = vocab.fingerprint()
    with _lock:
        trie = _tries.get(fp)
    if trie is None:
        trie = VocabTrie.from_vocab(vocab)
        with _lock:
            _tries[fp] = trie
    return trie


def _build(grammar: Grammar, vocab: Vocabulary) -> CompiledGrammar:
    start = time.perf_counter()
    lexer, tables, parser_term = build_front(grammar)
    t_front = time.perf_counter() - start
    trie = _vocab_trie(vocab)
    t_trie = time.perf_counter() - start - t_front
    masks, phases = build_mask_tables(lexer, tables, parser_term, vocab, trie)
    stats = CompileStats(
        seconds=time.perf_counter() - start,
        lexer_states=lexer.n_states,
        reachable_lexer_states=int(phases.pop("reachable_states")),
        parser_states=tables.n_states,
        pairs=len(masks.pair_mask),
        masks=len(masks.masks),
        depends_classes=len(masks.dep_word_ptr) - 1,
        phases=dict(front=t_front, trie=t_trie, **phases),
    )
    return CompiledGrammar(grammar, vocab, lexer, tables, parser_term, masks, stats)


_LEXER_FIELDS = ("trans", "accept", "produce", "ignored")
_TABLE_ARRAYS = ("action", "goto", "rule_lhs", "rule_len", "rule_rhs")


def _save(path: Path, key: str, c: CompiledGrammar) -> None:
    arrays = {f"lexer.{f}": getattr(c.lexer, f) for f in _LEXER_FIELDS}
    arrays.update({f"tables.{f}": getattr(c.tables, f) for f in _TABLE_ARRAYS})
    arrays.update({f"masks.{f.name}": getattr(c.mask_tables, f.name) for f in dataclasses.fields(MaskTables)})
    arrays["parser_term"] = c.parser_term
    meta = {
        "key": key,
        "format": FORMAT_VERSION,
        "lexer_terminals": list(c.lexer.terminals),
        "parser_terminals": list(c.tables.terminals),
        "nonterminals": list(c.tables.nonterminals),
        "rule_text": list(c.tables.rule_text),
        "start_state": c.tables.start_state,
        "accept_state": c.tables.accept_state,
        "parser_notes": list(c.tables.notes),
        "stats": {k: v for k, v in dataclasses.asdict(c.stats).items() if k not in ("seconds", "from_cache", "phases")},
    }
    try:
        save_arrays(path, arrays, meta)
    except OSError as e:
        log.warning("grammask: could not write the compile cache %s (%s)", path, e)


def _load(path: Path, key: str, grammar: Grammar, vocab: Vocabulary) -> CompiledGrammar:
    arrays, meta = load_arrays(path, key)
    try:
        lexer = LexerAutomaton(terminals=tuple(meta["lexer_terminals"]), **{f: arrays[f"lexer.{f}"] for f in _LEXER_FIELDS})
        tables = ParseTables(
            terminals=tuple(meta["parser_terminals"]),
            nonterminals=tuple(meta["nonterminals"]),
            rule_text=tuple(meta["rule_text"]),
            start_state=int(meta["start_state"]),
            accept_state=int(meta["accept_state"]),
            notes=tuple(meta["parser_notes"]),
            **{f: arrays[f"tables.{f}"] for f in _TABLE_ARRAYS},
        )
        masks = MaskTables(**{f.name: arrays[f"masks.{f.name}"] for f in dataclasses.fields(MaskTables)})
        stats = CompileStats(seconds=0.0, from_cache=True, **meta["stats"])
        parser_term = arrays["parser_term"]
    except (KeyError, TypeError) as e:
        raise CacheError(f"cache file {path} lacks a field ({e})") from None
    return CompiledGrammar(grammar, vocab, lexer, tables, parser_term, masks, stats)
