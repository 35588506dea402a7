"""``CanonicalRelation``: which next tokens keep a token sequence the tokenizer's own encoding of its text.

A sequence is *canonical* when ``encode(decode(seq)) == seq``. A prefix is kept when some text can
follow it so that the whole is canonical. The tokenizer cuts text in three stages, each modelled
exactly (see ``pretokens.py`` for which configurations): added tokens (each one token, never part of
another), the pre-tokenizer's cuts (no token crosses one), and BPE inside each pre-token (whole tokens,
every adjacent pair kept, ``pairs.py``; with ``ignore_merges`` a pre-token that is a piece is that
piece; with byte fallback, ``<0xNN>`` tokens only for characters that are not pieces).

The state is the run of tokens since the last point where nothing later can change how the text
before it was cut (a pre-token cut every continuation keeps; for SentencePiece-style BPE, which has
no cuts, any character boundary no added token straddles, keeping the last token for its pair).
States are interned as small integers.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from grammask.bitmask import bool_to_bitmask
from grammask.canonical.groups import ShapeTable, TokenGroups, shape
from grammask.canonical.model import BYTE_TO_CHAR, BpeModel
from grammask.canonical.pairs import PairTable, pair_kept
from grammask.canonical.pretokens import Segmenter

NOT_CANONICAL = -1
_REMEMBERED_STATES = 1024
_REMEMBERED_GROUPS = 1 << 18
_BLOCK = 2048  # candidate ids decided at once by allowed_among with a limit


def split_utf8(data: bytes) -> tuple[str, bytes] | None:
    """``data`` as complete characters and an incomplete last one; None when it is no prefix of UTF-8 text."""
    for cut in range(len(data), max(-1, len(data) - 4), -1):
        try:
            text = data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        tail = data[cut:]
        if not tail or _is_utf8_start(tail):
            return text, tail
        return None
    return None


def _is_utf8_start(tail: bytes) -> bool:
    """Whether ``tail`` (1-3 bytes) begins some UTF-8 character without completing it."""
    lead = tail[0]
    length = 2 if 0xC2 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF5 else 0
    if length <= len(tail) or any(b & 0xC0 != 0x80 for b in tail[1:]):
        return False
    if len(tail) > 1:
        second = tail[1]
        if (lead == 0xE0 and second < 0xA0) or (lead == 0xED and second > 0x9F):
            return False
        if (lead == 0xF0 and second < 0x90) or (lead == 0xF4 and second > 0x8F):
            return False
    return True


class CanonicalRelation:
    """The canonical successor relation of one tokenizer: ``start_state``, ``step``, ``can_end``, ``allowed``.

    Built by :func:`grammask.canonical.build_relation`. ``step`` and ``allowed`` remember what they
    computed, so callers that share a relation between threads hold ``lock`` around their calls.
    """

    def __init__(
        self,
        tokens: Sequence[bytes | None],
        model: BpeModel,
        pairs: PairTable,
        shapes: ShapeTable,
        segmenter: Segmenter,
        build_seconds: float,
        from_cache: bool,
    ):
        self._tokens = tuple(tokens)
        self._model = model
        self._pairs = pairs
        self._shapes = shapes
        self._seg = segmenter
        self.build_seconds = build_seconds
        self.from_cache = from_cache
        self._byte_value = {i: b for b, i in enumerate(model.byte_pieces) if i >= 0}
        self._stages: dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}
        self._states: list[tuple[bool, tuple[int, ...]]] = [(True, ())]
        self._index: dict[tuple[bool, tuple[int, ...]], int] = {(True, ()): 0}
        self._next: dict[tuple[int, int], int] = {}
        self._alive_memo: dict[int, bool] = {}
        self._group_memo: dict[tuple, bool] = {}
        self._pair_memo: dict[tuple[int, int], bool] = {}
        by_first: dict[int, list[int]] = {}
        for i in sorted(range(len(self._tokens)), key=lambda i: len(self._tokens[i] or b"")):
            if self._tokens[i] is not None and 0x80 <= self._tokens[i][0] < 0xC0:
                by_first.setdefault(self._tokens[i][0], []).append(i)
        self._by_first_byte = by_first
        self._groups: TokenGroups | None = None
        self._partials: tuple[list[np.ndarray], list[int]] | None = None
        self.lock = threading.RLock()
        self._words: OrderedDict[int, np.ndarray] = OrderedDict()

    @property
    def nbytes(self) -> int:
        """Bytes of the stored relation: the per-token stage arrays and the shape table (with the merge index)."""
        return self._pairs.nbytes + sum(a.nbytes for a in self._shapes.arrays().values())

    @property
    def n_states(self) -> int:
        """How many states have been reached so far."""
        return len(self._states)

    def start_state(self) -> int:
        """The state before any token."""
        return 0

    def step(self, state: int, token: int) -> int:
        """The state after ``token``, or ``NOT_CANONICAL`` (-1) when no canonical sequence starts so."""
        key = (state, token)
        found = self._next.get(key)
        if found is None:
            found = self._next[key] = self._advance(state, token)
        return found

    def can_end(self, state: int) -> bool:
        """Whether the sequence may end here (its text's own encoding is the sequence)."""
        at_start, window = self._states[state]
        return not window or self._check(at_start, window, final=True) is not None

    def allowed(self, state: int) -> np.ndarray:
        """The token ids that keep the sequence canonical after ``state``, ascending (int32)."""
        bits = np.unpackbits(self.allowed_words(state).view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: len(self._tokens)]).astype(np.int32)

    def allowed_words(self, state: int) -> np.ndarray:
        """:meth:`allowed` as a bitmask over the tokens (int32 words, xgrammar/vLLM layout); do not write to it.

        Remembered for the last 1,024 states asked, so a state seen before costs a lookup.
        """
        return self._answers(state)[0]

    def ending_words(self, state: int) -> np.ndarray:
        """The tokens after which the sequence may end (:meth:`can_end` of :meth:`step`), as :meth:`allowed_words`."""
        return self._answers(state)[1]

    def allowed_exact(self, state: int, token: int) -> bool:
        """Whether ``token`` keeps the sequence canonical after ``state``, decided for this token alone.

        A token after which the text may end is taken without looking further; the others go through
        :meth:`step`. :meth:`allowed` gives the same answer for every token at once.
        """
        found = self._next.get((state, token))
        return found != NOT_CANONICAL if found is not None else self._one(state, token)[0]

    def _one(self, state: int, token: int) -> tuple[bool, bool]:
        """(:meth:`allowed_exact`, whether the sequence may end after ``token``), for one token."""
        at_start, window = self._states[state]
        may_end = self._check(at_start, (*window, token), final=True) is not None
        return may_end or self.step(state, token) != NOT_CANONICAL, may_end

    def _answers(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        found = self._words.get(state)
        if found is None:
            allowed, ends = self._decide_all(state)
            found = (bool_to_bitmask(allowed), bool_to_bitmask(ends))
            for words in found:
                words.flags.writeable = False
            self._words[state] = found
            if len(self._words) > _REMEMBERED_STATES:
                self._words.popitem(last=False)
        else:
            self._words.move_to_end(state)
        return found

    def allowed_among(self, state: int, candidates: np.ndarray, limit: int | None = None) -> np.ndarray:
        """The ids of ``candidates`` (token ids) that keep the sequence canonical after ``state``, ascending: as
        :meth:`allowed`, deciding only the shapes the candidates have (cheap for few shapes, such as digits).

        ``limit``: only the first ``limit`` of them (the candidates are then decided in ascending blocks of
        :data:`_BLOCK` ids until that many are found).
        """
        n = len(self._tokens)
        ids = np.unique(candidates[(candidates >= 0) & (candidates < n)])
        found = self._words.get(state)
        if found is not None:
            bits = np.unpackbits(found[0].view(np.uint8), bitorder="little")[:n].astype(bool)
            out = ids[bits[ids]].astype(np.int32)
            return out if limit is None else out[:limit]
        step = len(ids) if limit is None else _BLOCK
        parts, count = [], 0
        for k in range(0, len(ids), max(step, 1)):
            block = ids[k : k + step]
            only = np.zeros(n, dtype=bool)
            only[block] = True
            part = block[self._decide(state, only)[0][block]].astype(np.int32)
            parts.append(part)
            count += len(part)
            if limit is not None and count >= limit:
                break
        out = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        return out if limit is None else out[:limit]

    def _decide_all(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """Per token id: :meth:`allowed_exact` and may-end, for the whole vocabulary (one check per shape, see
        ``groups.py``)."""
        return self._decide(state, None)

    def _decide(self, state: int, only: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_decide_all` for the token ids ``only`` marks (all where None); the others are left False."""
        if self._groups is None:
            self._groups = TokenGroups(self._tokens, self._model, self._pairs, self._seg, self._shapes)
        groups = self._groups
        at_start, window = self._states[state]
        out = np.zeros(len(self._tokens), dtype=bool)
        ends = np.zeros(len(self._tokens), dtype=bool)
        conditions: dict[tuple[tuple[int, ...], bool], np.ndarray | None] = {}
        for members in groups.members:
            if only is not None:
                members = members[only[members]]
                if not len(members):
                    continue
            rep = (*window, int(members[0]))
            for final in (True, False):
                if not final and out[members].all():
                    break  # the open text allows no more than every member
                alts: list[tuple[tuple[int, ...], bool]] = []
                self._check(at_start, rep, final=final, alts=alts)
                for alt in set(alts):
                    if alt not in conditions:
                        conditions[alt] = self._condition(*alt)
                    cond = conditions[alt]
                    if cond is not None:
                        out[members] |= cond[members]
                if final:
                    ends[members] = out[members]
                if any(not prev for prev, _ in alts) and groups.own_piece is None:
                    break  # a group starting with the token asks only that it is whole: nothing allows more
        split = split_utf8(b"".join(self._tokens[t] for t in window))
        inside = split is not None and bool(split[1])
        if inside:
            singles = groups.single[groups.single_goes_on].tolist()
        else:
            partials, singles = self._partial_singles()
            for members in partials:
                if only is not None:
                    members = members[only[members]]
                singles += self._decide_partials(state, members, out, conditions)
        for t in singles + groups.completing_added(split[0] if split else ""):
            if only is None or only[t]:
                out[t], ends[t] = self._one(state, t)
        return out, ends

    def _partial_singles(self) -> tuple[list[np.ndarray], list[int]]:
        """The singles :meth:`_decide` asks after text that ends between characters: those that start a character
        and end inside one, grouped by the shape of their whole characters and the classes of the character their
        last bytes begin (for a byte-level tokenizer that splits, without NFC or added tokens; see
        :meth:`_decide_partials`), and the others, checked one by one."""
        if self._partials is None:
            groups, seg = self._groups, self._seg
            grouped = seg.splits and not seg.nfc and not seg.added and not self._model.byte_fallback
            by_shape: dict[tuple[str, frozenset[str]], list[int]] = {}
            others = []
            for t in groups.single[~groups.single_goes_on].tolist():
                split = split_utf8(self._tokens[t]) if grouped else None
                if split is None or not split[1]:
                    others.append(t)
                else:
                    key = (shape(split[0], seg.classes), seg.classes.partial_classes(split[1]))
                    by_shape.setdefault(key, []).append(t)
            self._partials = ([np.array(m, dtype=np.int64) for m in by_shape.values()], others)
        return self._partials[0], list(self._partials[1])

    def _decide_partials(self, state: int, members: np.ndarray, out: np.ndarray,
                         conditions: dict[tuple[tuple[int, ...], bool], np.ndarray | None]) -> list[int]:
        """Sets ``out`` for one group of :meth:`_partial_singles` after ``state`` by one check, and remembers each
        member's :meth:`step`; the members left to check one by one (all of them after an empty window).

        The check is the first member's with its own id left open (``_check`` with ``alts``), which members of one
        shape share, as they share what it forgets: a member may follow iff the pre-token group it ends under some
        hypothesis that holds takes it (:meth:`_condition`, remembered in ``conditions``) and its state has a
        canonical way to finish the character it ends inside.
        """
        at_start, window = self._states[state]
        if not len(members) or not window:
            return members.tolist()
        alts: list[tuple[tuple[int, ...], bool]] = []
        drop = self._check(at_start, (*window, int(members[0])), final=False, alts=alts)
        after = self._next
        if drop is None:
            after.update(((state, t), NOT_CANONICAL) for t in members.tolist())
            return []
        ok = np.zeros(len(members), dtype=bool)
        for alt in set(alts):
            if alt not in conditions:
                conditions[alt] = self._condition(*alt)
            cond = conditions[alt]
            if cond is not None:
                ok |= cond[members]
        fresh, kept = at_start and drop == 0, window[drop:]
        for t, good in zip(members.tolist(), ok.tolist()):
            found = self._state_of((fresh, (*kept, t))) if good else NOT_CANONICAL
            if found != NOT_CANONICAL and not self._alive(found):
                found = NOT_CANONICAL
            out[t] = found != NOT_CANONICAL
            after[(state, t)] = found
        return []

    def _condition(self, prev: tuple[int, ...], closed: bool) -> np.ndarray | None:
        """Per token id: whether it may end a pre-token group that starts with ``prev`` (None: no id may)."""
        groups = self._groups
        if prev and not self._group_ok(list(prev), False):
            return None
        cond = groups.kept_after(prev[-1]) if prev else groups.whole.copy()
        if closed and groups.own_piece is not None:
            if prev:
                cond[groups.piece_extensions(b"".join(self._tokens[t] for t in prev))] = False
            else:
                piece = groups.own_piece
                cond = np.where(piece >= 0, piece == np.arange(len(piece)), cond)
        return cond

    def accepts(self, ids: Sequence[int]) -> int:
        """How many of ``ids`` are taken before the first non-canonical step; ``len(ids) + 1`` if all is canonical."""
        state = self.start_state()
        for k, token in enumerate(ids):
            state = self.step(state, token)
            if state == NOT_CANONICAL:
                return k
        return len(ids) + 1 if self.can_end(state) else len(ids)

    def _advance(self, state: int, token: int) -> int:
        if not 0 <= token < len(self._tokens) or self._tokens[token] is None:
            return NOT_CANONICAL
        at_start, window = self._states[state]
        window = (*window, token)
        drop = self._check(at_start, window, final=False)
        if drop is None:
            return NOT_CANONICAL
        found = self._state_of((at_start and drop == 0, window[drop:]))
        return found if self._alive(found) else NOT_CANONICAL

    def _state_of(self, key: tuple[bool, tuple[int, ...]]) -> int:
        """The state of ``(at the start, window)``, interned."""
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self._states)
            self._states.append(key)
        return found

    def _alive(self, state: int) -> bool:
        """Whether a state whose text ends inside a character has a token that goes on canonically (others have)."""
        found = self._alive_memo.get(state)
        if found is None:
            data = b"".join(self._tokens[t] for t in self._states[state][1])
            split = split_utf8(data)
            partial = split[1] if split else b""
            found = not partial or self._continues(state, partial)
            self._alive_memo[state] = found
        return found

    def _continues(self, state: int, partial: bytes) -> bool:
        """Whether some token whose bytes go on with the character ``partial`` started is a canonical next step."""
        for byte in range(0x80, 0xC0):
            if split_utf8(partial + bytes([byte])) is None:
                continue
            for t in self._by_first_byte.get(byte, ()):
                if split_utf8(partial + self._tokens[t]) is not None and self.step(state, t) != NOT_CANONICAL:
                    return True
        return False

    def _check(
        self, at_start: bool, window: tuple[int, ...], final: bool, alts: list[tuple[tuple[int, ...], bool]] | None = None
    ) -> int | None:
        """How many leading tokens of ``window`` to forget; None when no text can follow it canonically.

        ``final``: the text ends with the window. ``alts``: leave the last token's own id open: the
        pre-token group it ends is not checked, and each cut hypothesis under which the rest holds adds
        ``(the tokens before it in its group, whether the group is closed)`` to ``alts``.
        """
        parts = list(map(self._tokens.__getitem__, window))
        data = b"".join(parts)
        if at_start and self._seg.prepend_space and not data.startswith(b" "):
            return None
        try:
            text, partial = data.decode("utf-8"), b""
        except UnicodeDecodeError:
            split = split_utf8(data)
            if split is None or final:  # (the text ends inside a character)
                return None
            text, partial = split
        if self._seg.nfc and not unicodedata.is_normalized("NFC", text):
            return None
        if len(text) + len(partial) == len(data):  # one byte a character
            char_at: Sequence[int] = range(len(text) + 1)
        else:
            char_at = list(itertools.accumulate((len(c.encode()) for c in text), initial=0))
        ends = list(itertools.accumulate(map(len, parts)))
        starts = [0, *ends[:-1]]
        certain = set(starts) if not self._seg.splits else set()
        token = char = 0
        matches = self._seg.added_matches(text)
        first_token = {s: i for i, s in enumerate(starts)} if matches else {}
        for c0, c1, tid in matches:
            i = first_token.get(char_at[c0])
            if i is None or ends[i] != char_at[c1] or window[i] != tid:
                return None
            cuts = self._seg.closed_cuts(text[char:c0])
            if i > token and self._region_cut(window, ends, token, i, char_at, char, c0 - char, (cuts,), b"") is None:
                return None
            certain.update(char_at[char + c] for c in (0, *cuts))
            certain.update((char_at[c0], char_at[c1]))
            token, char = i + 1, c1
        if token < len(window):
            region = text[char:]
            hypotheses = (self._seg.closed_cuts(region),) if final else self._seg.cuts(region, partial)
            good = self._region_cut(
                window, ends, token, len(window), char_at, char, len(region), hypotheses, partial, alts
            )
            if good is None:
                return None
            certain.add(char_at[char])
            certain.update(char_at[char + c] for c in _agreed_cuts(hypotheses))
        return self._forget(window, starts, ends, text, char_at, certain)

    def _region_cut(
        self,
        window: tuple[int, ...],
        ends: list[int],
        t0: int,
        t1: int,
        char_at: Sequence[int],
        c0: int,
        n: int,
        hypotheses: Sequence[tuple[int, ...]],
        partial: bytes,
        alts: list[tuple[tuple[int, ...], bool]] | None = None,
    ) -> list[tuple[int, ...]] | None:
        """The hypotheses (cuts) under which tokens ``t0:t1``, spelling ``n`` characters from ``c0``, are canonical.

        None when there is none. ``alts``: see :meth:`_check` (the last group is left open).
        """
        token_ends = set(ends[t0:t1])
        good = []
        for cuts in hypotheses:
            cut_bytes = [char_at[c0 + c] for c in cuts]
            if not all(b in token_ends for b in cut_bytes):
                continue
            closed = bool(cuts) and cuts[-1] == n and not partial
            groups, group, k = [], [], 0
            for i in range(t0, t1):
                group.append(window[i])
                if k < len(cut_bytes) and ends[i] == cut_bytes[k]:
                    groups.append((group, True))
                    group, k = [], k + 1
            if group:
                groups.append((group, closed))
            if alts is not None:
                *groups, (last, last_closed) = groups
            if all(self._group_ok(g, c) for g, c in groups):
                good.append(cuts)
                if alts is not None:
                    alts.append((tuple(last[:-1]), last_closed))
        return good or None

    def _group_ok(self, group: list[int], closed: bool) -> bool:
        """Whether ``group`` is the BPE of one pre-token (``closed``) or begins it; remembered (up to
        :data:`_REMEMBERED_GROUPS` groups, then forgotten all at once)."""
        key = (*group, closed)
        found = self._group_memo.get(key)
        if found is None:
            if len(self._group_memo) >= _REMEMBERED_GROUPS:
                self._group_memo.clear()
            found = self._group_memo[key] = self._decide_group(group, closed)
        return found

    def _decide_group(self, group: list[int], closed: bool) -> bool:
        """:meth:`_group_ok`, not remembered."""
        model, pairs = self._model, self._pairs
        if closed and model.ignore_merges:
            piece = model.pieces.get("".join(BYTE_TO_CHAR[b] for b in b"".join(self._tokens[t] for t in group)))
            if piece is not None:
                return group == [piece]
        if not all(pairs.whole[t] for t in group):
            return False
        for pair in itertools.pairwise(group):
            if not self._pair_ok(pair):
                return False
        return not model.byte_fallback or self._fallback_ok(group)

    def _pair_ok(self, pair: tuple[int, int]) -> bool:
        """Whether BPE keeps the whole tokens ``pair`` apart (:func:`pair_kept`); remembered (up to
        :data:`_REMEMBERED_GROUPS` pairs, then forgotten all at once): a run of one token repeats one pair."""
        found = self._pair_memo.get(pair)
        if found is None:
            if len(self._pair_memo) >= _REMEMBERED_GROUPS:
                self._pair_memo.clear()
            a, b = pair
            found = self._pair_memo[pair] = pair_kept(self._model.merges, self._stage(a)[0], self._stage(b)[1])
        return found

    def _fallback_ok(self, group: list[int]) -> bool:
        """Whether every run of ``<0xNN>`` tokens spells characters that are not pieces."""
        for is_byte, run in itertools.groupby(group, key=lambda t: t in self._byte_value):
            if not is_byte:
                continue
            chars = bytes(self._byte_value[t] for t in run).decode("utf-8", errors="ignore")
            if any(self._model.pieces.get(c if c != " " else "\u2581") is not None for c in chars):
                return False
        return True

    def _stage(self, token: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        found = self._stages.get(token)
        if found is None:
            found = self._stages[token] = self._pairs.stages(token)
        return found

    def _forget(
        self,
        window: tuple[int, ...],
        starts: list[int],
        ends: list[int],
        text: str,
        char_at: Sequence[int],
        certain: set[int],
    ) -> int:
        """How many leading tokens to forget: those before the last certain cut no added token straddles.

        Without a splitting pre-tokenizer every token start is certain, and the last token is kept
        for the pair it makes with the next one.
        """
        positions = [*starts[1:], ends[-1]] if self._seg.splits else starts[1:]
        for i in range(len(positions), 0, -1):
            p = positions[i - 1]
            if p not in certain:
                continue
            pc = bisect.bisect_left(char_at, p)  # the character that starts at byte p, if one does
            if pc < len(char_at) and char_at[pc] == p and not self._seg.straddles(text, pc):
                return i
        return 0


def _agreed_cuts(hypotheses: Sequence[tuple[int, ...]]) -> list[int]:
    """The cuts every hypothesis makes, with the same cuts before them.

    All hypotheses count, not only those the tokens so far satisfy: a later token may take the text
    the way of one the tokens so far violate, and must then be refused, which needs the text before.
    """
    agreed = []
    for k, cut in enumerate(hypotheses[0]):
        if any(len(h) <= k or h[k] != cut for h in hypotheses):
            break
        agreed.append(cut)
    return agreed
