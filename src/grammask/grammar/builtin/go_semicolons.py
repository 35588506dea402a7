"""Go's automatic semicolon insertion, as a Lark postlex over the built-in Go grammar's tokens.

The Go specification (section "Semicolons"): when the input is broken into tokens, a semicolon is
automatically inserted into the token stream immediately after a line's final token if that token
is an identifier, an integer, floating-point, imaginary, rune or string literal, one of the
keywords ``break``, ``continue``, ``fallthrough`` or ``return``, or one of the operators and
punctuation ``++``, ``--``, ``)``, ``]`` or ``}``. A general comment containing newlines acts like a
newline; other comments act like spaces. go/scanner also ends the last line at the end of input.

The grammar ``go.lark`` lexes with Lark's basic lexer and this postlex turns its token stream into
the stream the parser reads. The rule, stated over terminal names so that an engine can implement it
without running this code (the class attributes below are the whole configuration):

* The lexer emits newline tokens (``nl_types``: ``_NL``, one per ``\\n``, and ``_ML_COMMENT``, a
  ``/* */`` comment with a newline in it). Spaces, tabs, ``\\r``, line comments (which stop before
  their newline) and one-line general comments are ``%ignore``-d and never reach the postlex.
* The postlex keeps one bit, ``armed``: whether the last token passed to the parser is in
  ``trigger_types``. It starts false.
* A token of ``nl_types``: if ``armed``, emit one token of type ``semicolon_type`` (value ``"\\n"``)
  and set ``armed`` false; otherwise emit nothing.
* Any other token: emit it unchanged; ``armed`` becomes whether its type is in ``trigger_types``.
  An explicit ``;`` is such a token (SEMICOLON is not a trigger), so ``x;\\n`` gives one semicolon.
* At the end of input (``insert_at_eof``): if ``armed``, emit one ``semicolon_type`` token before
  the end.

``always_accept`` names the terminals no rule uses, which Lark (and an engine) must still lex: the
newline types, which the postlex consumes, and the ``_BAD_*`` terminals, which exist only to make
erroneous lexemes one token; those reach the parser and are rejected there.

For an LR engine the bit needs no storage: every token passed to the parser is shifted at once, so
``armed`` is whether the accessing symbol of the state on top of the stack (the terminal it was
entered by) is in ``trigger_types`` (the initial state is not armed). A newline terminal then acts as
SEMICOLON in armed states and as an ignored terminal elsewhere; a mask allows a pending lexeme that
can still become a newline terminal iff the top state is not armed or the parser accepts
SEMICOLON; end of input is allowed iff the parser accepts the end after SEMICOLON (armed) or
directly (not armed).

Equivalence with go/scanner: the scanner inserts the semicolon at the first newline (or at a
comment that contains or is followed on its line by one, which ends the line the same way) after a
trigger token, or at EOF; it never inserts more than one per line, and a token on the same line
disarms it. That is the rule above, token for token.
"""

from __future__ import annotations

from collections.abc import Iterator

from lark import Token
from lark.lark import PostLex


class GoSemicolons(PostLex):
    """Lark postlex for ``go.lark``: newlines become SEMICOLON after trigger tokens (see the module doc)."""

    nl_types: tuple[str, ...] = ("_NL", "_ML_COMMENT")
    semicolon_type: str = "SEMICOLON"
    trigger_types: frozenset[str] = frozenset(
        {
            "NAME",
            "NUMBER",
            "RUNE",
            "STRING",
            "RAW_STRING",
            "IMPORT_PATH",
            "BREAK",
            "CONTINUE",
            "FALLTHROUGH",
            "RETURN",
            "INC",
            "DEC",
            "RPAR",
            "RSQB",
            "RBRACE",
        }
    )
    insert_at_eof: bool = True
    always_accept: tuple[str, ...] = (
        "_NL",
        "_ML_COMMENT",
        "_BAD_NUMBER",
        "_BAD_COMMENT",
    )

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        armed = False
        last: Token | None = None
        for token in stream:
            if token.type in self.nl_types:
                if armed:
                    yield Token.new_borrow_pos(self.semicolon_type, "\n", token)
                    armed = False
                continue
            armed = token.type in self.trigger_types
            last = token
            yield token
        if armed and self.insert_at_eof and last is not None:
            yield Token.new_borrow_pos(self.semicolon_type, "\n", last)
