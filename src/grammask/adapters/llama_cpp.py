"""llama.cpp through ``llama-cpp-python``: a GGUF model as a grammask :class:`~grammask.models.protocol.TextModel`,
and a logits processor for ``Llama.__call__`` / ``create_completion`` (``pip install 'grammask[llama-cpp]'``).

llama.cpp holds one sequence's KV cache per context. :class:`LlamaCppModel` keeps it at the last
sequence it read; extending another state rolls the cache back to the longest prefix the two share
and reads only the rest, so sequences that fork (beams, tree search) reuse their common prefix.
llama.cpp's logits for a sequence depend on how it was split into batches (on the default Q4_1 model, up
to 0.5 between reading a prompt whole and token by token), so a search's outputs can depend on the order
in which it visited states; rolling back gives exactly what a fresh context reading the same chunks gives.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from grammask.bitmask import allocate_bitmask, apply_bitmask
from grammask.compiled import CompiledGrammar
from grammask.errors import DecodingError, MatcherStateError, ModelError
from grammask.vocab import Vocabulary

_PIECE_BYTES = 256


class LlamaCppState:
    """A token sequence the llama.cpp model has read, with its next-token logits."""

    __slots__ = ("logits", "tokens")

    def __init__(self, tokens: tuple[int, ...], logits: np.ndarray):
        self.tokens = tokens
        self.logits = logits

    @property
    def length(self) -> int:
        return len(self.tokens)


class LlamaCppModel:
    """A ``llama_cpp.Llama`` as a grammask text model; EOS ids are the model's end-of-generation tokens."""

    def __init__(self, llm: llama_cpp.Llama):
        self.llm = llm
        self._vocab_ptr = llama_cpp.llama_model_get_vocab(llm.model)
        self._n_logits = int(llm.n_vocab())
        self._eos_ids = frozenset(t for t in range(self._n_logits) if llama_cpp.llama_vocab_is_eog(self._vocab_ptr, t))
        self._vocab: Vocabulary | None = None

    @classmethod
    def from_path(cls, path: str | Path, *, n_ctx: int = 4096, **kwargs: Any) -> LlamaCppModel:
        """Load a GGUF file (``kwargs`` go to ``llama_cpp.Llama``).

        Raises :class:`~grammask.errors.ModelError` when there is no file at ``path`` or llama.cpp cannot load it.
        """
        if not Path(path).is_file():
            raise ModelError(f"no GGUF file at {path}")
        try:
            llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, logits_all=False, verbose=False, **kwargs)
        except ValueError as e:
            raise ModelError(f"llama.cpp cannot load {path}: {e}") from None
        return cls(llm)

    @property
    def n_logits(self) -> int:
        return self._n_logits

    @property
    def eos_ids(self) -> frozenset[int]:
        return self._eos_ids

    @property
    def context_window(self) -> int:
        return int(self.llm.n_ctx())

    @property
    def vocab(self) -> Vocabulary:
        """Token bytes as llama.cpp spells them (control tokens: None).

        Raises :class:`~grammask.errors.ModelError` for a token longer than the piece buffer.
        """
        if self._vocab is None:
            buf = ctypes.create_string_buffer(_PIECE_BYTES)
            tokens: list[bytes | None] = []
            for t in range(self._n_logits):
                n = llama_cpp.llama_token_to_piece(self._vocab_ptr, t, buf, _PIECE_BYTES, 0, False)
                if n < 0:
                    raise ModelError(f"token {t} is longer than {_PIECE_BYTES} bytes")
                tokens.append(buf.raw[:n] or None)
            special = [t for t, b in enumerate(tokens) if b is None]
            self._vocab = Vocabulary(
                tokens, sorted(self._eos_ids), special_ids=special, name=Path(self.llm.model_path).stem
            )
        return self._vocab

    def encode_prompt(self, prompt: str, *, chat: bool | None = None) -> list[int]:
        """Token ids of a user prompt, wrapped in the chat template when ``chat`` (None: if the model has one).

        Raises :class:`~grammask.errors.DecodingError` for ``chat=True`` on a model without a chat template.
        """
        template = self.llm.metadata.get("tokenizer.chat_template")
        if chat is None:
            chat = template is not None
        if chat and template is None:
            raise DecodingError(f"{self.llm.model_path} has no chat template; generate without one")
        if not chat:
            return self.llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)
        formatter = Jinja2ChatFormatter(template, self._text(self.llm.token_eos()), self._text(self.llm.token_bos()))
        text = formatter(messages=[{"role": "user", "content": prompt}]).prompt
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def _text(self, token_id: int) -> str:
        return self.llm.detokenize([token_id], special=True).decode("utf-8", errors="replace")

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.llm.detokenize(list(token_ids)).decode("utf-8", errors="replace")

    def start(self, prompt_ids: Sequence[int]) -> LlamaCppState:
        return self._read(tuple(prompt_ids))

    def extend(self, states: Sequence[LlamaCppState], token_ids: Sequence[int]) -> list[LlamaCppState]:
        return [self._read(s.tokens + (int(t),)) for s, t in zip(states, token_ids)]

    def read(self, state: LlamaCppState, token_ids: Sequence[int]) -> LlamaCppState:
        """Append several tokens to one state in one evaluation."""
        return self._read(state.tokens + tuple(int(t) for t in token_ids))

    def _read(self, tokens: tuple[int, ...]) -> LlamaCppState:
        """Bring the context to ``tokens``, reusing the longest cached prefix (at least the last token is read)."""
        llm = self.llm
        cached = llm.input_ids[: llm.n_tokens]
        n = min(len(cached), len(tokens) - 1)
        differ = np.flatnonzero(cached[:n] != np.asarray(tokens[:n], dtype=cached.dtype))
        llm.n_tokens = int(differ[0]) if len(differ) else n
        llm.eval(tokens[llm.n_tokens :])
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(self._n_logits,))
        return LlamaCppState(tokens, logits.copy())


class LlamaCppLogitsProcessor:
    """Constrains one ``llama_cpp.Llama`` completion to a compiled grammar (a ``logits_processor`` entry).

    Use one per completion. ``mask_seconds`` totals the time spent here. Pass the completion's
    ``max_tokens`` to keep a complete output within it (EOS included, see :mod:`grammask.budget`).
    """

    def __init__(self, compiled: CompiledGrammar, max_tokens: int | None = None):
        self.compiled = compiled
        self.matcher = compiled.matcher() if max_tokens is None else compiled.limited_matcher(max_tokens)
        self.row = allocate_bitmask(1, compiled.vocab.n_logits)[0]
        self.mask_seconds = 0.0
        self._prompt_len: int | None = None

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        start = perf_counter()
        if self._prompt_len is None:
            self._prompt_len = len(input_ids)
        generated = input_ids[self._prompt_len :]
        if len(generated) == self.matcher.num_tokens + 1:
            self.matcher.advance(int(generated[-1]))
        elif len(generated) != self.matcher.num_tokens:
            raise MatcherStateError("this LlamaCppLogitsProcessor already served another completion; make a new one")
        self.matcher.fill_mask(self.row)
        apply_bitmask(scores, self.row)
        self.mask_seconds += perf_counter() - start
        return scores
