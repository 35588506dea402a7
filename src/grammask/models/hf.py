"""Hugging Face transformers: any causal LM as a grammask :class:`~grammask.models.protocol.TextModel`,
loaded from a local model directory or a GGUF file.

:class:`HFModel` keeps the KV cache as a tree: the prompt's cache is held once, and every later state
holds its own token's keys and values, so states extended from a common prefix share that prefix's
cache. The full caches of the most recently used states are also kept, so a state that is extended
right after it was made (greedy decoding, the beams of a beam search) costs no rebuilding.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from grammask.errors import DecodingError, ModelError
from grammask.models.gguf import converted_gguf
from grammask.vocab import WELL_KNOWN_EOS_TOKENS, Vocabulary

_KV = tuple[tuple[torch.Tensor, torch.Tensor], ...]
"""Keys and values per layer, each ``(batch, kv_heads, positions, head_dim)``."""


class HFState:
    """A sequence read by an :class:`HFModel`: next-token logits and this sequence's own part of the KV cache.

    The logits are this state's own copy in the model's dtype (half the memory for bfloat16 weights, and
    no batch-sized array kept alive by one row): a tree search holds thousands of states.
    """

    __slots__ = ("_logits", "length", "own", "parent")

    def __init__(self, parent: HFState | None, length: int, logits: torch.Tensor, own: _KV):
        self.parent = parent
        self.length = length
        self._logits = logits
        self.own = own

    @property
    def logits(self) -> np.ndarray:
        """Next-token logits as a read-only float32 array."""
        out = self._logits.float().numpy()
        out.flags.writeable = False
        return out


class HFModel:
    """A ``transformers`` causal LM and its tokenizer as a grammask :class:`~grammask.models.protocol.TextModel`.

    ``eos_ids`` default: the generation config's and tokenizer's EOS ids plus the special tokens among
    :data:`grammask.vocab.WELL_KNOWN_EOS_TOKENS` (for SmolLM2: ``<|im_end|>`` and ``<|endoftext|>``).
    At least ``recent`` full caches are kept for fast extension, and twice the sequences of the last batch,
    so that batched searches (wide beams, :meth:`~grammask.decoding.strategy.Strategy.decode_many`) find theirs.
    The constructor raises :class:`~grammask.errors.ModelError` when no ``eos_ids`` are given and the model
    names none.
    """

    def __init__(self, model: Any, tokenizer: Any, *, eos_ids: Iterable[int] | None = None, recent: int = 16):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self._n_logits = int(model.get_output_embeddings().weight.shape[0])
        self._eos_ids = frozenset(eos_ids) if eos_ids is not None else self._default_eos_ids()
        self._recent: OrderedDict[HFState, _KV] = OrderedDict()
        self._recent_size = recent
        self._keep = recent
        self._vocab: Vocabulary | None = None
        # transformers 5.x renamed the cache argument and output field from past_key_values to cache
        # (the old name still works there, with a warning on every run)
        forward_args = inspect.signature(self.model.forward).parameters
        self._cache_name = "cache" if "cache" in forward_args else "past_key_values"

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs: Any) -> HFModel:
        """Loads a local model directory or GGUF file (see :func:`load_hf_model`, whose errors it raises)."""
        return load_hf_model(path, **kwargs)

    def _default_eos_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        for value in (getattr(self.model.generation_config, "eos_token_id", None), self.tokenizer.eos_token_id):
            if value is not None:
                ids.update([value] if isinstance(value, int) else value)
        for token_id, added in self.tokenizer.added_tokens_decoder.items():
            if added.special and added.content in WELL_KNOWN_EOS_TOKENS:
                ids.add(token_id)
        if not ids:
            raise ModelError("the model names no end-of-sequence token; pass eos_ids=[...] to HFModel")
        return frozenset(ids)

    # ---- TextModel ----------------------------------------------------------------------------

    @property
    def n_logits(self) -> int:
        return self._n_logits

    @property
    def eos_ids(self) -> frozenset[int]:
        return self._eos_ids

    @property
    def vocab(self) -> Vocabulary:
        """The tokenizer's vocabulary (built on first use); raises :class:`~grammask.errors.VocabularyError`
        when it cannot be read (see :meth:`~grammask.vocab.Vocabulary.from_hf`)."""
        if self._vocab is None:
            self._vocab = Vocabulary.from_hf(self.tokenizer, eos_ids=sorted(self._eos_ids), n_logits=self._n_logits)
        return self._vocab

    @property
    def context_window(self) -> int | None:
        config = self.model.config.get_text_config()
        for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
            value = getattr(config, name, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    def encode_prompt(self, prompt: str, *, chat: bool | None = None) -> list[int]:
        """Token ids of a user prompt, wrapped in the chat template when ``chat`` (None: if the model has one).

        Raises :class:`~grammask.errors.DecodingError` for ``chat=True`` on a model without a chat template,
        or a prompt that encodes to no tokens.
        """
        has_template = bool(getattr(self.tokenizer, "chat_template", None))
        if chat is None:
            chat = has_template
        if chat and not has_template:
            raise DecodingError(f"{self.name} has no chat template; generate without one")
        if chat:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
            )
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            ids = self.tokenizer(prompt)["input_ids"]
        if not ids:
            raise DecodingError("the prompt is empty and the tokenizer adds no start token; give some text")
        return list(ids)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    @property
    def name(self) -> str:
        return str(getattr(self.model, "name_or_path", "") or type(self.model).__name__)

    # ---- LanguageModel ------------------------------------------------------------------------

    def start(self, prompt_ids: Sequence[int]) -> HFState:
        ids = torch.tensor([list(prompt_ids)], dtype=torch.long, device=self.model.device)
        with torch.inference_mode():
            out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
        kv = _layers(getattr(out, self._cache_name))
        state = HFState(None, len(prompt_ids), _last_logits(out.logits)[0], kv)
        self._remember(state, kv)
        return state

    def extend(self, states: Sequence[HFState], token_ids: Sequence[int]) -> list[HFState]:
        """One forward pass for all states; shorter sequences are left-padded and the padding masked out."""
        self._keep = max(self._recent_size, 2 * len(states))
        fulls = [self._full_kv(s) for s in states]
        longest = max(s.length for s in states)
        pads = [longest - s.length for s in states]
        if len(fulls) == 1:
            layers = fulls[0]
        else:
            layers = tuple(
                (_stack([f[i][0] for f in fulls], pads), _stack([f[i][1] for f in fulls], pads))
                for i in range(len(fulls[0]))
            )
        device = self.model.device
        ids = torch.tensor([[t] for t in token_ids], dtype=torch.long, device=device)
        inputs = {}
        if any(pads):
            inputs["attention_mask"] = (
                torch.arange(longest + 1, device=device) >= torch.tensor(pads, device=device)[:, None]
            ).long()
            inputs["position_ids"] = torch.tensor([[s.length] for s in states], dtype=torch.long, device=device)
        with torch.inference_mode():
            inputs[self._cache_name] = _cache_of(layers)
            result = self.model(input_ids=ids, use_cache=True, **inputs)
        kv = _layers(getattr(result, self._cache_name))
        logits = _last_logits(result.logits)
        children = []
        for row, (parent, pad) in enumerate(zip(states, pads)):
            full = tuple((k[row : row + 1, :, pad:], v[row : row + 1, :, pad:]) for k, v in kv)
            own = tuple((k[:, :, -1:].clone(), v[:, :, -1:].clone()) for k, v in full)
            child = HFState(parent, parent.length + 1, logits[row], own)
            self._remember(child, full)
            children.append(child)
        return children

    def read(self, state: HFState, token_ids: Sequence[int]) -> HFState:
        """Append several tokens to one state in one forward pass; the new state holds their KV cache as its own."""
        full = self._full_kv(state)
        ids = torch.tensor([list(token_ids)], dtype=torch.long, device=self.model.device)
        with torch.inference_mode():
            result = self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **{self._cache_name: _cache_of(full)})
        kv = _layers(getattr(result, self._cache_name))
        own = tuple((k[:, :, -len(token_ids):].clone(), v[:, :, -len(token_ids):].clone()) for k, v in kv)
        child = HFState(state, state.length + len(token_ids), _last_logits(result.logits)[0], own)
        self._remember(child, kv)
        return child

    def _full_kv(self, state: HFState) -> _KV:
        """The whole KV cache of a state: a recent one, or rebuilt from its ancestors' own parts."""
        full = self._recent.get(state)
        if full is not None:
            self._recent.move_to_end(state)
            return full
        chain = []
        node: HFState | None = state
        base = None
        while node is not None:
            base = self._recent.get(node)
            if base is not None:
                break
            chain.append(node.own)
            node = node.parent
        parts = ([base] if base is not None else []) + chain[::-1]
        full = tuple(
            (torch.cat([p[i][0] for p in parts], dim=2), torch.cat([p[i][1] for p in parts], dim=2))
            for i in range(len(parts[0]))
        )
        self._remember(state, full)
        return full

    def _remember(self, state: HFState, full: _KV) -> None:
        self._recent[state] = full
        self._recent.move_to_end(state)
        while len(self._recent) > self._keep:
            self._recent.popitem(last=False)


def _stack(tensors: list[torch.Tensor], pads: list[int]) -> torch.Tensor:
    """Concatenate ``(1, heads, positions, dim)`` tensors along the batch, left-padding positions with zeros."""
    if not any(pads):
        return torch.cat(tensors)
    return torch.cat([torch.nn.functional.pad(t, (0, 0, pad, 0)) for t, pad in zip(tensors, pads)])


def _cache_of(layers: _KV) -> DynamicCache:
    """A cache holding ``layers`` without copying them (the forward pass appends by concatenation)."""
    cache = DynamicCache(ddp_cache_data=[(None, None)] * len(layers))
    for layer, (keys, values) in zip(cache.layers, layers):
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values
    return cache


def _layers(cache: Any) -> _KV:
    return tuple((layer.keys, layer.values) for layer in cache.layers)


def _last_logits(logits: torch.Tensor) -> list[torch.Tensor]:
    """Each row's logits at the last position, as separate CPU tensors in the model's dtype."""
    return [row.clone() for row in logits[:, -1, :].cpu()]


# ---- loading ----------------------------------------------------------------------------------


def load_hf_model(path: str | Path, *, dtype: torch.dtype = torch.float32, **kwargs: Any) -> HFModel:
    """An :class:`HFModel` from a local Hugging Face model directory or a GGUF file.

    A GGUF file is converted once to safetensors in the grammask cache (transformers needs ``gguf``
    and ``accelerate`` for that), so later loads are fast. Never downloads from a model hub.
    ``kwargs`` go to :class:`HFModel`. Raises :class:`~grammask.errors.ModelError` when there is no such
    model or it cannot be loaded.
    """
    source = Path(path).expanduser()
    if source.is_file() and source.suffix.lower() == ".gguf":
        source = converted_gguf(source)
    elif not source.exists():
        raise ModelError(f"no model at {path}: expected a Hugging Face model directory or a .gguf file")
    elif not (source.is_dir() and (source / "config.json").is_file()):
        raise ModelError(f"{path} is not a Hugging Face model directory (no config.json) nor a .gguf file")
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # loading takes about a second: no bar
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(source, local_files_only=True, dtype=dtype)
    except (OSError, ValueError, KeyError) as e:
        raise ModelError(f"cannot load the model in {source}: {e}") from None
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()
    return HFModel(model, tokenizer, **kwargs)
