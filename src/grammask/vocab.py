"""The model's vocabulary as exact bytes: what each token id stands for, and which ids end the sequence.

A token's bytes are read from the fields of its ``tokenizer.json``, never from the tokenizer's name:

* the model must be BPE (``model.type``); ``<0xNN>`` pieces are the raw byte NN when the model has
  ``byte_fallback`` or the decoder has a ``ByteFallback`` step;
* byte-level BPE (a ``ByteLevel`` decoder or pre-tokenizer, as in GPT-2, SmolLM2, Llama-3, Qwen) spells
  every byte as one character of the GPT-2 byte-to-unicode alphabet; a piece is mapped back byte by byte;
* otherwise a piece is text, after the decoder's string replacements (``Replace``, ``Metaspace``: the
  SentencePiece ``▁`` becomes a space). When the decoder has none, a normalizer ``Replace`` of spaces
  or a ``Metaspace`` pre-tokenizer names the space marker;
* decoder steps that act on the whole decoded text (``Fuse``; ``Strip``, which removes the space a
  ``Prepend`` normalizer put before the first word) are not part of any token's bytes;
* special added tokens (control tokens such as ``<s>``, ``<|im_end|>``) are not text: ``None``;
  non-special added tokens are their content, with the same space-marker replacement.
"""

from __future__ import annotations

import hashlib
import json
import operator
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tokenizers

from grammask.errors import TokenOutOfRangeError, VocabularyError

WELL_KNOWN_EOS_TOKENS: tuple[str, ...] = (
    "</s>",
    "<eos>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<end_of_turn>",
    "<|end|>",
)
"""End-of-sequence token strings; used, among the special tokens, when no config file names the EOS."""

_DECODER_STEPS = frozenset({"ByteLevel", "Replace", "ByteFallback", "Fuse", "Strip", "Metaspace"})
_NOT_A_BYTE = "\uffff"


def _byte_level_table() -> dict[int, int | str]:
    """``str.translate`` table from the GPT-2 byte-to-unicode alphabet to byte values (as code points < 256).

    Characters below 256 that are not in the alphabet map to a character >= 256, so that a piece holding
    one fails the latin-1 encoding and is taken as plain UTF-8 text, as the ``tokenizers`` decoder does.
    """
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    shifted = sorted(set(range(256)) - set(kept))
    table: dict[int, int | str] = {code: _NOT_A_BYTE for code in range(256)}
    table.update({byte: byte for byte in kept})
    table.update({256 + rank: byte for rank, byte in enumerate(shifted)})
    return table


_BYTE_LEVEL = _byte_level_table()
# Byte-fallback pieces, in the case the tokenizer writes them and the case its decoder also reads.
_BYTE_PIECES = {form.format(byte): bytes([byte]) for byte in range(256) for form in ("<0x{:02X}>", "<0x{:02x}>")}


@dataclass(frozen=True)
class _Spelling:
    """How a tokenizer spells token bytes as strings."""

    byte_level: bool
    byte_fallback: bool
    replacements: tuple[tuple[str, str], ...]

    def piece_bytes(self, piece: str) -> bytes:
        """The bytes of a piece of the model's vocabulary."""
        if self.byte_fallback and piece in _BYTE_PIECES:
            return _BYTE_PIECES[piece]
        if self.byte_level:
            try:
                return piece.translate(_BYTE_LEVEL).encode("latin-1")
            except UnicodeEncodeError:
                return piece.encode("utf-8")
        return self.text_bytes(piece)

    def text_bytes(self, text: str) -> bytes:
        """The bytes of a piece of text (an added token's content)."""
        for old, new in self.replacements:
            text = text.replace(old, new)
        return text.encode("utf-8")


@dataclass(frozen=True)
class _TokenizerFields:
    """The parts of a tokenizer that decide what each token id stands for, as tokenizer.json spells them."""

    model: Mapping[str, Any]
    normalizer: Mapping[str, Any] | None
    pre_tokenizer: Mapping[str, Any] | None
    decoder: Mapping[str, Any] | None
    pieces: Mapping[str, int]
    added: Sequence[tuple[int, str, bool]]

    @classmethod
    def from_json(cls, data: Any, source: str) -> _TokenizerFields:
        """Reads the parsed JSON of a tokenizer.json file."""
        model = data.get("model") if isinstance(data, dict) else None
        if not isinstance(model, dict) or not isinstance(data.get("added_tokens", []), list):
            raise VocabularyError(f"{source} is not a Hugging Face tokenizer.json file: it has no model section")
        model_type = model.get("type") or ("BPE" if "merges" in model else "unknown")
        pieces = model.get("vocab")
        try:
            added = [(int(t["id"]), str(t["content"]), bool(t.get("special"))) for t in data.get("added_tokens", [])]
        except (KeyError, TypeError, ValueError) as exc:
            raise VocabularyError(f"{source} is not a Hugging Face tokenizer.json file: bad added_tokens") from exc
        return cls(
            model={**model, "type": model_type},
            normalizer=data.get("normalizer"),
            pre_tokenizer=data.get("pre_tokenizer"),
            decoder=data.get("decoder"),
            pieces=pieces if isinstance(pieces, dict) else {},
            added=added,
        )

    @classmethod
    def from_backend(cls, tok: tokenizers.Tokenizer) -> _TokenizerFields:
        """Reads a ``tokenizers.Tokenizer`` object."""
        model = {
            field: getattr(tok.model, field, None)
            for field in ("byte_fallback", "continuing_subword_prefix", "end_of_word_suffix")
        }
        return cls(
            model={**model, "type": type(tok.model).__name__},
            normalizer=_state(tok.normalizer),
            pre_tokenizer=_state(tok.pre_tokenizer),
            decoder=_state(tok.decoder),
            pieces=tok.get_vocab(with_added_tokens=False),
            added=[(i, t.content, t.special) for i, t in tok.get_added_tokens_decoder().items()],
        )

    def token_id(self, content: str) -> int | None:
        """The id of the token spelled ``content`` (added tokens first, as the tokenizer matches them)."""
        for i, added, _ in self.added:
            if added == content:
                return i
        return self.pieces.get(content)


def _state(component: Any) -> dict | None:
    return None if component is None else json.loads(component.__getstate__())


def _steps(state: Mapping[str, Any] | None, key: str) -> list[Mapping[str, Any]]:
    """A tokenizer component's steps, ``Sequence`` steps flattened."""
    if state is None:
        return []
    if state.get("type") == "Sequence":
        return [step for child in state[key] for step in _steps(child, key)]
    return [state]


def _spelling(fields: _TokenizerFields, source: str) -> _Spelling:
    model = fields.model
    if model["type"] != "BPE":
        raise VocabularyError(
            f"{source}: tokenizer model type {model['type']!r} is not supported; grammask reads BPE tokenizers "
            "(byte-level or SentencePiece-style)"
        )
    for field in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(field):
            raise VocabularyError(
                f"{source}: BPE with {field}={model[field]!r} is not supported (its tokens are not plain byte strings)"
            )
    decoders = _steps(fields.decoder, "decoders")
    unsupported = sorted({step["type"] for step in decoders} - _DECODER_STEPS)
    if unsupported:
        raise VocabularyError(
            f"{source}: decoder step(s) {', '.join(unsupported)} not supported; supported: "
            f"{', '.join(sorted(_DECODER_STEPS))}"
        )
    pre_tokenizers = _steps(fields.pre_tokenizer, "pretokenizers")
    replacements = tuple(_replacement(step, source) for step in decoders if step["type"] in ("Replace", "Metaspace"))
    if not replacements:
        replacements = _space_marker(_steps(fields.normalizer, "normalizers"), pre_tokenizers)
    return _Spelling(
        byte_level=any(step["type"] == "ByteLevel" for step in decoders + pre_tokenizers),
        byte_fallback=bool(model.get("byte_fallback")) or any(step["type"] == "ByteFallback" for step in decoders),
        replacements=replacements,
    )


def _replacement(step: Mapping[str, Any], source: str) -> tuple[str, str]:
    if step["type"] == "Metaspace":
        return step.get("replacement", "\u2581"), " "
    pattern = step["pattern"]
    if "String" not in pattern:
        raise VocabularyError(f"{source}: decoder Replace with a regex pattern {pattern!r} is not supported")
    return pattern["String"], step["content"]


def _space_marker(
    normalizers: list[Mapping[str, Any]], pre_tokenizers: list[Mapping[str, Any]]
) -> tuple[tuple[str, str], ...]:
    """The character that stands for a space, when the normalizer or pre-tokenizer writes one."""
    for step in normalizers:
        if step["type"] == "Replace" and step["pattern"].get("String") == " " and step["content"]:
            return ((step["content"], " "),)
    for step in pre_tokenizers:
        if step["type"] == "Metaspace":
            return ((step.get("replacement", "\u2581"), " "),)
    return ()


def _load_tokenizer(path: Path) -> tokenizers.Tokenizer:
    try:
        return tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:  # the tokenizers library raises a bare Exception for malformed files
        raise VocabularyError(f"{path} cannot be loaded by the tokenizers library: {exc}") from exc


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise VocabularyError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise VocabularyError(f"{path} does not hold a JSON object")
    return data


def _ids_of(value: Any) -> list[int]:
    """EOS ids from a config value: an int, a list of ints, or nothing."""
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def _config_eos_ids(directory: Path, fields: _TokenizerFields) -> list[int]:
    """EOS ids named by ``tokenizer_config.json`` (``eos_token``) and ``generation_config.json`` (``eos_token_id``)."""
    ids: list[int] = []
    config_path = directory / "tokenizer_config.json"
    if config_path.is_file():
        eos = _read_json(config_path).get("eos_token")
        content = eos.get("content") if isinstance(eos, dict) else eos
        if content is not None:
            token_id = fields.token_id(content)
            if token_id is None:
                raise VocabularyError(f"{config_path} names eos_token {content!r}, which the tokenizer does not have")
            ids.append(token_id)
    generation_path = directory / "generation_config.json"
    if generation_path.is_file():
        ids.extend(_ids_of(_read_json(generation_path).get("eos_token_id")))
    return ids


def _well_known_eos_ids(fields: _TokenizerFields) -> list[int]:
    specials = {content: i for i, content, special in fields.added if special}
    return [specials[content] for content in WELL_KNOWN_EOS_TOKENS if content in specials]


def _generation_eos_ids(generation_config: Any) -> list[int]:
    if generation_config is None:
        return []
    if isinstance(generation_config, Mapping):
        return _ids_of(generation_config.get("eos_token_id"))
    return _ids_of(getattr(generation_config, "eos_token_id", None))


class Vocabulary:
    """The exact bytes of every token id of a model, its end-of-sequence ids, and the width of its logits.

    ``tokens[i]`` is the bytes token ``i`` decodes to, or ``None`` when it is not text (special tokens,
    unused ids, ids past the tokenizer up to ``n_logits``). ``len(tokens) == len(vocab) == n_logits``.
    Immutable once built.
    """

    __slots__ = ("_eos_ids", "_fingerprint", "_n_logits", "_name", "_special_ids", "_tokenizer", "_tokens")

    def __init__(
        self,
        tokens: Sequence[bytes | None],
        eos_ids: Iterable[int],
        *,
        n_logits: int | None = None,
        special_ids: Iterable[int] = (),
        name: str = "vocabulary",
        tokenizer: tokenizers.Tokenizer | str | Path | None = None,
    ):
        """Builds a vocabulary from token bytes.

        ``tokenizer`` (optional) is what :meth:`encode` uses: a ``tokenizers.Tokenizer``, or the path
        of a tokenizer.json file, loaded on first use.

        Text tokens are non-empty bytes. EOS ids are special ids; every special id must have a ``None`` token.
        Raises :class:`~grammask.errors.VocabularyError` when they are not: a token that is neither bytes nor
        ``None`` or is empty, ``n_logits`` below the number of tokens, no EOS id, or a special or EOS id out
        of range or spelling a text token.
        """
        for i, token in enumerate(tokens):
            if token is not None and not isinstance(token, bytes):
                raise VocabularyError(f"token {i} of {name} is {type(token).__name__}, expected bytes or None")
            if token == b"":
                raise VocabularyError(f"token {i} of {name} is empty; use None for an id that is not text")
        width = len(tokens) if n_logits is None else operator.index(n_logits)
        if width < len(tokens):
            raise VocabularyError(f"n_logits={width} is smaller than the {len(tokens)} tokens of {name}")
        eos = tuple(dict.fromkeys(operator.index(i) for i in eos_ids))
        if not eos:
            raise VocabularyError(f"{name} has no end-of-sequence token; pass eos_ids=[...]")
        padded = tuple(tokens) + (None,) * (width - len(tokens))
        special = frozenset(operator.index(i) for i in special_ids) | frozenset(eos)
        for i in sorted(special):
            if not 0 <= i < width:
                raise VocabularyError(f"special or EOS id {i} of {name} is outside [0, {width})")
            if padded[i] is not None:
                raise VocabularyError(f"special or EOS id {i} of {name} is the text token {padded[i]!r}")
        self._tokens = padded
        self._eos_ids = eos
        self._n_logits = width
        self._special_ids = special
        self._name = name
        self._tokenizer = Path(tokenizer) if isinstance(tokenizer, str) else tokenizer
        self._fingerprint: str | None = None

    @classmethod
    def from_tokenizer_json(
        cls,
        path: str | Path,
        *,
        eos_ids: Iterable[int] | None = None,
        n_logits: int | None = None,
        name: str | None = None,
    ) -> Vocabulary:
        """Reads a Hugging Face ``tokenizer.json`` (a file, or a directory holding one).

        EOS ids: ``eos_ids`` if given; else those named by ``tokenizer_config.json`` and
        ``generation_config.json`` next to the file; else the special tokens among
        :data:`WELL_KNOWN_EOS_TOKENS`. ``name`` defaults to the directory's name.

        Raises :class:`~grammask.errors.VocabularyError` for a missing or unreadable file, one that is not a
        tokenizer.json, a tokenizer that is not byte-level or SentencePiece-style BPE, an ``eos_token`` in
        ``tokenizer_config.json`` the tokenizer does not have, or no EOS token found.
        """
        path = Path(path)
        if path.is_dir():
            path = path / "tokenizer.json"
        if not path.is_file():
            raise VocabularyError(f"no tokenizer file at {path}")
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise VocabularyError(f"{path} is not a Hugging Face tokenizer.json file: {exc}") from exc
        fields = _TokenizerFields.from_json(data, str(path))
        if eos_ids is None:
            eos_ids = _config_eos_ids(path.parent, fields) or _well_known_eos_ids(fields)
        name = name or path.parent.name or path.stem
        return cls._from_fields(fields, eos_ids, (), n_logits, name, str(path), tokenizer=path)

    @classmethod
    def from_hf(
        cls,
        tokenizer: Any,
        *,
        eos_ids: Iterable[int] | None = None,
        n_logits: int | None = None,
        generation_config: Any = None,
    ) -> Vocabulary:
        """Reads a ``transformers`` fast tokenizer through its backend ``tokenizers.Tokenizer``.

        EOS ids: ``eos_ids`` if given; else ``tokenizer.eos_token_id`` plus the ``eos_token_id`` of
        ``generation_config`` (a ``GenerationConfig`` or a mapping); else the special tokens among
        :data:`WELL_KNOWN_EOS_TOKENS`. Pass the model's logits width as ``n_logits`` when it is wider.

        Raises :class:`~grammask.errors.VocabularyError` for a tokenizer with no ``tokenizers`` backend (a slow
        tokenizer), one that is not byte-level or SentencePiece-style BPE, or no EOS token found.
        """
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if not isinstance(backend, tokenizers.Tokenizer):
            raise VocabularyError(
                f"{type(tokenizer).__name__} has no tokenizers backend; load it with use_fast=True "
                "or use Vocabulary.from_tokenizer_json"
            )
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        fields = _TokenizerFields.from_backend(backend)
        if eos_ids is None:
            eos_ids = _ids_of(getattr(tokenizer, "eos_token_id", None)) + _generation_eos_ids(generation_config)
            eos_ids = eos_ids or _well_known_eos_ids(fields)
        special = getattr(tokenizer, "all_special_ids", ())
        return cls._from_fields(fields, eos_ids, special, n_logits, name, name, tokenizer=backend)

    @classmethod
    def _from_fields(
        cls,
        fields: _TokenizerFields,
        eos_ids: Iterable[int],
        special_ids: Iterable[int],
        n_logits: int | None,
        name: str,
        source: str,
        tokenizer: tokenizers.Tokenizer | Path,
    ) -> Vocabulary:
        spelling = _spelling(fields, source)
        size = max(max(fields.pieces.values(), default=-1), max((i for i, _, _ in fields.added), default=-1)) + 1
        tokens: list[bytes | None] = [None] * size
        for piece, i in fields.pieces.items():
            tokens[i] = spelling.piece_bytes(piece) or None
        eos = list(eos_ids)
        special = {*special_ids, *eos}
        for i, content, is_special in fields.added:
            if is_special:
                special.add(i)
            else:
                tokens[i] = spelling.text_bytes(content) or None
        for i in special:
            if 0 <= i < size:
                tokens[i] = None
        return cls(tokens, eos, n_logits=n_logits, special_ids=special, name=name, tokenizer=tokenizer)

    @property
    def tokens(self) -> tuple[bytes | None, ...]:
        """Token bytes by id; ``None`` where the id is not text. Length ``n_logits``."""
        return self._tokens

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Every end-of-sequence id, the primary one first."""
        return self._eos_ids

    @property
    def n_logits(self) -> int:
        """Width of the model's logits row; ids from the tokenizer's size up to it are never text."""
        return self._n_logits

    @property
    def special_ids(self) -> frozenset[int]:
        """Ids of control tokens (EOS included): never text."""
        return self._special_ids

    @property
    def name(self) -> str:
        """A label for messages and reports (the tokenizer's directory or model name)."""
        return self._name

    @property
    def tokenizer(self) -> tokenizers.Tokenizer | None:
        """The ``tokenizers.Tokenizer`` this vocabulary was read from (loaded on first use), if any.

        Raises :class:`~grammask.errors.VocabularyError` when the tokenizer file cannot be loaded.
        """
        if isinstance(self._tokenizer, Path):
            self._tokenizer = _load_tokenizer(self._tokenizer)
        return self._tokenizer

    def __len__(self) -> int:
        return self._n_logits

    def __repr__(self) -> str:
        return f"Vocabulary(name={self._name!r}, n_logits={self._n_logits}, eos_ids={self._eos_ids})"

    def fingerprint(self) -> str:
        """SHA-256 hex digest of the token bytes, EOS ids and ``n_logits``; equal across processes."""
        if self._fingerprint is None:
            digest = hashlib.sha256(b"grammask-vocabulary-2")
            digest.update(struct.pack("<qq", self._n_logits, len(self._eos_ids)))
            digest.update(struct.pack(f"<{len(self._eos_ids)}q", *sorted(self._eos_ids)))
            lengths = [-1 if token is None else len(token) for token in self._tokens]
            digest.update(struct.pack(f"<{len(lengths)}i", *lengths))
            digest.update(b"".join(token for token in self._tokens if token))
            self._fingerprint = digest.hexdigest()
        return self._fingerprint

    def decode(self, ids: Iterable[int]) -> bytes:
        """The bytes of a token sequence; tokens that are not text add nothing.

        Raises :class:`~grammask.errors.TokenOutOfRangeError` for an id outside ``[0, n_logits)``.
        """
        parts = []
        for i in ids:
            i = operator.index(i)
            if not 0 <= i < self._n_logits:
                raise TokenOutOfRangeError(
                    f"token id {i} is outside the vocabulary of {self._name}: [0, {self._n_logits})"
                )
            token = self._tokens[i]
            if token is not None:
                parts.append(token)
        return b"".join(parts)

    def encode(self, text: str) -> list[int]:
        """The tokenizer's own token ids for ``text``, without special tokens.

        A SentencePiece-style tokenizer with a ``Prepend`` normalizer puts a space before the text, so
        the ids decode to ``b" " + text``.

        Raises :class:`~grammask.errors.VocabularyError` when the vocabulary has no tokenizer (built from a
        token list) or its tokenizer file cannot be loaded.
        """
        tokenizer = self.tokenizer
        if tokenizer is None:
            raise VocabularyError(
                f"{self._name} was built from a token list and has no tokenizer to encode with; "
                "build it with Vocabulary.from_tokenizer_json or Vocabulary.from_hf"
            )
        return tokenizer.encode(text, add_special_tokens=False).ids
