"""Peer engines for the mask benchmark: llguidance and xgrammar behind one small stepping interface.

Each peer is imported only when it is asked for, so the benchmark runs with whichever peers are
installed. Per-tokenizer setup (llguidance's ``LLTokenizer``, xgrammar's ``TokenizerInfo``) is done
once per tokenizer, outside the timed compile, the way a server would keep it.
"""

from __future__ import annotations

import functools
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


class NotApplicable(Exception):
    """This engine cannot run this case; the message says why (shown in the results table)."""


@dataclass(frozen=True)
class PeerTokenizer:
    """What a peer needs to know about a tokenizer: its tokenizer.json, EOS ids and logits width."""

    path: str
    eos_ids: tuple[int, ...]
    n_logits: int


@dataclass
class Stepper:
    """One sequence's matcher, reduced to the calls the replay times.

    ``fill()`` writes the next mask into ``row`` (int32 words, bit ``t % 32`` of word ``t // 32``);
    ``advance(t)`` consumes token ``t`` and returns ``False`` (or raises) when it is rejected;
    ``terminated()`` says whether the matcher has consumed EOS.
    """

    row: np.ndarray
    fill: Callable[[], object]
    advance: Callable[[int], object]
    terminated: Callable[[], bool]


@dataclass
class Build:
    """A compiled grammar: compile times in seconds and a factory for fresh steppers."""

    cold_s: float
    cached_s: float
    new_stepper: Callable[[], Stepper]
    extra: dict


_PRIORITY = re.compile(r"^(\s*[?!]?[A-Za-z_][A-Za-z0-9_]*)\.-?\d+(\s*:)", re.MULTILINE)
_IGNORE = re.compile(r"^\s*%ignore\s+(.+?)\s*$", re.MULTILINE)
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


def _mask_words(n_logits: int) -> int:
    return (n_logits + 31) // 32


# ---- llguidance -------------------------------------------------------------------------------


LLG_STEP_MAX_ITEMS = 500_000
"""llguidance's cap on Earley items per mask (default 50,000): at the default it gives up (masks
everything but EOS) at a long whitespace token inside a C function body on Llama-3."""


@functools.cache
def _llg_tokenizer(tok: PeerTokenizer):
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
    try:
        import llguidance
    except ImportError as e:
        raise NotApplicable(f"llguidance not installed ({e})") from None
    lltok = _llg_tokenizer(tok)
    limits = llguidance.LLParserLimits(step_max_items=LLG_STEP_MAX_ITEMS)

    def make():
        grammar = llguidance.LLMatcher.grammar_from_lark(lark_for_llguidance(lark_text))
        matcher = llguidance.LLMatcher(lltok, grammar, log_level=0, limits=limits)
        if matcher.is_error():
            raise NotApplicable(f"llguidance rejects the grammar: {matcher.get_error().splitlines()[0]}")
        return grammar, matcher

    t0 = time.perf_counter()
    grammar, _ = make()
    t1 = time.perf_counter()
    make()
    t2 = time.perf_counter()

    def new_stepper() -> Stepper:
        matcher = llguidance.LLMatcher(lltok, grammar, log_level=0, limits=limits)
        row = np.zeros(_mask_words(tok.n_logits), dtype=np.int32)
        fill = functools.partial(matcher.unsafe_compute_mask_ptr, row.ctypes.data, row.nbytes)
        return Stepper(row, fill, matcher.consume_token, matcher.is_stopped)

    return Build(t1 - t0, t2 - t1, new_stepper, {"version": llguidance.__version__})


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


def build_xgrammar(kind: str, schema: dict | None, tok: PeerTokenizer) -> Build:
    """Compile with xgrammar: ``kind`` is ``"builtin_json"`` (its own JSON grammar) or ``"schema"``.

    xgrammar's JSON grammars allow no whitespace before or after the value, where ours (``%ignore``)
    do, so the grammar is wrapped in optional JSON whitespace on both sides. ``cached_s`` is a
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
    else:
        raise ValueError(f"unknown xgrammar input kind {kind!r}")

    def compile_once():
        ws = xgrammar.Grammar.from_regex(JSON_WS)
        return compiler.compile_grammar(xgrammar.Grammar.concat(ws, make_core(), ws))

    t0 = time.perf_counter()
    compiled = compile_once()
    t1 = time.perf_counter()
    compile_once()
    t2 = time.perf_counter()

    def new_stepper() -> Stepper:
        matcher = xgrammar.GrammarMatcher(compiled)
        rows = np.zeros((1, _mask_words(info.vocab_size)), dtype=np.int32)
        fill = functools.partial(matcher.fill_next_token_bitmask, rows, 0)
        return Stepper(rows[0], fill, matcher.accept_token, matcher.is_terminated)

    from importlib.metadata import version

    return Build(t1 - t0, t2 - t1, new_stepper, {"version": version("xgrammar")})
