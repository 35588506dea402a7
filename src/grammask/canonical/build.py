"""Building a :class:`CanonicalRelation` from a vocabulary's tokenizer, once, and caching its tables on disk."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from grammask.cache import DiskCache
from grammask.canonical.groups import ShapeTable, build_shape_table
from grammask.canonical.model import BpeModel
from grammask.canonical.pairs import PairTable, build_pair_table
from grammask.canonical.pretokens import CharClasses, Segmenter
from grammask.canonical.relation import CanonicalRelation
from grammask.errors import CanonicalError, VocabularyError
from grammask.fetch import cache_dir
from grammask.vocab import Vocabulary

_FORMAT = "canonical-3"  # 2: the shape table (groups.ShapeTable) is cached with the pair table; 3: the character
# classes asked of the tokenizer (pretokens.CharClasses), which the shapes follow

def build_relation(vocab: Vocabulary, cache: bool | str | Path = True) -> CanonicalRelation:
    """The canonical successor relation of ``vocab``'s tokenizer.

    ``cache``: True for the user cache folder (``cache_dir("canonical")``), a folder, or False for none.
    The per-token tables (pairs and shapes) are cached under a key made of ``vocab.fingerprint()`` and the tokenizer's model,
    normalizer, pre-tokenizer and added tokens. ``build_seconds`` and ``from_cache`` on the result say
    what it cost.

    Raises :class:`~grammask.errors.VocabularyError` when ``vocab`` has no tokenizer, and
    :class:`~grammask.errors.CanonicalError` when its tokenizer is not one the relation models exactly.
    """
    began = time.perf_counter()
    tokenizer = vocab.tokenizer
    if tokenizer is None:
        raise VocabularyError(f"{vocab.name} was built from a token list; the canonical relation needs its tokenizer")
    data = json.loads(tokenizer.to_str())
    byte_level = _is_byte_level(data)
    model = BpeModel.from_json(data, byte_level)
    added = {t["content"]: int(t["id"]) for t in data.get("added_tokens", []) if not t.get("special")}
    if byte_level and model.byte_fallback:
        raise CanonicalError("byte-level BPE with byte fallback is not supported")
    if byte_level and data.get("normalizer") and data["normalizer"].get("type") != "NFC":
        raise CanonicalError("byte-level BPE with a normalizer other than NFC is not supported")
    folder = None if cache is False else cache_dir("canonical") if cache is True else Path(cache)
    classes, _ = DiskCache(folder).get_or_build(
        _key(vocab, data),
        "canonical-classes",
        lambda: Segmenter(data, tokenizer, added).classes,
        lambda classes: ({"table": classes.table}, {}),
        lambda arrays, _: CharClasses(arrays["table"]),
    )
    segmenter = Segmenter(data, tokenizer, added, classes)
    byte_tokens = {i: b for b, i in enumerate(model.byte_pieces) if i >= 0}
    (pairs, shapes), from_cache = DiskCache(folder).get_or_build(
        _key(vocab, data),
        "canonical",
        lambda: (build_pair_table(model, _symbols(model, len(vocab.tokens))),
                 build_shape_table(vocab.tokens, model, segmenter, byte_tokens)),
        lambda tables: ({**tables[0].arrays(), **{f"shape.{k}": v for k, v in tables[1].arrays().items()}}, {}),
        lambda arrays, _: (PairTable(**{name: arrays[name] for name in PairTable.__dataclass_fields__}),
                           ShapeTable(**{name: arrays[f"shape.{name}"] for name in ShapeTable.__dataclass_fields__})),
    )
    return CanonicalRelation(vocab.tokens, model, pairs, shapes, segmenter, time.perf_counter() - began, from_cache)

def _is_byte_level(data: dict) -> bool:
    def types(component: dict | None, key: str) -> list[str]:
        if component is None:
            return []
        if component.get("type") == "Sequence":
            return [t for child in component[key] for t in types(child, key)]
        return [component["type"]]

    return "ByteLevel" in types(data.get("pre_tokenizer"), "pretokenizers") + types(data.get("decoder"), "decoders")

def _symbols(model: BpeModel, n: int) -> list[list[int] | None]:
    """Every token id's initial symbols (its own id for a ``<0xNN>`` piece); None for ids that are no model piece."""
    out: list[list[int] | None] = [None] * n
    byte_ids = {i for i in model.byte_pieces if i >= 0}
    for piece, i in model.pieces.items():
        if i < n:
            out[i] = [i] if i in byte_ids else model.symbols(piece)
    return out

def _key(vocab: Vocabulary, data: dict) -> str:
    digest = hashlib.sha256(f"{_FORMAT}:{vocab.fingerprint()}".encode())
    for field in ("model", "normalizer", "pre_tokenizer", "added_tokens"):
        digest.update(json.dumps(data.get(field), sort_keys=True).encode())
    return digest.hexdigest()

__all__ = ["build_relation"]
