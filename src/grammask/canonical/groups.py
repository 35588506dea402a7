"""Per-token tables that let ``CanonicalRelation.allowed`` decide a whole vocabulary at once.

Whether a next token ``t`` keeps a sequence canonical depends on ``t`` in two ways: through its text,
which decides where the pre-tokenizer cuts (added tokens, UTF-8, NFC, the cut regex), and through its
id, which decides whether BPE keeps it whole and apart from the token before it in its pre-token. The
first only depends on the *shape* of the text: the pre-tokenizer's character classes, with letters
that cannot be part of a contraction (``'s``, ``'re``, ...) read as plain letters and runs of three or
more equal classes (except digits, which the cut regexes count) shortened to two. Tokens of one shape
are decided by checking one of them with its own id left open (``relation._check`` with ``alts``), then
the id conditions for all of them at once (:func:`pairs_kept_after`, :attr:`TokenGroups.whole`).

Tokens where the shape is not enough are checked one by one: text that is no complete UTF-8 (byte
fallback pieces, fragments of a character), text that contains an added token, for an NFC normalizer
text that is not NFC or starts with a character that can compose with the one before it, and, after
text that ends inside an added token, the tokens whose text starts with its rest. (For a byte-level
tokenizer that splits, without NFC or added tokens, the fragments that start a character are grouped
after all, by the shape of their whole characters and the classes of the character they begin:
``CanonicalRelation._decide_partials``.)
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numba as nb
import numpy as np

from grammask.canonical.model import BYTE_TO_CHAR, BpeModel
from grammask.canonical.pairs import NO_MERGE, PairTable
from grammask.canonical.pretokens import CharClasses, Segmenter

_LONG_RUN = re.compile(r"([^1])\1\1+")
_REMEMBERED_ROWS = 2048  # kept_after rows remembered (bit-packed: 16 KB each for Llama-3)


def shape(text: str, classes: CharClasses) -> str:
    """The pre-tokenizer shape of a token's text (see the module docstring) under ``classes``."""
    return _LONG_RUN.sub(r"\1\1", classes.class_string(text, open_start=True))


@cache
def _second_in_composition() -> frozenset[str]:
    """Characters NFC may compose with the character before them (second of a canonical pair, Hangul V and T)."""
    found = {chr(c) for c in range(0x1161, 0x1176)} | {chr(c) for c in range(0x11A8, 0x11C3)}
    for code in range(0x110000):
        parts = unicodedata.decomposition(chr(code)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            found.add(chr(int(parts[1], 16)))
    return frozenset(found)


@dataclass(frozen=True)
class ShapeTable:
    """The per-token arrays :class:`TokenGroups` reads, built once per vocabulary (and cached with the relation).

    ``shape_ids[shape_ptr[k]:shape_ptr[k+1]]``: the ids of shape ``k``, ascending; ``single``: ids checked one by
    one, ``single_goes_on``: whether each starts inside a character; ``text_ids``: the shape tokens' ids in the order
    of their texts; ``m_start``, ``m_right``, ``m_rank``: the merges as CSR by left symbol (:func:`_merge_index`);
    ``own_piece`` (``ignore_merges`` only, else empty): the id of the piece the token's text is, or -1.
    """

    shape_ptr: np.ndarray
    shape_ids: np.ndarray
    single: np.ndarray
    single_goes_on: np.ndarray
    text_ids: np.ndarray
    m_start: np.ndarray
    m_right: np.ndarray
    m_rank: np.ndarray
    own_piece: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays by field name (for the disk cache)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def build_shape_table(tokens: Sequence[bytes | None], model: BpeModel, segmenter: Segmenter,
                      byte_tokens: Mapping[int, int]) -> ShapeTable:
    """Groups the vocabulary by shape and indexes the merges (the work of :class:`TokenGroups` done once)."""
    contents = sorted(segmenter.added, key=len, reverse=True)
    has_added = re.compile("|".join(map(re.escape, contents))).search if contents else None
    texts: list[tuple[str, int]] = []
    composing = _second_in_composition() if segmenter.nfc else frozenset()
    by_shape: dict[str, list[int]] = {}
    single = []
    for t, data in enumerate(tokens):
        if data is None:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        if (not text or t in byte_tokens or (has_added and has_added(text))
                or (segmenter.nfc and (text[0] in composing or unicodedata.combining(text[0])
                                       or not unicodedata.is_normalized("NFC", text)))):
            single.append(t)
        else:
            by_shape.setdefault(shape(text, segmenter.classes), []).append(t)
            texts.append((text, t))
    texts.sort()
    n = len(tokens)
    m_start, m_right, m_rank = _merge_index(model.merges, max(n, 1 + max((max(k) for k in model.merges), default=0)))
    own_piece = np.zeros(0, dtype=np.int32)
    if model.ignore_merges:
        own_piece = np.array([-1 if data is None else model.pieces.get(_chars(data), -1) for data in tokens],
                             dtype=np.int32)
    members = list(by_shape.values())
    return ShapeTable(
        shape_ptr=np.cumsum([0] + [len(ids) for ids in members]).astype(np.int64),
        shape_ids=np.array([t for ids in members for t in ids], dtype=np.int32),
        single=np.array(single, dtype=np.int32),
        single_goes_on=np.array([0x80 <= tokens[t][0] < 0xC0 for t in single], dtype=bool),
        text_ids=np.array([t for _, t in texts], dtype=np.int32),
        m_start=m_start,
        m_right=m_right,
        m_rank=m_rank,
        own_piece=own_piece,
    )


def _chars(data: bytes) -> str:
    """A token's bytes in the GPT-2 alphabet (how a byte-level model names its piece)."""
    return "".join(BYTE_TO_CHAR[b] for b in data)


class TokenGroups:
    """The vocabulary grouped by shape, the tokens checked one by one, and the per-id arrays.

    ``members[k]``: ids of shape ``k`` (its first one is checked for all); ``single``: ids checked one by one,
    ``single_goes_on``: whether each starts inside a character (the only ones that may follow text that does);
    ``whole``: whether BPE keeps the token itself; ``own_piece`` (``ignore_merges`` only): whether the token's
    text is a piece whose id is the token (-1 where the text is no piece).
    """

    def __init__(self, tokens: Sequence[bytes | None], model: BpeModel, pairs: PairTable, segmenter: Segmenter,
                 table: ShapeTable):
        contents = sorted(segmenter.added, key=len, reverse=True)
        self._rest_after: dict[str, list[str]] = {}
        for c in contents:
            for k in range(1, len(c)):
                self._rest_after.setdefault(c[:k], []).append(c[k:])
        self._longest = max(map(len, self._rest_after), default=0)
        self._tokens = tokens
        self._model = model
        self._table = table
        self.members = np.split(table.shape_ids, table.shape_ptr[1:-1])
        self.single = table.single
        self.single_goes_on = table.single_goes_on
        self.n = len(tokens)
        self.whole = np.zeros(self.n, dtype=bool)
        self.whole[: len(pairs.whole)] = pairs.whole[: self.n]
        self._pairs = pairs
        self._kept: OrderedDict[int, np.ndarray] = OrderedDict()
        self._extensions: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._merges = (table.m_start, table.m_right, table.m_rank)
        self.own_piece = table.own_piece if model.ignore_merges else None
        self._texts: list[str] | None = None  # the shape tokens' texts, sorted (built on first use)
        self._pieces: list[str] = []  # ignore_merges: the model's pieces, sorted, and the ids by their
        self._by_chars: dict[str, list[int]] = {}  # GPT-2 alphabet text (built on first use)

    def completing_added(self, text: str) -> list[int]:
        """Ids of shape tokens whose text starts with the rest of an added token that ``text`` ends inside of
        (the shape misses that match: they are checked one by one)."""
        out: list[int] = []
        for k in range(1, min(len(text), self._longest) + 1):
            for rest in self._rest_after.get(text[-k:], ()):
                if self._texts is None:
                    self._texts = [self._tokens[t].decode("utf-8") for t in self._table.text_ids.tolist()]
                i = bisect.bisect_left(self._texts, rest)
                while i < len(self._texts) and self._texts[i].startswith(rest):
                    out.append(int(self._table.text_ids[i]))
                    i += 1
        return out

    def kept_after(self, token: int) -> np.ndarray:
        """Per id: whether BPE keeps whole token ``token`` and that id apart (False for ids that are not whole).

        A new array each call; the last :data:`_REMEMBERED_ROWS` tokens asked are remembered (bit-packed).
        """
        packed = self._kept.get(token)
        if packed is not None:
            self._kept.move_to_end(token)
            return np.unpackbits(packed, count=self.n).view(bool)
        p = self._pairs
        r0, r1 = p.right_start[token], p.right_start[token + 1]
        out = np.zeros(self.n, dtype=bool)
        pairs_kept_after(p.right_sym[r0:r1], p.right_next[r0:r1], *self._merges,
                         p.left_start, p.left_sym, p.left_next, out)
        self._kept[token] = np.packbits(out)
        if len(self._kept) > _REMEMBERED_ROWS:
            self._kept.popitem(last=False)
        return out

    def piece_extensions(self, data: bytes) -> np.ndarray:
        """Ids ``u`` such that ``data`` followed by ``u``'s bytes is a piece (byte-level, ``ignore_merges``); the last
        :data:`_REMEMBERED_ROWS` asked are remembered."""
        found = self._extensions.get(data)
        if found is None:
            found = self._extensions[data] = np.array(self._find_extensions(data), dtype=np.int64)
            if len(self._extensions) > _REMEMBERED_ROWS:
                self._extensions.popitem(last=False)
        else:
            self._extensions.move_to_end(data)
        return found

    def _find_extensions(self, data: bytes) -> list[int]:
        """:meth:`piece_extensions`, not remembered."""
        if not self._pieces:
            self._pieces = sorted(self._model.pieces)
            for t, token in enumerate(self._tokens):
                if token is not None:
                    self._by_chars.setdefault(_chars(token), []).append(t)
        prefix = _chars(data)
        out = []
        for piece in self._pieces[bisect.bisect_left(self._pieces, prefix):]:
            if not piece.startswith(prefix):
                break
            out.extend(self._by_chars.get(piece[len(prefix):], ()))
        return out


def _merge_index(merges: Mapping[tuple[int, int], tuple[int, int]], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The merges as CSR by left symbol: ``start`` (n + 1), right symbols sorted within a row, ranks."""
    keys = np.array(list(merges), dtype=np.int64).reshape(-1, 2)
    ranks = np.array([r for r, _ in merges.values()], dtype=np.int64)
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    keys, ranks = keys[order], ranks[order]
    start = np.zeros(n + 1, dtype=np.int64)
    np.add.at(start, keys[:, 0] + 1, 1)
    return np.cumsum(start), keys[:, 1].astype(np.int32), ranks


@nb.njit(cache=True)
def _cross_rank(m_start, m_right, m_rank, left, right):
    """The rank of the merge ``(left, right)``, or -1."""
    lo, hi = m_start[left], m_start[left + 1]
    while lo < hi:
        mid = (lo + hi) // 2
        if m_right[mid] < right:
            lo = mid + 1
        else:
            hi = mid
    if lo < m_start[left + 1] and m_right[lo] == right:
        return m_rank[lo]
    return -1


@nb.njit(cache=True)
def pairs_kept_after(r_sym, r_next, m_start, m_right, m_rank, left_start, left_sym, left_next, out):
    """``out[t]``: ``pairs.pair_kept`` of a left token's right-edge stages (``r_sym``, ``r_next``) and ``t``'s left ones.

    Ids without stages (not whole) stay False.
    """
    no_merge = NO_MERGE
    nk = len(r_sym) - 1
    for t in range(len(out)):
        l0, l1 = left_start[t], left_start[t + 1]
        if l0 == l1:
            continue
        k, l = 0, l0
        kept = True
        while True:
            left_key = 3 * np.int64(r_next[k]) if r_next[k] != no_merge else np.int64(no_merge)
            right_key = 3 * np.int64(left_next[l]) + 2 if left_next[l] != no_merge else np.int64(no_merge)
            cross = _cross_rank(m_start, m_right, m_rank, r_sym[k], left_sym[l])
            if cross >= 0 and 3 * cross + 1 < min(left_key, right_key):
                kept = False
                break
            if k == nk and l == l1 - 1:
                break
            if left_key < right_key:
                k += 1
            else:
                l += 1
        out[t] = kept
