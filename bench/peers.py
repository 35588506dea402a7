"""Peer engines behind the harness's :class:`~harness.Build` / :class:`~harness.Stepper` interface:
llguidance and xgrammar (mask benchmark), llguidance on JSON schemas (schema benchmark) and
outlines-core (regex benchmark).

Each peer is imported only when it is asked for, so the benchmarks run with whichever peers are
installed. Per-tokenizer setup (llguidance's ``LLTokenizer``, xgrammar's ``TokenizerInfo``,
outlines-core's ``Vocabulary``) is done once per tokenizer, outside the timed compile, the way a
server would keep it.
"""

from __future__ import annotations

import functools
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version

import numpy as np
from harness import Build, NotApplicable, Stepper

import grammask as gm
from grammask.bitmask import bitmask_words


@dataclass(frozen=True)
class PeerTokenizer:
    """What a peer needs to know about a tokenizer: its tokenizer.json, EOS ids and logits width."""

    path: str
    eos_ids: tuple[int, ...]
    n_logits: int


_PRIORITY = re.compile(r"^(\s*[?!]?[A-Za-z_][A-Za-z0-9_]*)\.-?\d+(\s*:)", re.MULTILINE)
_IGNORE = re.compile(r"^\s*%ignore\s+(.+?)(?:\s+//.*)?\s*$", re.MULTILINE)
_KEEP_TOKENS = re.compile(r"^(\s*)!(\??[A-Za-z_][A-Za-z0-9_]*\s*:)", re.MULTILINE)
_START_HEAD = re.compile(r"^(\s*\??)start(\s*:)", re.MULTILINE)


def lark_for_llguidance(text: str) -> str:
    """Rewrite a grammar in Lark's dialect into llguidance's, keeping its language.

    Two differences matter for our grammars: llguidance rejects priorities (``NAME.2:``), so they
    are dropped (its lexer has no priority tie-breaks anyway); and it applies ``%ignore`` only
    between terminals, not before the first or after the last one as Lark does, so ``start`` gets
    explicit optional runs of the ignored terminals around it.
    """
    text = _PRIORITY.sub(r"\1\2", text)
    ignored = _IGNORE.findall(text)
    if ignored and _START_HEAD.search(text):
        text = _START_HEAD.sub(r"\1llg_document\2", text, count=1)
        run = f"({' | '.join(ignored)})*"
        text += f"\nstart: {run} llg_document {run}\n"
    return text


# ---- llguidance -------------------------------------------------------------------------------


LLG_STEP_MAX_ITEMS = 500_000
"""llguidance's cap on Earley items per mask (default 50,000): at the default it gives up (masks
everything but EOS) at a long whitespace token inside a C function body on Llama-3."""


@functools.cache
def llg_tokenizer(tok: PeerTokenizer):
    """llguidance's tokenizer for ``tok``, built once, with the shared per-vocabulary state warmed up."""
    import llguidance

    with open(tok.path, encoding="utf-8") as f:
        lltok = llguidance.LLTokenizer(f.read(), n_vocab=tok.n_logits, eos_token=list(tok.eos_ids))
    # The first matcher on a tokenizer builds shared per-vocabulary state; keep it out of compile times.
    warm = llguidance.LLMatcher(lltok, llguidance.LLMatcher.grammar_from_lark('start: "a"'))
    warm.compute_bitmask()
    return lltok


def build_llguidance(lark_text: str, tok: PeerTokenizer) -> Build:
    """Compile a Lark grammar (our dialect) with llguidance.

    llguidance keeps no compiled-grammar cache, so ``cached_s`` is a second build of the same
    grammar in the same process. Its lexer is built lazily, so part of its compile work shows up
    in the first masks instead. Its Earley item cap per mask is raised (see ``LLG_STEP_MAX_ITEMS``).
    """
    llguidance = _llguidance()
    return _build_llguidance(
        functools.partial(llguidance.LLMatcher.grammar_from_lark, lark_for_llguidance(lark_text)), tok
    )


def build_llguidance_schema(schema: dict, tok: PeerTokenizer) -> Build:
    """Compile a JSON schema with llguidance, strict whitespace (no space after ``,`` and ``:``),
    as :func:`build_llguidance` does a Lark grammar."""
    llguidance = _llguidance()
    grammar_of = functools.partial(
        llguidance.LLMatcher.grammar_from_json_schema, schema, defaults={"whitespace_flexible": False}
    )
    return _build_llguidance(grammar_of, tok)


def _llguidance():
    """The llguidance module; :class:`NotApplicable` when it is not installed."""
    try:
        import llguidance
    except ImportError as e:
        raise NotApplicable(f"llguidance not installed ({e})") from None
    return llguidance


def _build_llguidance(grammar_of: Callable[[], str], tok: PeerTokenizer) -> Build:
    """Build ``grammar_of()`` and its matcher twice (cold, then again as ``cached_s``), timing both."""
    llguidance = _llguidance()
    lltok = llg_tokenizer(tok)
    limits = llguidance.LLParserLimits(step_max_items=LLG_STEP_MAX_ITEMS)

    def make():
        grammar = grammar_of()
        matcher = llguidance.LLMatcher(lltok, grammar, log_level=0, limits=limits)
        if matcher.is_error():
            raise NotApplicable(f"llguidance rejects the grammar: {matcher.get_error().splitlines()[0]}")
        return grammar

    t0 = time.perf_counter()
    grammar = make()
    t1 = time.perf_counter()
    make()
    t2 = time.perf_counter()

    def new_stepper() -> Stepper:
        matcher = llguidance.LLMatcher(lltok, grammar, log_level=0, limits=limits)
        row = np.zeros(bitmask_words(tok.n_logits), dtype=np.int32)
        fill = functools.partial(matcher.unsafe_compute_mask_ptr, row.ctypes.data, row.nbytes)
        return Stepper(row, fill, matcher.consume_token, matcher.is_stopped)

    new_matcher = functools.partial(llguidance.LLMatcher, lltok, grammar, log_level=0, limits=limits)
    return Build(t1 - t0, t2 - t1, new_stepper, {"version": llguidance.__version__}, new_matcher)


# ---- xgrammar ---------------------------------------------------------------------------------


@functools.cache
def _xgr_tokenizer_info(tok: PeerTokenizer):
    import xgrammar
    from transformers import PreTrainedTokenizerFast

    _single_thread_torch()
    hf = PreTrainedTokenizerFast(tokenizer_file=tok.path)
    return xgrammar.TokenizerInfo.from_huggingface(hf, vocab_size=tok.n_logits, stop_token_ids=list(tok.eos_ids))


def _single_thread_torch() -> None:
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


JSON_WS = r"[ \t\n\r]*"


def lark_for_xgrammar(text: str) -> str:
    """Rewrite a grammar in Lark's dialect for xgrammar's Lark import, where that keeps its language:
    priorities (``operand.3:``) and the keep-tokens mark (``!rule:``) are dropped, as xgrammar
    rejects both (neither changes the language), and ``start`` gets optional runs of the ignored
    terminals around it as for llguidance (:func:`lark_for_llguidance`): xgrammar too allows no
    ignored text before the first terminal."""
    return lark_for_llguidance(_KEEP_TOKENS.sub(r"\1\2", text))


def build_xgrammar(kind: str, schema: dict | None, tok: PeerTokenizer, lark_text: str = "") -> Build:
    """Compile with xgrammar: ``kind`` is ``"builtin_json"`` (its own JSON grammar), ``"schema"`` or
    ``"lark"`` (``lark_text`` through xgrammar's own Lark import, after :func:`lark_for_xgrammar`).

    xgrammar's JSON grammars allow no whitespace before or after the value, where ours (``%ignore``)
    do, so the grammar is wrapped in optional JSON whitespace on both sides. xgrammar has no lexer:
    its Lark import splices ``%ignore`` between symbols at character level, so the language it
    compiles from a Lark grammar can differ from Lark's (the replay's checks show where).
    A grammar xgrammar rejects is :class:`NotApplicable` with its error. ``cached_s`` is a
    second compile on the same ``GrammarCompiler``, answered from its in-memory cache.
    """
    try:
        import xgrammar
    except ImportError as e:
        raise NotApplicable(f"xgrammar not installed ({e})") from None
    info = _xgr_tokenizer_info(tok)
    compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=True)
    if kind == "builtin_json":
        make_core = xgrammar.Grammar.builtin_json_grammar
    elif kind == "schema":
        make_core = functools.partial(xgrammar.Grammar.from_json_schema, schema, any_whitespace=True)
    elif kind != "lark":
        raise ValueError(f"unknown xgrammar input kind {kind!r}")

    def compile_once():
        if kind == "lark":
            return compiler.compile_grammar(xgrammar.Grammar.from_lark(lark_for_xgrammar(lark_text)))
        ws = xgrammar.Grammar.from_regex(JSON_WS)
        return compiler.compile_grammar(xgrammar.Grammar.concat(ws, make_core(), ws))

    t0 = time.perf_counter()
    try:
        compiled = compile_once()
    except RuntimeError as e:  # xgrammar reports a grammar it cannot take as a RuntimeError
        raise NotApplicable(f"xgrammar rejects the grammar: {' '.join(str(e).split())[:300]}") from None
    t1 = time.perf_counter()
    compile_once()
    t2 = time.perf_counter()

    def new_stepper() -> Stepper:
        matcher = xgrammar.GrammarMatcher(compiled)
        rows = np.zeros((1, bitmask_words(info.vocab_size)), dtype=np.int32)
        fill = functools.partial(matcher.fill_next_token_bitmask, rows, 0)
        return Stepper(rows[0], fill, matcher.accept_token, matcher.is_terminated)

    new_matcher = functools.partial(xgrammar.GrammarMatcher, compiled)
    return Build(t1 - t0, t2 - t1, new_stepper, {"version": version("xgrammar")}, new_matcher)


# ---- outlines-core ----------------------------------------------------------------------------


@functools.cache
def outlines_vocabulary(vocab: gm.Vocabulary):
    """outlines-core's vocabulary for ``vocab``: every token with bytes but EOS, and the lowest EOS id."""
    import outlines_core

    eos = set(vocab.eos_ids)
    by_bytes: dict[bytes, list[int]] = {}
    for i, token in enumerate(vocab.tokens):
        if token and i not in eos:
            by_bytes.setdefault(token, []).append(i)
    return outlines_core.Vocabulary(min(eos), by_bytes)


def build_outlines(pattern: str, vocab: gm.Vocabulary) -> Build:
    """Compile a regex into an outlines-core index; one build (``cached_s`` is None)."""
    import outlines_core

    oc_vocab = outlines_vocabulary(vocab)
    eos = oc_vocab.get_eos_token_id()
    t0 = time.perf_counter()
    try:
        index = outlines_core.Index(pattern, oc_vocab)
    except Exception as e:  # noqa: BLE001 (outlines-core rejects some Python regex syntax, error types undocumented)
        raise NotApplicable(str(e).splitlines()[0]) from None
    seconds = time.perf_counter() - t0

    def new_stepper() -> Stepper:
        guide = outlines_core.Guide(index)
        row = np.zeros(bitmask_words(vocab.n_logits), dtype=np.int32)
        fill = functools.partial(guide.write_mask_into, row.ctypes.data, row.size, row.itemsize)

        def advance(token: int) -> None:
            # A guide allows EOS where it is finished but does not take it: EOS ends the sequence there.
            if token != eos:
                guide.advance(token)

        return Stepper(row, fill, advance, guide.is_finished)

    return Build(seconds, None, new_stepper, {"version": version("outlines_core")})
