"""Strings, re-segmentations and a tokenizer-backed oracle for the canonical relation's tests.

Strings (fixed seed): sentences of the built-in JSON and C grammars, random Unicode, white-space runs,
digit strings and lines of CPython's standard library. A re-segmentation splits one token of a
string's own encoding into two tokens whose bytes concatenate to it. The oracle is the tokenizer's
``encode`` (no special tokens): a prefix is extendable when ``encode(text + s)`` starts with it for
some continuation ``s`` among the rest of the string and a fixed set of short continuations.
"""

from __future__ import annotations

import functools
import os
import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import grammask as gm
from grammask.sampler import SentenceSampler
from grammask.vocab import Vocabulary

_UNICODE_RANGES = [
    (0x20, 0x7E), (0xA0, 0x17F), (0x300, 0x36F), (0x391, 0x3C9), (0x400, 0x44F), (0x5D0, 0x5EA),
    (0x600, 0x64A), (0x900, 0x97F), (0x2000, 0x206F), (0x3000, 0x303F), (0x3040, 0x30FF),
    (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x1F300, 0x1F64F), (0x1D400, 0x1D4FF), (0x10000, 0x1007F),
    (0x1DF00, 0x1DFFF), (0x18D00, 0x18DFF),  # letters of Unicode 14-17: the tokenizers' regex engine reads some as unassigned
]
_WHITESPACE = [" ", " ", " ", "\n", "\n", "\t", "\r\n", "\u00a0", "\u3000"]
_WORDS = ["x", "foo", "Bar", "it's", "we'll", "42", "(", ")", ":", "'", "-", "é", "日本", "!", "\\"]
_CONTINUATION_CHARS = (" ", "\n", "\r", "\t", "'", "!", "1", "b", "a", "x", "s", "t", "r", "e", "v", "m", "l", "d",
                       "S", "T", "E", "L", "é", "日", "\u00a0", "0", "<", "\u0301")
CONTINUATIONS: tuple[str, ...] = (
    "",
    *_CONTINUATION_CHARS,
    *(a + b for a in " \n\r\t'<" for b in _CONTINUATION_CHARS),
    "  \n", " \n ", "\n\n\n", "   x", "'re", "'ll", "'ve", "123", "1234", "\t\tx",
)


def _code_lines() -> list[str]:
    lib = Path(os.__file__).parent
    lines: list[str] = []
    for path in sorted(lib.glob("*.py"))[:60]:
        try:
            lines.extend(line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
        except (OSError, UnicodeDecodeError):
            continue
    return lines


def sample_strings(n: int, seed: int = 0) -> list[str]:
    """``n`` strings of the five kinds, in a fixed order for ``seed``."""
    rng = random.Random(seed)
    samplers = [SentenceSampler(gm.Grammar.builtin(name), max_depth=8) for name in ("json", "c")]
    code = _code_lines()
    out: list[str] = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            text = samplers[i // 5 % 2].sample(rng)[:200]
        elif kind == 1:
            text = "".join(chr(rng.randint(*rng.choice(_UNICODE_RANGES))) for _ in range(rng.randint(1, 30)))
        elif kind == 2:
            text = "".join(
                rng.choice(_WHITESPACE) * rng.randint(1, 6) if rng.random() < 0.6 else rng.choice(_WORDS)
                for _ in range(rng.randint(1, 10))
            )
        elif kind == 3:
            text = "".join(
                str(rng.randint(0, 10 ** rng.randint(1, 12))) + rng.choice(["", " ", ".", ",", "\n", "e", "-", "x"])
                for _ in range(rng.randint(1, 5))
            )
        else:
            start = rng.randrange(len(code))
            text = "\n".join(code[start : start + rng.randint(1, 3)])
        out.append(text)
    return out


_AFTER_COMPLETION = tuple(c.encode() for c in ("", " ", "\n", "1", "!", "a", "s", "T"))


def _completions(data: bytes) -> list[bytes]:
    """Byte strings that complete the incomplete character ``data`` ends with (all when one byte is missing, else
    256), alone or followed by a space, a line break, a digit, a punctuation mark or a letter (the relation's
    own witness covers the rarer cases)."""
    for back in range(1, min(3, len(data)) + 1):
        lead = data[-back]
        if lead >= 0xC0:
            length = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
            missing = length - back
            if missing <= 0:
                return []
            tails = range(64) if missing == 1 else random.Random(lead).sample(range(64**missing), 256)
            ends = [bytes(0x80 | (t >> (6 * k)) & 0x3F for k in reversed(range(missing))) for t in tails]
            return [end + more for end in ends for more in _AFTER_COMPLETION]
        if lead < 0x80:
            return []
    return []


class Oracle:
    """The tokenizer's own encoding, as a judge of token sequences."""

    def __init__(self, vocab: Vocabulary):
        self.vocab = vocab
        self.tokenizer = vocab.tokenizer
        self.prepend = vocab.decode(vocab.encode("a")) == b" a"
        self.by_bytes: dict[bytes, list[int]] = defaultdict(list)
        for i, token in enumerate(vocab.tokens):
            if token is not None:
                self.by_bytes[token].append(i)

    def encoding(self, text: str) -> list[int] | None:
        """The tokenizer's encoding of ``text``, when it decodes back to ``text`` (else None)."""
        ids = self.vocab.encode(text)
        expected = (b" " if self.prepend and text else b"") + text.encode("utf-8")
        return ids if self.vocab.decode(ids) == expected else None

    def extendable(self, ids: Sequence[int], rest: bytes = b"") -> bool:
        """Whether ``encode(text(ids) + s)`` starts with ``ids`` for some tried continuation ``s``.

        Tried in turn: the rest of the string and nothing; the fixed continuations; completions of an
        incomplete last character.
        """
        data = self.vocab.decode(ids)
        if self.prepend and ids:
            if not data.startswith(b" "):
                return False
            data = data[1:]
        n, want = len(ids), list(ids)
        stages = ((rest, b""), tuple(c.encode() for c in CONTINUATIONS), _completions(data))
        for tries in stages:
            texts = []
            for more in tries:
                try:
                    texts.append((data + more).decode("utf-8"))
                except UnicodeDecodeError:
                    continue
            if any(e.ids[:n] == want for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)):
                return True
        return False

    def confirms(self, ids: Sequence[int]) -> bool:
        """Whether ``ids`` is the tokenizer's own encoding of its text."""
        data = self.vocab.decode(ids)
        if self.prepend and ids:
            if not data.startswith(b" "):
                return False
            data = data[1:]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return self.vocab.encode(text) == list(ids)

    def resegment(self, ids: Sequence[int], rng: random.Random, count: int = 2) -> list[tuple[list[int], int]]:
        """Up to ``count`` different ways of splitting one token of ``ids`` into two tokens spelling the same bytes.

        Each is the new sequence and the position split.
        """
        options = []
        for pos, t in enumerate(ids):
            token = self.vocab.tokens[t]
            for k in range(1, len(token)):
                if token[:k] in self.by_bytes and token[k:] in self.by_bytes:
                    options.append((pos, k))
        out = []
        for pos, k in rng.sample(options, min(count, len(options))):
            token = self.vocab.tokens[ids[pos]]
            left, right = rng.choice(self.by_bytes[token[:k]]), rng.choice(self.by_bytes[token[k:]])
            out.append(([*ids[:pos], left, right, *ids[pos + 1 :]], pos))
        return out


def relation_witness(relation, vocab: Vocabulary, ids: Sequence[int], depth: int = 3) -> list[int] | None:
    """Tokens after ``ids`` that the relation takes to a state where the sequence may end (None if none found)."""
    state = relation.start_state()
    for t in ids:
        state = relation.step(state, t)
        if state < 0:
            return None
    order = _by_length(vocab)
    return _witness_from(relation, vocab, state, vocab.decode(ids), order, depth)


@functools.cache
def _by_length(vocab: Vocabulary) -> tuple[list[int], list[int]]:
    """Text tokens by length: all, and those that start with a UTF-8 continuation byte."""
    order = sorted((i for i, t in enumerate(vocab.tokens) if t is not None), key=lambda i: len(vocab.tokens[i]))
    return order, [i for i in order if 0x80 <= vocab.tokens[i][0] < 0xC0]


def _witness_from(relation, vocab, state, data: bytes, order, depth: int) -> list[int] | None:
    if relation.can_end(state):
        return []
    if depth == 0:
        return None
    try:
        data.decode("utf-8")
        candidates = order[0]
    except UnicodeDecodeError:
        candidates = order[1]
    for t in candidates:
        after = relation.step(state, t)
        if after >= 0:
            rest = _witness_from(relation, vocab, after, data + vocab.tokens[t], order, depth - 1)
            if rest is not None:
                return [t, *rest]
    return None
