"""The options of the JSON Schema front end, spelled and checked in one place."""

from __future__ import annotations

from dataclasses import dataclass

from grammask.errors import ConfigurationError

WHITESPACE_POLICIES = ("compact", "any")
PROPERTY_ORDERS = ("schema", "any")


@dataclass(frozen=True)
class SchemaOptions:
    """How a JSON Schema becomes a grammar.

    ``whitespace``: ``"compact"`` (default) admits no whitespace except one optional space after
    ``,`` and ``:`` (so both ``json.dumps`` styles are accepted and output can never run on in
    whitespace); ``"any"`` admits RFC 8259 whitespace between tokens; an ``int`` n admits exactly
    the ``json.dumps(doc, indent=n)`` layout down to 16 levels of nesting (deeper values are
    written as ``json.dumps(value, separators=(",", ": "))`` does).

    ``property_order``: ``"schema"`` (default) admits declared properties in the order the schema
    lists them, then undeclared ones; ``"any"`` admits any order (each property at most once; at
    most 8 declared properties per object).

    ``additional_properties``: the value assumed where the schema leaves ``additionalProperties``
    unset (the specification allows undeclared properties: True).

    ``strict``: a keyword that cannot be enforced exactly raises
    :class:`~grammask.errors.UnsupportedSchemaError`; with False it is dropped, warned about and
    listed in the grammar's ``notes``.

    ``count_lengths``: big length bounds (``maxLength``/``minLength``, ``{m,n}`` in a ``pattern``) are
    counted beside the lexer state (True, default: milliseconds at any bound; no token budgets yet),
    or unrolled into the lexer (False: token budgets work, but a bound past about 40 characters of
    any kind is refused).

    Raises :class:`~grammask.errors.ConfigurationError` for a value outside these.
    """

    whitespace: str | int = "compact"
    property_order: str = "schema"
    additional_properties: bool = True
    strict: bool = True
    count_lengths: bool = True

    def __post_init__(self) -> None:
        w = self.whitespace
        if w not in WHITESPACE_POLICIES and not (isinstance(w, int) and not isinstance(w, bool) and w >= 0):
            raise ConfigurationError(f"whitespace must be one of {WHITESPACE_POLICIES} or an indent width, not {w!r}")
        if self.property_order not in PROPERTY_ORDERS:
            raise ConfigurationError(f"property_order must be one of {PROPERTY_ORDERS}, not {self.property_order!r}")

    @classmethod
    def from_text(cls, whitespace: str, **options: object) -> SchemaOptions:
        """Options with ``whitespace`` given as text (``"compact"``, ``"any"`` or digits), as a command line has it.

        Raises :class:`~grammask.errors.ConfigurationError` for a value outside the options' ones.
        """
        return cls(whitespace=int(whitespace) if whitespace.isdigit() else whitespace, **options)
