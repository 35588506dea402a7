"""Ranges of fixed-width numbers as regexes over their digits (decimal and case-insensitive hex)."""

from __future__ import annotations

# A digit pattern: one (low, high) digit range per position.
DigitSeq = tuple[tuple[int, int], ...]


def fixed_width_ranges(lo: int, hi: int, width: int, base: int) -> list[DigitSeq]:
    """Digit-range sequences spelling exactly the numbers ``lo..hi`` written with ``width`` digits."""
    if lo > hi:
        return []
    if width == 0:
        return [()]
    unit = base ** (width - 1)
    lo_d, lo_r = divmod(lo, unit)
    hi_d, hi_r = divmod(hi, unit)
    if lo_d == hi_d:
        return [((lo_d, lo_d),) + s for s in fixed_width_ranges(lo_r, hi_r, width - 1, base)]
    out: list[DigitSeq] = []
    if lo_r:
        out += [((lo_d, lo_d),) + s for s in fixed_width_ranges(lo_r, unit - 1, width - 1, base)]
        lo_d += 1
    full_hi = hi_d if hi_r == unit - 1 else hi_d - 1
    if lo_d <= full_hi:
        out.append(((lo_d, full_hi),) + ((0, base - 1),) * (width - 1))
    if hi_r != unit - 1:
        out += [((hi_d, hi_d),) + s for s in fixed_width_ranges(0, hi_r, width - 1, base)]
    return out


def decimal_digit(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"[{lo}-{hi}]"


def hex_digit(lo: int, hi: int) -> str:
    """Hex digits ``lo..hi`` in either case."""
    if lo == hi <= 9:
        return str(lo)
    parts = []
    if lo <= 9:
        top = min(hi, 9)
        parts.append(str(lo) if lo == top else f"{lo}-{top}")
    if hi >= 10:
        a, b = max(lo, 10) - 10, hi - 10
        for first in "aA":
            start, end = chr(ord(first) + a), chr(ord(first) + b)
            parts.append(start if a == b else f"{start}-{end}")
    return "[" + "".join(parts) + "]"


def render_sequences(seqs: list[DigitSeq], digit) -> str:
    """One regex (without outer group) for the union of the digit sequences, sharing leading digits."""
    groups: dict[tuple[int, int], list[DigitSeq]] = {}
    for s in seqs:
        groups.setdefault(s[0], []).append(s[1:])
    alts = []
    for first, rests in groups.items():
        may_end = any(not r for r in rests)
        rests = [r for r in rests if r]
        head = digit(*first)
        if not rests:
            alts.append(head)
            continue
        tail = _compress(rests, digit)
        if may_end:
            tail = f"(?:{tail})?"
        alts.append(head + tail)
    return "|".join(alts)


def _compress(rests: list[DigitSeq], digit) -> str:
    """The tails after a shared digit, with runs of one digit range written as a count."""
    if len(rests) == 1:
        rest = rests[0]
        out = []
        i = 0
        while i < len(rest):
            j = i
            while j < len(rest) and rest[j] == rest[i]:
                j += 1
            out.append(digit(*rest[i]) + (f"{{{j - i}}}" if j - i > 1 else ""))
            i = j
        return "".join(out)
    return "(?:" + render_sequences(rests, digit) + ")"
