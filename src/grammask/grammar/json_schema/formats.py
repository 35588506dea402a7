"""The string formats grammask enforces, as regular languages over the decoded string.

Each is written as a regex over the string's characters. Where the format's real definition is
not regular, or would need a huge automaton, the language here is a subset of it (it never
admits a string the format forbids): ``time`` and ``date-time`` admit no leap second, and
``hostname`` caps the name at 253 characters by allowing at most four labels, the fourth of at
most 61 characters.
"""

from __future__ import annotations

from functools import cache

from grammask.automata.regex import Node
from grammask.grammar.json_schema.automaton import CharDFA, dfa_from_ast
from grammask.grammar.regex_frontend import parse_pattern

_YEAR = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    f"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    f"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29)"
)
_HOUR_MIN = "(?:[01][0-9]|2[0-3]):[0-5][0-9]"
_TIME = f"{_HOUR_MIN}:[0-5][0-9](?:\\.[0-9]+)?(?:[Zz]|[+-]{_HOUR_MIN})"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = f"{_OCTET}(?:\\.{_OCTET}){{3}}"
_HEX = "[0-9A-Fa-f]"


def _label(max_len: int) -> str:
    """A host name label of at most ``max_len`` characters, without hyphens in positions 3 and 4.

    Such labels are reserved (RFC 5891 4.2.3.1); ``xn--`` A-labels are among them, and whether
    one is valid Punycode of a valid IDN is not a regular property, so none is admitted.
    """
    a, x = "[A-Za-z0-9]", "[A-Za-z0-9-]"
    return f"(?:{a}(?:{a}|{x}{a})?|{a}{x}{x}{a}|{a}{x}(?:{a}{x}|-{a}){x}{{0,{max_len - 5}}}{a})"


_HOSTNAME = f"{_label(63)}(?:\\.{_label(63)}){{0,2}}(?:\\.{_label(61)})?"


def _ipv6() -> str:
    group = f"{_HEX}{{1,4}}"
    forms = [f"(?:{group}:){{7}}{group}", f"(?:{group}:){{6}}{_IPV4}"]
    for left in range(8):
        head = "" if left == 0 else f"{group}(?::{group}){{{left - 1}}}"
        room = 7 - left
        tails = [""]
        if room >= 1:
            tails.append(f"{group}(?::{group}){{0,{room - 1}}}")
        if room >= 2:
            tails.append(f"(?:{group}:){{0,{room - 2}}}{_IPV4}")
        forms.append(f"{head}::(?:{'|'.join(t for t in tails if t)})?")
    return "(?:" + "|".join(forms) + ")"


_IPV6 = _ipv6()
_PCT = f"%{_HEX}{{2}}"
_UNRESERVED_SUB = "A-Za-z0-9\\-._~!$&'()*+,;="
_PCHAR = f"(?:[{_UNRESERVED_SUB}:@]|{_PCT})"
_SEGMENT_NZ_NC = f"(?:[{_UNRESERVED_SUB}@]|{_PCT})+"
_AUTHORITY = (
    f"(?:(?:[{_UNRESERVED_SUB}:]|{_PCT})*@)?"
    f"(?:\\[(?:{_IPV6}|v{_HEX}+\\.[{_UNRESERVED_SUB}:]+)\\]|(?:[{_UNRESERVED_SUB}]|{_PCT})*)(?::[0-9]*)?"
)
_PATH_ABEMPTY = f"(?:/{_PCHAR}*)*"
_PATH_ABSOLUTE = f"/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
_QUERY_FRAGMENT = f"(?:\\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_URI = (
    f"[A-Za-z][A-Za-z0-9+\\-.]*:(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PCHAR}+(?:/{_PCHAR}*)*|)"
    f"{_QUERY_FRAGMENT}"
)
_RELATIVE_REF = (
    f"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_SEGMENT_NZ_NC}(?:/{_PCHAR}*)*|){_QUERY_FRAGMENT}"
)
_ATEXT = "A-Za-z0-9!#$%&'*+/=?^_`{|}~-"
_DIGITS = "[0-9]+"
_DURATION_TIME = f"T(?:{_DIGITS}H(?:{_DIGITS}M(?:{_DIGITS}S)?)?|{_DIGITS}M(?:{_DIGITS}S)?|{_DIGITS}S)"
_DURATION = (
    f"P(?:(?:{_DIGITS}D|{_DIGITS}M(?:{_DIGITS}D)?|{_DIGITS}Y(?:{_DIGITS}M(?:{_DIGITS}D)?)?)(?:{_DURATION_TIME})?"
    f"|{_DURATION_TIME}|{_DIGITS}W)"
)
_JSON_POINTER = "(?:/(?:[^~/]|~[01])*)*"

FORMATS: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": f"{_DATE}[Tt]{_TIME}",
    "duration": _DURATION,
    "email": f"[{_ATEXT}]+(?:\\.[{_ATEXT}]+)*@(?:{_HOSTNAME}|\\[{_IPV4}\\])",
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uuid": f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}",
    "uri": _URI,
    "uri-reference": f"(?:{_URI}|{_RELATIVE_REF})",
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": f"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})",
}

# Formats the specification defines that grammask cannot enforce exactly.
UNENFORCEABLE = frozenset({"idn-email", "idn-hostname", "iri", "iri-reference", "uri-template", "regex"})


def format_language(name: str) -> Node:
    """The regex AST of format ``name`` (a key of :data:`FORMATS`)."""
    return parse_pattern(FORMATS[name], dialect="ecma")


@cache
def format_automaton(name: str) -> tuple[Node, CharDFA]:
    """The regex AST of format ``name`` (a key of :data:`FORMATS`) and its minimal automaton, built once per process
    (formats recur from schema to schema, and their automata take tens of milliseconds)."""
    node = format_language(name)
    return node, dfa_from_ast(node)
