"""Where a tokenizer cuts text before BPE: its added tokens, its normalizer's space marker, its pre-tokenizer.

Supported, read from tokenizer.json (anything else raises :class:`~grammask.errors.CanonicalError`):

* normalizer: none; ``NFC``; SentencePiece's ``Replace(" ", "▁")``, optionally after ``Prepend("▁")``;
* pre-tokenizer: none; ``Split(" ")`` after that ``Replace`` (it never finds a space); the GPT-2 split
  (``ByteLevel`` with ``use_regex``, optionally after ``Digits(individual_digits)``); ``Split`` with
  the Llama-3 or Qwen2/3 regex (``Isolated``) before a ``ByteLevel`` without regex;
* non-special added tokens, matched in the raw text leftmost-longest before anything else.

The supported regexes test a character only for membership in a few classes (space, CR, LF, other
white space, apostrophe, the letters of the English contractions, other letters, numbers, the rest), so
the pre-tokenizer's cuts are computed on a string of one representative per class, with the
tokenizer's own pre-tokenizer, and memoised by that string (:meth:`CharClasses.class_string`: the contraction
letters are told apart only right after an apostrophe). Which class a character is in is asked of the tokenizer's
own pre-tokenizer too (:class:`CharClasses`): its regex engine's Unicode tables are not Python's. Cuts near the end of a text depend on
what follows: every continuation of up to two classes is tried (and more only ever extends a white-space
run, which a two-class continuation already shows). A run of four or more equal classes the regexes do not count
(white space, letters, the rest; not digits, apostrophes or contraction letters) is cut only at its ends or one
character inside them, so the cuts are computed and memoised on the class string with such runs cut to three
characters (:func:`squeeze`), then moved back: a long word or white-space run costs what a short one does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np
import regex
import tokenizers

from grammask.errors import CanonicalError

GPT2_REGEX = "GPT-2"
_KNOWN_SPLIT_REGEXES = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "Llama-3",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "Qwen2",
}
_CONTRACTION_LETTERS = "strevmldSTREVMLD"
_REPRESENTATIVES = (" ", "\n", "\t", "'", "!", "1", "b")
# The ways a text may go on, as far as the split regexes can tell them apart. Every supported split names CR
# only beside LF (``[\r\n]``, ``\s``), so LF stands for both; a contraction letter differs from ``b`` only right
# after an apostrophe, so it is asked after one, and alone only where the text ends near one.
_CONTINUATIONS = (
    "",
    *_REPRESENTATIVES,
    *(first + second for first in " \n\t" for second in _REPRESENTATIVES),
    *("'" + second for second in (*_REPRESENTATIVES, *_CONTRACTION_LETTERS)),
)
_NEAR_APOSTROPHE = (*_CONTINUATIONS, *_CONTRACTION_LETTERS)
_CLASSES = "\t b1!"
_PROBES = ("b", "1", " ", "!")
"""Each code point ``c`` is classed by where the pre-tokenizer cuts ``probe + c``: the four split regexes cut
differently after these for each class (letters join ``b``, numbers cut after a space, spaces cut after ``!``,
and ``1`` tells numbers from spaces under the GPT-2 split)."""
_PROBE_BLOCK = 65536


class CharClasses:
    """The class of every code point (a representative: ``\t`` white space, ``b`` letter, ``1`` number, ``!`` the
    rest) as a tokenizer's split regex reads it, and the class strings of texts.

    The regex engine of ``tokenizers`` (Oniguruma) has older Unicode tables than Python's ``regex`` module
    (U+1DF54 is a letter to one and unassigned to the other), so a tokenizer that splits gets its classes by
    asking its own pre-tokenizer (:meth:`probed`).
    """

    def __init__(self, table: np.ndarray):
        """``table[c]``: the index into ``"\\t b1!"`` of code point ``c``'s class (5 for surrogates)."""
        self.table = table
        self._by_code = _ClassByCode(table)
        self._partial_memo: dict[bytes, frozenset[str]] = {}

    @classmethod
    def of_unicode(cls) -> CharClasses:
        """The classes of Python's ``regex`` module (``\\s``, ``\\p{L}``, ``\\p{N}``)."""
        return cls(_unicode_table())

    @classmethod
    def probed(cls, pre_tokenizer: Any) -> CharClasses:
        """The classes ``pre_tokenizer`` (a ``tokenizers`` pre-tokenizer with a supported split) gives: each code
        point assigned in the ``regex`` module's tables is classed by how the pre-tokenizer cuts it after each of
        :data:`_PROBES`, as one of the classes' representatives is cut (an unassigned or private-use code point is
        the rest to every Unicode version). Raises :class:`~grammask.errors.CanonicalError` where the split does not
        tell the four classes apart, or cuts a code point as none of them."""
        table = _unicode_table().copy()
        asked = np.flatnonzero(_assigned_table())
        reps = "\tb1!"
        codes = np.concatenate([asked, [ord(rep) for rep in reps]])
        signature = sum(_cut_after(pre_tokenizer, probe, codes).astype(np.int64) << k for k, probe in enumerate(_PROBES))
        if len(set(signature[-len(reps):].tolist())) < len(reps):
            raise CanonicalError("the pre-tokenizer's split does not tell white space, letters, numbers and the rest "
                                 "apart as the supported splits do")
        by_signature = np.full(1 << len(_PROBES), 255, dtype=np.uint8)
        by_signature[signature[-len(reps):]] = [_CLASSES.index(rep) for rep in reps]
        codes = by_signature[signature[: -len(reps)]]
        if (codes == 255).any():
            first = int(asked[np.argmax(codes == 255)])
            raise CanonicalError(f"the pre-tokenizer cuts U+{first:04X} as no class of the supported splits")
        table[asked] = codes
        return cls(table)

    def char_class(self, ch: str) -> str:
        """The representative of ``ch``'s class: itself for space, CR, LF, apostrophe and contraction letters."""
        return self._by_code[ord(ch)]

    def class_string(self, text: str, open_start: bool = False) -> str:
        """``text`` with each character replaced by :meth:`char_class`, where a contraction letter stays itself only
        within two characters after an apostrophe (the only place the split regexes tell it from other letters).

        ``open_start``: the first two characters keep theirs too (an apostrophe may stand before the text).
        """
        classes = text.translate(self._by_code)
        if "'" not in classes:
            return classes[:2] + classes[2:].translate(_AS_LETTER) if open_start else classes.translate(_AS_LETTER)
        out = list(classes)
        for i in range(2 if open_start else 0, len(out)):
            if out[i] in _CONTRACTION_LETTERS and "'" not in classes[max(0, i - 2) : i]:
                out[i] = "b"
        return "".join(out)

    def partial_classes(self, partial: bytes) -> frozenset[str]:
        """The classes of every character whose UTF-8 encoding starts with ``partial`` (an incomplete character)."""
        found = self._partial_memo.get(partial)
        if found is None:
            found = self._partial_memo[partial] = self._partial_classes(partial)
        return found

    def _partial_classes(self, partial: bytes) -> frozenset[str]:
        lead = partial[0]
        length = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        code = lead & (0x7F >> length)
        for byte in partial[1:]:
            code = code << 6 | byte & 0x3F
        missing = 6 * (length - len(partial))
        low = max(code << missing, (0x80, 0x800, 0x10000)[length - 2])
        high = min((code + 1) << missing, 0x110000)
        found = np.unique(self.table[low:high])
        return frozenset(_CLASSES[i] for i in found.tolist() if i < len(_CLASSES) and _CLASSES[i] != " ")


_AS_LETTER = str.maketrans(dict.fromkeys(_CONTRACTION_LETTERS, "b"))


class _ClassByCode(dict):
    """:meth:`CharClasses.char_class` by code point, filled as code points are met (a ``str.translate`` table)."""

    def __init__(self, table: np.ndarray):
        super().__init__()
        self._table = table

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        found = self[code] = ch if ch in " \n\r'" or ch in _CONTRACTION_LETTERS else _CLASSES[self._table[code]]
        return found


@cache
def _unicode_table() -> np.ndarray:
    """The class of every code point by the ``regex`` module's tables, as an index into ``_CLASSES`` (5 for
    surrogates; ASCII space, CR and LF as white space)."""
    table = np.full(0x110000, 4, dtype=np.uint8)
    text = "".join(map(chr, range(0x110000)))
    for pattern, index in ((r"\p{N}+", 3), (r"\p{L}+", 2), (r"\s+", 0)):
        for m in regex.finditer(pattern, text):
            table[m.start() : m.end()] = index
    table[0xD800:0xE000] = 5
    return table


@cache
def _assigned_table() -> np.ndarray:
    """Per code point: assigned in the ``regex`` module's tables and neither private use nor a surrogate, nor one of
    the characters a split regex names itself (space, CR, LF, apostrophe, contraction letters)."""
    text = "".join(map(chr, range(0x110000)))
    out = np.zeros(0x110000, dtype=bool)
    for m in regex.finditer(r"[^\p{Cn}\p{Co}\p{Cs}]+", text):
        out[m.start() : m.end()] = True
    out[[ord(c) for c in " \n\r'" + _CONTRACTION_LETTERS]] = False
    return out


def _cut_after(pre_tokenizer: Any, probe: str, codes: np.ndarray) -> np.ndarray:
    """Per code point ``c`` of ``codes``: whether ``pre_tokenizer`` cuts ``probe + c`` between the two. The probes are
    asked in blocks, each on its own line (a pre-token starts after every newline of these splits)."""
    out = np.zeros(len(codes), dtype=bool)
    width = len(probe) + 2
    for lo in range(0, len(codes), _PROBE_BLOCK):
        block = codes[lo : lo + _PROBE_BLOCK].tolist()
        text = "\n".join(probe + chr(c) for c in block)
        ends = np.fromiter((end for _, (_, end) in pre_tokenizer.pre_tokenize_str(text)), dtype=np.int64)
        hit = np.zeros(len(text) + 1, dtype=bool)
        hit[ends] = True
        out[lo : lo + len(block)] = hit[np.arange(len(block)) * width + len(probe)]
    return out


def _steps(component: Mapping[str, Any] | None, key: str) -> list[Mapping[str, Any]]:
    if component is None:
        return []
    if component.get("type") == "Sequence":
        return [step for child in component[key] for step in _steps(child, key)]
    return [component]


class Segmenter:
    """The cuts a tokenizer makes in text before BPE, for a text and each way it may continue.

    ``prepend_space``: the normalizer puts ``▁`` before the text (the first token starts with a space).
    ``nfc``: the normalizer composes the text (NFC); a text that is not NFC has no tokenization.
    ``splits``: the pre-tokenizer cuts text (else one model segment is one pre-token).
    """

    def __init__(self, data: Mapping[str, Any], tokenizer: tokenizers.Tokenizer, added: Mapping[str, int],
                 classes: CharClasses | None = None):
        """Reads the normalizer, pre-tokenizer and non-special added tokens (content -> id) of a tokenizer.json;
        ``classes``: its split's character classes (None: asked of its pre-tokenizer, :meth:`CharClasses.probed`,
        where it splits; the ``regex`` module's where it does not).

        Raises :class:`~grammask.errors.CanonicalError` for a normalizer, pre-tokenizer or added-token
        option the relation does not model exactly.
        """
        normalizers = [step["type"] for step in _steps(data.get("normalizer"), "normalizers")]
        self.nfc = normalizers == ["NFC"]
        self.prepend_space = normalizers == ["Prepend", "Replace"]
        sp_replace = normalizers in (["Replace"], ["Prepend", "Replace"])
        if normalizers and not (self.nfc or sp_replace):
            raise CanonicalError(f"normalizer {normalizers} is not supported by the canonical relation")
        if sp_replace:
            _check_space_marker(_steps(data.get("normalizer"), "normalizers"))
        pre = _steps(data.get("pre_tokenizer"), "pretokenizers")
        self.splits = _read_pre_tokenizer(pre, sp_replace) is not None
        self._pre_tokenizer = tokenizer.pre_tokenizer
        if classes is None:
            classes = CharClasses.probed(self._pre_tokenizer) if self.splits else CharClasses.of_unicode()
        self.classes = classes
        if "" in added:
            raise CanonicalError("an added token has empty content")
        if added and self.prepend_space:
            raise CanonicalError("non-special added tokens with a Prepend normalizer are not supported")
        self.added = dict(added)
        contents = sorted(added, key=len, reverse=True)
        self._added_re = re.compile("|".join(map(re.escape, contents))) if contents else None
        self._added_prefixes = frozenset(c[:k] for c in contents for k in range(1, len(c)))
        self._max_prefix = max((len(c) - 1 for c in contents), default=0)
        self._memo: dict[tuple[str, frozenset[str] | None], tuple[tuple[int, ...], ...]] = {}
        self._closed_memo: dict[str, tuple[int, ...]] = {}

    def added_matches(self, text: str) -> list[tuple[int, int, int]]:
        """The added tokens found in ``text``: ``(start, end, id)`` in characters, leftmost-longest."""
        if self._added_re is None:
            return []
        return [(m.start(), m.end(), self.added[m.group()]) for m in self._added_re.finditer(text)]

    def straddles(self, text: str, end: int) -> bool:
        """Whether ``text[:end]`` ends with a proper prefix of an added token (text after ``end`` could complete it)."""
        longest = min(end, self._max_prefix)
        return any(text[end - k : end] in self._added_prefixes for k in range(1, longest + 1))

    def cuts(self, text: str, partial: bytes) -> tuple[tuple[int, ...], ...]:
        """The pre-tokenizer's cuts in ``text`` (then an incomplete character ``partial``), one entry per continuation.

        Each entry holds the character offsets in ``(0, len(text)]`` where a pre-token ends. The last
        pre-token ends with the text when ``len(text)`` is among them (never with an incomplete
        character, which belongs to the next pre-token or the open last one). Without a splitting
        pre-tokenizer, the whole text is one pre-token, closed or open.
        """
        n = len(text)
        if not self.splits:
            return ((), (n,)) if n and not partial else ((),)
        classes, moves = squeeze(self.classes.class_string(text))
        key = (classes, self.classes.partial_classes(partial) if partial else None)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._compute_cuts(classes, key[1])
        return tuple(_moved(moves, cuts) for cuts in found) if moves else found

    def closed_cuts(self, text: str) -> tuple[int, ...]:
        """The pre-tokenizer's cuts in the whole text ``text`` (nothing follows it), ending with ``len(text)``."""
        n = len(text)
        if not self.splits:
            return (n,) if n else ()
        classes, moves = squeeze(self.classes.class_string(text))
        found = self._closed_memo.get(classes)
        if found is None:
            pieces = self._pre_tokenizer.pre_tokenize_str(classes)
            found = self._closed_memo[classes] = tuple(end for _, (_, end) in pieces)
        return _moved(moves, found) if moves else found

    def _compute_cuts(self, classes: str, last: frozenset[str] | None) -> tuple[tuple[int, ...], ...]:
        n = len(classes)
        found: set[tuple[int, ...]] = set()
        for tail in sorted(last) if last else ("",):
            for more in _NEAR_APOSTROPHE if "'" in (classes + tail)[-2:] else _CONTINUATIONS:
                pieces = self._pre_tokenizer.pre_tokenize_str(classes + tail + more)
                found.add(tuple(end for _, (_, end) in pieces if 0 < end <= n))
        return tuple(sorted(found))


_SQUEEZED_RUN = re.compile(r"([ \t\n\r!b])\1{3,}")


def squeeze(classes: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """``classes`` (a class string) with each run of four or more equal uncounted classes cut to three characters, and
    how to move a cut of the result back: ``(position, shift)`` per run, ascending, meaning cuts at or after
    ``position`` (the run's last character, in the result) lie ``shift`` characters further in ``classes``."""
    if _SQUEEZED_RUN.search(classes) is None:
        return classes, ()
    moves = []
    removed = 0
    for m in _SQUEEZED_RUN.finditer(classes):
        removed += m.end() - m.start() - 3
        moves.append((m.start() + 2 - (removed - (m.end() - m.start() - 3)), removed))
    return _SQUEEZED_RUN.sub(lambda m: m.group(1) * 3, classes), tuple(moves)


def _moved(moves: Sequence[tuple[int, int]], cuts: tuple[int, ...]) -> tuple[int, ...]:
    """``cuts`` (positions in a squeezed class string) moved back to the string before :func:`squeeze`."""
    out = []
    k, shift = 0, 0
    for cut in cuts:
        while k < len(moves) and moves[k][0] <= cut:
            shift = moves[k][1]
            k += 1
        out.append(cut + shift)
    return tuple(out)


def _check_space_marker(normalizers: Sequence[Mapping[str, Any]]) -> None:
    for step in normalizers:
        if step["type"] == "Prepend" and step.get("prepend") != "\u2581":
            raise CanonicalError(f"Prepend normalizer {step.get('prepend')!r} is not supported (only '▁')")
        if step["type"] == "Replace" and (step["pattern"].get("String") != " " or step.get("content") != "\u2581"):
            raise CanonicalError(f"Replace normalizer {step['pattern']!r} -> {step.get('content')!r} is not supported")


def _read_pre_tokenizer(steps: Sequence[Mapping[str, Any]], sp_replace: bool) -> str | None:
    """The name of the supported split the pre-tokenizer makes, or None when it makes none.

    Raises :class:`~grammask.errors.CanonicalError` for any other pre-tokenizer.
    """
    types = [step["type"] for step in steps]
    if not steps:
        return None
    if types == ["Split"] and sp_replace and steps[0]["pattern"].get("String") == " ":
        return None
    if types in (["ByteLevel"], ["Digits", "ByteLevel"]) and steps[-1].get("use_regex", True):
        if types[0] == "Digits" and not steps[0].get("individual_digits"):
            raise CanonicalError("a Digits pre-tokenizer without individual_digits is not supported")
        return GPT2_REGEX
    if types == ["Split", "ByteLevel"] and not steps[1].get("use_regex", True):
        pattern = steps[0]["pattern"].get("Regex")
        if steps[0].get("behavior") == "Isolated" and not steps[0].get("invert") and pattern in _KNOWN_SPLIT_REGEXES:
            return _KNOWN_SPLIT_REGEXES[pattern]
        raise CanonicalError(
            f"pre-tokenizer Split regex {pattern!r} ({steps[0].get('behavior')}) is not one the canonical relation "
            f"models; supported: the GPT-2, Llama-3 and Qwen2 splits"
        )
    raise CanonicalError(f"pre-tokenizer {types} is not supported by the canonical relation")
