"""``Compiler``: compiles grammars for one vocabulary and owns their caches and threads.

One compiler per vocabulary (as xgrammar's ``GrammarCompiler``): it builds the vocabulary's byte
trie once, keeps recently compiled grammars in a bounded in-memory cache, reads and writes the
disk cache (:mod:`grammask.cache`), and compiles in the background on its own threads when asked
(:meth:`Compiler.submit`). :func:`compile` is the one-line convenience over a small set of shared
compilers.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from grammask.cache import DiskCache
from grammask.canonical import CanonicalRelation, build_relation
from grammask.compiled import CompiledGrammar, CompileStats, encode_compiled
from grammask.engine import Engine
from grammask.errors import ConfigurationError, Deadline, GrammarError, check_timeout
from grammask.fetch import cache_dir
from grammask.gc_pause import collector_paused
from grammask.grammar.ir import Grammar
from grammask.mask_tables import FORMAT_VERSION, build_front, build_mask_tables
from grammask.spanner import TrieWalkPool, VocabTrie
from grammask.vocab import Vocabulary


class Compiler:
    """Compiles grammars for ``vocab``.

    ``cache``: True keeps compiled grammars in the user cache directory (``$GRAMMASK_CACHE`` or
    ``~/.cache/grammask``), a path in that directory, False on no disk. ``max_memory``: how many
    compiled grammars stay in memory (least recently used first out). ``threads``: workers of
    :meth:`submit`. ``timeout``: the seconds a compile may take (None: no limit), unless
    :meth:`compile` is given its own. ``lazy``: compile only what the first mask needs (the lexer, the
    parse tables and the start state's masks) and build each other lexer state's masks when a matcher
    first reaches it, as a server answering a new schema per request wants; such a grammar is written to
    the disk cache once :meth:`CompiledGrammar.complete` has built the rest. Thread-safe. Raises
    :class:`~grammask.errors.ConfigurationError` for a bad argument.
    """

    def __init__(
        self, vocab: Vocabulary, *, cache: bool | str | Path = True, max_memory: int = 64, threads: int = 1,
        timeout: float | None = None, lazy: bool = False,
    ):
        if not isinstance(vocab, Vocabulary):
            raise ConfigurationError(f"a Compiler takes a Vocabulary (e.g. Vocabulary.from_hf(tokenizer)), got "
                                     f"{type(vocab).__name__}")
        if max_memory < 0 or threads < 1:
            raise ConfigurationError(f"max_memory must be >= 0 and threads >= 1, not {max_memory} and {threads}")
        self.timeout = check_timeout(timeout)
        self.lazy = bool(lazy)
        self.vocab = vocab
        self._disk = DiskCache(_cache_folder(cache))
        self._max_memory = max_memory
        self._memory: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()
        self._trie = _LazyTrie(vocab)
        self._relation = _LazyRelation(vocab, cache is not False)
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None

    def compile(self, grammar: Grammar, timeout: float | None = None) -> CompiledGrammar:
        """``grammar`` compiled for this compiler's vocabulary (from memory or disk when cached).

        ``timeout``: the seconds this compile may take (None: the compiler's ``timeout``).
        Raises the :class:`~grammask.errors.GrammarError` subclasses of a grammar that cannot be
        compiled (a terminal no automaton can express, an LALR conflict, an empty language),
        :class:`~grammask.errors.CompileTimeoutError` when the time is up (checked between steps of
        the long loops, so it comes a little after), :class:`~grammask.errors.ConfigurationError`
        for a timeout that is not a positive number; :class:`~grammask.errors.GrammarError` for something
        that is not a :class:`Grammar`.
        """
        if not isinstance(grammar, Grammar):
            raise GrammarError(f"compile takes a Grammar (Grammar.from_lark(text), .from_json_schema(schema), "
                               f".builtin(name), ...), got {type(grammar).__name__}")
        deadline = Deadline(self.timeout if timeout is None else check_timeout(timeout), grammar.name)
        key = self._key(grammar)
        with self._lock:
            hit = self._memory.get(key)
            if hit is not None:
                self._memory.move_to_end(key)
        if hit is not None:
            return hit if hit.grammar.notes == grammar.notes else hit.with_grammar(grammar)
        start = time.perf_counter()

        def build() -> tuple[Engine, CompileStats]:
            return self._build(grammar, deadline)

        if self.lazy:
            found = self._disk.get(key, "", self._decode)
            (engine, stats), from_disk = (build(), False) if found is None else (found, True)
        else:
            (engine, stats), from_disk = self._disk.get_or_build(key, "", build, _encode, self._decode)
        if from_disk:
            stats = CompileStats(**{**stats.__dict__, "seconds": time.perf_counter() - start, "from_cache": True})
        compiled = CompiledGrammar(grammar, engine, stats, self._disk, key, self._relation, self.timeout)
        with self._lock:
            self._memory[key] = compiled
            while len(self._memory) > self._max_memory:
                self._memory.popitem(last=False)
        return compiled

    def submit(self, grammar: Grammar, timeout: float | None = None) -> Future[CompiledGrammar]:
        """Compile ``grammar`` on the compiler's threads (``timeout`` as in :meth:`compile`).

        The future's ``result(timeout)`` waits for it and raises what :meth:`compile` raises; the
        compile's own ``timeout`` stops it.
        """
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="grammask-compile")
            pool = self._pool
        return pool.submit(self.compile, grammar, timeout)

    def clear(self, *, disk: bool = False) -> None:
        """Forget the grammars held in memory; with ``disk=True`` also delete the disk cache's files."""
        with self._lock:
            self._memory.clear()
        if disk:
            self._disk.clear()

    def trie(self) -> VocabTrie:
        """The vocabulary's byte trie (built on first use)."""
        return self._trie()

    @collector_paused()  # the fingerprint of a big grammar allocates a list per rule
    def _key(self, grammar: Grammar) -> str:
        text = f"{FORMAT_VERSION}:{grammar.fingerprint()}:{self.vocab.fingerprint()}"
        return hashlib.sha256(text.encode()).hexdigest()

    @collector_paused()
    def _build(self, grammar: Grammar, deadline: Deadline) -> tuple[Engine, CompileStats]:
        start = time.perf_counter()
        front = build_front(grammar, deadline)
        lexer = front.lexer
        t_front = time.perf_counter() - start
        walks = self._trie.walks()
        t_trie = time.perf_counter() - start - t_front
        masks, tables, indent, phases = build_mask_tables(front, self.vocab, walks, deadline, lazy=self.lazy)
        stats = CompileStats(
            seconds=time.perf_counter() - start,
            lexer_states=lexer.n_states,
            parser_states=tables.n_states,
            phases=dict(front=t_front, trie=t_trie, **phases),
            complete=masks.complete,
            **masks.counts(),
        )
        return Engine(lexer, tables, front.parser_term, masks, self.vocab, self._trie, indent), stats

    def _decode(self, arrays: dict, meta: dict) -> tuple[Engine, CompileStats]:
        engine = Engine.from_arrays(arrays, meta, self.vocab, self._trie)
        return engine, CompileStats(seconds=0.0, from_cache=True, **meta["stats"])


class _LazyTrie:
    """A vocabulary's byte trie and the scratch of walks over it, built on the first call (thread-safe);
    compiled grammars hold this, not the compiler, so they do not keep its memory cache alive."""

    def __init__(self, vocab: Vocabulary):
        self._vocab = vocab
        self._trie: VocabTrie | None = None
        self._walks: TrieWalkPool | None = None
        self._lock = threading.Lock()

    def __call__(self) -> VocabTrie:
        with self._lock:
            if self._trie is None:
                self._trie = VocabTrie.from_vocab(self._vocab)
            return self._trie

    def walks(self) -> TrieWalkPool:
        """The scratch pool of walks over the trie, shared by the grammars of this vocabulary."""
        trie = self()
        with self._lock:
            if self._walks is None:
                self._walks = TrieWalkPool(trie)
            return self._walks


class _LazyRelation:
    """A vocabulary's canonical successor relation, built (or read from its disk cache) on the first call
    (thread-safe); shared by the compiler's grammars, so canonical matchers share what it remembers."""

    def __init__(self, vocab: Vocabulary, disk: bool):
        self._vocab = vocab
        self._disk = disk
        self._relation: CanonicalRelation | None = None
        self._lock = threading.Lock()

    def __call__(self) -> CanonicalRelation:
        with self._lock:
            if self._relation is None:
                self._relation = build_relation(self._vocab, cache=self._disk)
            return self._relation


def _encode(value: tuple[Engine, CompileStats]) -> tuple[dict, dict]:
    return encode_compiled(*value)


def _cache_folder(cache: bool | str | Path) -> Path | None:
    if cache is False:
        return None
    if cache is True:
        return cache_dir("compiled")
    if isinstance(cache, (str, Path)):
        return Path(cache)
    raise ConfigurationError(f"cache must be True, False or a directory, not {cache!r}")


_SHARED_LIMIT = 8
_shared: OrderedDict[tuple[str, Path | None], Compiler] = OrderedDict()
_shared_lock = threading.Lock()


def compile(grammar: Grammar, vocab: Vocabulary, *, cache: bool | str | Path = True) -> CompiledGrammar:
    """Compile ``grammar`` for ``vocab`` with a shared :class:`Compiler` (one per vocabulary and cache folder).

    ``cache`` as for :class:`Compiler`. Raises what :meth:`Compiler.compile` raises.
    """
    where = (vocab.fingerprint(), _cache_folder(cache))
    with _shared_lock:
        compiler = _shared.get(where)
        if compiler is None:
            compiler = _shared[where] = Compiler(vocab, cache=cache)
            while len(_shared) > _SHARED_LIMIT:
                _shared.popitem(last=False)
        else:
            _shared.move_to_end(where)
    return compiler.compile(grammar)


def clear_caches() -> None:
    """Forget the compilers :func:`compile` shares, and the grammars they hold in memory (the disk cache stays)."""
    with _shared_lock:
        _shared.clear()
