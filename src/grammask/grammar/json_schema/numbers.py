"""Sets of JSON numbers as regular languages over their lexemes, exact to Python's reading of them.

A JSON number lexeme has one of four disjoint *forms*: ``int`` (``-?(0|[1-9][0-9]*)``), ``zdec``
(a fraction of zeros only, ``3.0``), ``ndec`` (a fraction with a non-zero digit) and ``exp`` (an
exponent). ``json.loads`` reads ``int`` lexemes as exact integers and the others as floats, and
``jsonschema`` compares those values exactly with the schema's bounds. So a bound is applied to
``int`` lexemes on their exact value and to the fraction forms on the float they are read as:
``x >= B`` becomes "x is at least the shortest decimal of the smallest float >= B", which implies
the float comparison (the few lexemes that round up to that float from below are rejected
although valid). Such ends and constants use at most ``MAX_FRACTION_DIGITS`` fraction digits,
moved inwards where they would need more. Bounds cannot be expressed on ``exp`` lexemes, so a
bounded set admits none (``1e3`` must then be written ``1000``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

from grammask.errors import NO_DEADLINE, Deadline
from grammask.grammar.json_schema.automaton import dfa_from_ast, dfa_to_ast, product
from grammask.grammar.json_schema.digits import (
    decimal_digit,
    fixed_width_ranges,
    render_sequences,
)
from grammask.grammar.regex_frontend import is_nothing, parse_pattern, render_regex

FORMS = ("int", "zdec", "ndec", "exp")
# Float-read bounds and constants are used with at most this many fraction digits (see _float_threshold).
MAX_FRACTION_DIGITS = 20
INTEGER_FORMS = ("int", "zdec")

# An interval end: (value, closed); value None is infinity.
End = tuple[Fraction | None, bool]


@dataclass(frozen=True)
class Interval:
    lo: Fraction | None
    lo_closed: bool
    hi: Fraction | None
    hi_closed: bool

    def is_empty(self) -> bool:
        if self.lo is None or self.hi is None:
            return False
        return self.lo > self.hi or (self.lo == self.hi and not (self.lo_closed and self.hi_closed))

    def intersect(self, other: Interval) -> Interval:
        lo, lo_closed = max(_lower(self), _lower(other), key=_lower_key)
        hi, hi_closed = min(_upper(self), _upper(other), key=_upper_key)
        return Interval(lo, lo_closed, hi, hi_closed)

    def contains(self, x: Fraction) -> bool:
        if self.lo is not None and (x < self.lo or (x == self.lo and not self.lo_closed)):
            return False
        return not (self.hi is not None and (x > self.hi or (x == self.hi and not self.hi_closed)))


EVERYTHING = Interval(None, False, None, False)


def _lower(i: Interval) -> End:
    return (i.lo, i.lo_closed)


def _upper(i: Interval) -> End:
    return (i.hi, i.hi_closed)


def _lower_key(end: End):
    value, closed = end
    return (-math.inf, 0) if value is None else (value, 0 if closed else 1)


def _upper_key(end: End):
    value, closed = end
    return (math.inf, 0) if value is None else (value, 0 if not closed else 1)


# A union of disjoint intervals, sorted.
Intervals = tuple[Interval, ...]


def _normalize(form: str, intervals) -> Intervals:
    """Canonical disjoint intervals: integer forms as closed integer ranges, ``ndec`` open at integers."""
    out = []
    for i in intervals:
        if form in INTEGER_FORMS:
            lo = None if i.lo is None else (math.ceil(i.lo) if i.lo_closed else math.floor(i.lo) + 1)
            hi = None if i.hi is None else (math.floor(i.hi) if i.hi_closed else math.ceil(i.hi) - 1)
            i = Interval(None if lo is None else Fraction(lo), lo is not None, None if hi is None else Fraction(hi), hi is not None)
        elif form == "ndec":
            i = Interval(
                i.lo, i.lo_closed and (i.lo is None or i.lo.denominator != 1), i.hi, i.hi_closed and (i.hi is None or i.hi.denominator != 1)
            )
        if not i.is_empty():
            out.append(i)
    out.sort(key=lambda i: _lower_key(_lower(i)))
    merged: list[Interval] = []
    for i in out:
        if merged and _touches(merged[-1], i, form):
            last = merged[-1]
            hi = max(_upper(last), _upper(i), key=_upper_key)
            merged[-1] = Interval(last.lo, last.lo_closed, hi[0], hi[1])
        else:
            merged.append(i)
    return tuple(merged)


def _touches(a: Interval, b: Interval, form: str) -> bool:
    if a.hi is None:
        return True
    if form in INTEGER_FORMS:
        return b.lo <= a.hi + 1
    return b.lo < a.hi or (b.lo == a.hi and (a.hi_closed or b.lo_closed))


@dataclass(frozen=True)
class NumberSet:
    """A set of JSON number lexemes: for each form, the values (as intervals) it admits."""

    parts: tuple[tuple[str, Intervals], ...]

    @classmethod
    def of(cls, by_form: dict[str, list[Interval] | Intervals]) -> NumberSet:
        parts = []
        for form in FORMS:
            intervals = _normalize(form, by_form.get(form, ()))
            if form == "exp" and intervals and intervals != (EVERYTHING,):
                intervals = ()
            if intervals:
                parts.append((form, intervals))
        return cls(tuple(parts))

    @classmethod
    def numbers(cls) -> NumberSet:
        return cls.of({form: [EVERYTHING] for form in FORMS})

    @classmethod
    def integers(cls) -> NumberSet:
        return cls.of({form: [EVERYTHING] for form in INTEGER_FORMS})

    @classmethod
    def empty(cls) -> NumberSet:
        return cls(())

    @classmethod
    def equal_to(cls, value: float) -> NumberSet:
        """The lexemes ``json.loads`` reads as a number equal to ``value``."""
        exact = Fraction(value)
        by_form: dict[str, list[Interval]] = {"int": [Interval(exact, True, exact, True)]}
        if math.isfinite(float(value)) and Fraction(float(value)) == exact:
            end, _ = _shortest(float(value))
            if (end * 10**MAX_FRACTION_DIGITS).denominator == 1:
                by_form["zdec"] = by_form["ndec"] = [Interval(end, True, end, True)]
        return cls.of(by_form)

    @classmethod
    def bounded(cls, op: str, bound: float) -> NumberSet:
        """The lexemes whose value satisfies ``value op bound`` (``op`` one of ``>= > <= <``)."""
        exact = Fraction(bound)
        up = op in (">=", ">")
        closed = op in (">=", "<=")
        exact_interval = Interval(exact, closed, None, False) if up else Interval(None, False, exact, closed)
        end, end_closed = _float_threshold(op, exact)
        if up:
            float_interval = Interval(end, end_closed, None, False)
        else:
            float_interval = Interval(None, False, end, end_closed)
        return cls.of({"int": [exact_interval], "zdec": [float_interval], "ndec": [float_interval]})

    def forms(self) -> dict[str, Intervals]:
        return dict(self.parts)

    def is_empty(self) -> bool:
        return not self.parts

    def intersect(self, other: NumberSet, deadline: Deadline = NO_DEADLINE) -> NumberSet:
        """The numbers in both (``deadline``: as :class:`~grammask.grammar.json_schema.family.Language`'s, unused:
        interval arithmetic takes no long steps)."""
        mine, theirs = self.forms(), other.forms()
        return NumberSet.of(
            {
                form: [a.intersect(b) for a in mine[form] for b in theirs[form]]
                for form in FORMS
                if form in mine and form in theirs
            }
        )

    def union(self, other: NumberSet) -> NumberSet:
        mine, theirs = self.forms(), other.forms()
        return NumberSet.of({form: list(mine.get(form, ())) + list(theirs.get(form, ())) for form in FORMS})

    def complement(self) -> NumberSet:
        """The number lexemes not in the set (``exp`` lexemes only when the set has none of them)."""
        mine = self.forms()
        out: dict[str, list[Interval]] = {}
        for form in FORMS:
            out[form] = _complement(mine.get(form, ()))
        return NumberSet.of(out)

    def is_subset(self, other: NumberSet, deadline: Deadline = NO_DEADLINE) -> bool:
        """Whether every number is in ``other`` (``deadline`` unused, as in :meth:`intersect`)."""
        return self.minus_empty(other)

    def minus_empty(self, other: NumberSet) -> bool:
        theirs = other.forms()
        for form, intervals in self.parts:
            rest = NumberSet.of({form: [a.intersect(b) for a in intervals for b in _complement(theirs.get(form, ()))]})
            if not rest.is_empty():
                return False
        return True

    def overlaps(self, other: NumberSet) -> bool:
        return not self.intersect(other).is_empty()

    @property
    def key(self) -> tuple:
        return ("num",) + self.parts

    def lexeme(self) -> str:
        """A regex for the lexemes of the set."""
        alts = [_form_regex(form, i) for form, intervals in self.parts for i in intervals]
        return "|".join(a for a in alts if a)


def _complement(intervals: Intervals) -> list[Interval]:
    out = []
    lo: End = (None, False)
    for i in intervals:
        if i.lo is not None:
            out.append(Interval(lo[0], lo[1], i.lo, not i.lo_closed))
        if i.hi is None:
            return [j for j in out if not j.is_empty()]
        lo = (i.hi, not i.hi_closed)
    out.append(Interval(lo[0], lo[1], None, False))
    return [j for j in out if not j.is_empty()]


def _midpoint(a: float, b: float) -> Fraction:
    return (Fraction(a) + Fraction(b)) / 2


def _float_threshold(op: str, bound: Fraction) -> End:
    """For float-read lexemes x, an end e such that x beyond e implies ``float(x) op bound``.

    e is the shortest decimal of the extreme float satisfying the comparison, which keeps the
    regex short; the few lexemes between it and that float's rounding midpoint are rejected
    although valid (never the other way round).
    """
    up = op in (">=", ">")
    f = float(bound)
    if not math.isfinite(f):
        raise OverflowError(f"bound {bound} is outside the range of floats")
    if up and (Fraction(f) < bound or (op == ">" and Fraction(f) == bound)):
        f = math.nextafter(f, math.inf)
    if not up and (Fraction(f) > bound or (op == "<" and Fraction(f) == bound)):
        f = math.nextafter(f, -math.inf)
    end, closed = _shortest(f)
    scaled = end * 10**MAX_FRACTION_DIGITS
    if scaled.denominator != 1:
        # Too many digits for a compact regex: move the end inwards to a shorter decimal.
        end, closed = Fraction(math.ceil(scaled) if up else math.floor(scaled), 10**MAX_FRACTION_DIGITS), True
    return end, closed


def _shortest(f: float) -> End:
    """The shortest decimal that reads back as ``f``, closed; its rounding midpoint, open, on a tie."""
    short = Fraction(Decimal(repr(f)))
    if short in (_midpoint(math.nextafter(f, -math.inf), f), _midpoint(f, math.nextafter(f, math.inf))):
        return Fraction(f), True
    return short, True


# --- lexeme regexes --------------------------------------------------------------------------

_EXP = "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?[eE][+-]?[0-9]+"


def _form_regex(form: str, interval: Interval) -> str:
    if form == "exp":
        return _EXP
    alts = []
    nonneg = interval.intersect(Interval(Fraction(0), True, None, False))
    if not nonneg.is_empty():
        alts.append(_magnitude(form, nonneg))
    nonpos = interval.intersect(Interval(None, False, Fraction(0), True))
    if not nonpos.is_empty():
        mirrored = Interval(-nonpos.hi, nonpos.hi_closed, None if nonpos.lo is None else -nonpos.lo, nonpos.lo_closed)
        alts.append("-(?:" + _magnitude(form, mirrored) + ")")
    return "|".join(a for a in alts if a)


def _magnitude(form: str, i: Interval) -> str:
    """Regex for unsigned lexemes of ``form`` whose value lies in ``i`` (within [0, inf))."""
    if form in INTEGER_FORMS:
        lo = math.ceil(i.lo) if i.lo_closed else math.floor(i.lo) + 1
        hi = None if i.hi is None else (math.floor(i.hi) if i.hi_closed else math.ceil(i.hi) - 1)
        body = _int_range(lo, hi)
        if not body:
            return ""
        return body if form == "int" else f"(?:{body})\\.0+"
    return _ndec(i)


def _int_range(lo: int, hi: int | None) -> str:
    """Canonical decimal integers (no leading zeros) in ``lo..hi`` (``hi=None``: unbounded)."""
    if hi is not None and hi < lo:
        return ""
    seqs = []
    width = len(str(lo))
    while hi is None or width <= len(str(hi)):
        start = max(lo, 10 ** (width - 1) if width > 1 else 0)
        if hi is None and start == 10 ** (width - 1) and width > 1:
            return render_sequences(seqs, decimal_digit) + ("|" if seqs else "") + f"[1-9][0-9]{{{width - 1},}}"
        end = 10**width - 1 if hi is None else min(hi, 10**width - 1)
        seqs += fixed_width_ranges(start, end, width, 10)
        width += 1
    return render_sequences(seqs, decimal_digit)


def _ndec(i: Interval) -> str:
    """Unsigned decimals with a non-zero fraction digit whose value lies in ``i``."""
    lo_int = math.floor(i.lo)
    hi_int = None if i.hi is None else math.floor(i.hi)
    alts = []
    lo_frac = _digits(i.lo - lo_int)
    if hi_int == lo_int:
        hi_frac = _digits(i.hi - hi_int)
        frac = _frac_regex(lo_frac, i.lo_closed, hi_frac, i.hi_closed)
        if frac:
            alts.append(f"{lo_int}\\.(?:{frac})")
        return "|".join(alts)
    frac = _frac_regex(lo_frac, i.lo_closed, None, False)
    if frac:
        alts.append(f"{lo_int}\\.(?:{frac})")
    middle = _int_range(lo_int + 1, None if hi_int is None else hi_int - 1)
    if middle:
        alts.append(f"(?:{middle})\\.[0-9]*[1-9][0-9]*")
    if hi_int is not None:
        frac = _frac_regex("", True, _digits(i.hi - hi_int), i.hi_closed)
        if frac:
            alts.append(f"{hi_int}\\.(?:{frac})")
    return "|".join(alts)


def _digits(fraction: Fraction) -> str:
    """The decimal digits of a fraction in [0, 1) with a finite expansion, without trailing zeros."""
    out = []
    while fraction:
        fraction *= 10
        digit = math.floor(fraction)
        out.append(str(digit))
        fraction -= digit
        if len(out) > 2000:
            raise OverflowError("bound has no finite decimal expansion")
    return "".join(out)


@lru_cache(maxsize=512)
def _frac_regex(lo: str, lo_closed: bool, hi: str | None, hi_closed: bool) -> str:
    """Fraction digit strings f (at least one non-zero digit) with lo <= 0.f <= hi (bounds as digits)."""
    langs = ["[0-9]*[1-9][0-9]*", _compare(lo, ">=" if lo_closed else ">")]
    if hi is not None:
        langs.append(_compare(hi, "<=" if hi_closed else "<"))
    dfa = None
    for lang in langs:
        if lang is None:
            continue
        if not lang:
            return ""
        d = dfa_from_ast(parse_pattern(lang))
        dfa = d if dfa is None else product(dfa, d, "and")
    node = dfa_to_ast(dfa)
    return "" if is_nothing(node) else render_regex(node)


def _compare(c: str, op: str) -> str | None:
    """Digit strings f with 0.f ``op`` 0.c (c without trailing zeros); None: every f, "": none."""
    alts = []
    for k, ch in enumerate(c):
        d = int(ch)
        if op in (">=", ">") and d < 9:
            alts.append(f"{c[:k]}[{d + 1}-9][0-9]*")
        if op in ("<=", "<") and d > 0:
            alts.append(f"{c[:k]}[0-{d - 1}][0-9]*")
        if op in ("<=", "<") and k >= 1:
            alts.append(c[:k])
    if op == ">=":
        if not c:
            return None
        alts.append(f"{c}[0-9]*")
    elif op == ">":
        alts.append(f"{c}0*[1-9][0-9]*")
    elif op == "<=":
        alts.append(f"{c}0*" if c else "0+")
    return "|".join(f"(?:{a})" for a in alts)
