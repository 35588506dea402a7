"""CPython's indentation rules as a Lark postlex: the reference semantics of the ``python`` built-in.

The grammar ``python.lark`` has one newline terminal, ``_NEWLINE``: a line break followed by any
blank or comment-only lines and then the next line's indentation (spaces, tabs, form feeds), or a
comment at the very end of the input. :class:`CPythonIndenter` turns the stream of tokens from the
lexer into the stream the parser reads, by the rules of CPython 3.11's tokenizer
(``Parser/tokenizer.c``). grammask's engine implements exactly these rules; this class is what
they are checked against (with Lark's LALR parser, in ``tests/test_python_grammar.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

from lark import Token
from lark.indenter import DedentError, Indenter

TAB_SIZE = 8
MAX_INDENT = 100
"""CPython's ``MAXINDENT``: an indentation stack may hold at most 99 levels above the first."""
MAX_PAREN = 200
"""CPython's ``MAXLEVEL``: at most 200 brackets may be open at once."""


class PythonIndentationError(DedentError):
    """Indentation CPython rejects (``IndentationError`` / ``TabError``); a Lark error, so parsing fails."""


class CPythonIndenter(Indenter):
    """Lark postlex with CPython 3.11's indentation rules (``tab_rule = "cpython"``).

    The rules, exactly (grammask's engine implements the same):

    1. **Brackets.** ``(``, ``[`` and ``{`` open, ``)``, ``]`` and ``}`` close a bracket (the tokens
       ``LPAR LSQB LBRACE`` / ``RPAR RSQB RBRACE``). While one is open, ``_NEWLINE`` tokens are
       dropped (implicit line joining); a close with none open is passed on (the parser rejects it).
       Opening a 201st bracket is an error (CPython: "too many nested parentheses").
    2. **Runs of newlines.** Outside brackets, consecutive ``_NEWLINE`` tokens (they can only be
       separated by ignored text, e.g. a line holding a backslash continuation) count as one: the
       parser receives one ``_NEWLINE``, and the indentation is that of the last one.
    3. **Measuring a line.** The indentation of a line is the text after the last line break of the
       ``_NEWLINE`` token before it. Starting from ``col = alt = 0``, for each character: a space adds
       1 to both; a tab sets ``col`` to the next multiple of 8 (``col = (col // 8 + 1) * 8``) and adds
       1 to ``alt``; a form feed sets both to 0.
    4. **Comparing.** The indentation stack starts as ``[(0, 0)]``. Before the first token of a line
       (a token that follows a ``_NEWLINE`` outside brackets), with ``(top_col, top_alt)`` the top:

       * ``col == top_col``: nothing is emitted; ``alt != top_alt`` is a TabError.
       * ``col > top_col``: ``alt <= top_alt`` is a TabError; otherwise ``(col, alt)`` is pushed and one
         ``_INDENT`` is emitted (pushing the 100th entry is an error: "too many levels of indentation").
       * ``col < top_col``: entries are popped, one ``_DEDENT`` each, while ``col`` is smaller than the
         top's; then ``col`` must equal the top's (else "unindent does not match any outer indentation
         level") and ``alt`` the top's ``alt`` (else TabError).

       ``_INDENT`` / ``_DEDENT`` come after the ``_NEWLINE`` and before the line's first token.
    5. **The first line** has no ``_NEWLINE`` before it: when the input's first token is not a
       ``_NEWLINE``, its line is measured from the text before it, and any nonzero ``col`` is an
       unexpected indent. (Lark's lexer drops that whitespace, so this class sees only the token's
       column: a first line indented by form feeds only, or whose leading whitespace is followed by a
       backslash continuation, is misjudged here. The engine sees the text and is exact.)
    6. **End of input.** If the last token passed on is not a ``_NEWLINE``, one is added (CPython
       ends the last line); a ``_NEWLINE`` run at the end is passed on without measuring the text after
       it (trailing blank lines never indent). Then one ``_DEDENT`` per stack entry above the first.

    Errors raise :class:`PythonIndentationError` (a Lark ``DedentError``), so ``Lark.parse`` fails.
    """

    NL_type = "_NEWLINE"
    OPEN_PAREN_types = ("LPAR", "LSQB", "LBRACE")
    CLOSE_PAREN_types = ("RPAR", "RSQB", "RBRACE")
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = TAB_SIZE
    tab_rule = "cpython"

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        self.paren_level = 0
        self.indent_level = [0]
        return self._cpython_process(stream)

    def _cpython_process(self, stream: Iterator[Token]) -> Iterator[Token]:
        stack = [(0, 0)]
        pending: Token | None = None  # the last _NEWLINE of a run not yet passed on
        last: Token | None = None
        first = True
        for tok in stream:
            if tok.type == self.NL_type:
                if self.paren_level == 0:
                    pending = tok
                first = False
                continue
            if first:
                first = False
                if tok.line == 1 and tok.column > 1:
                    raise PythonIndentationError(f"unexpected indent at line 1 (column {tok.column})")
            if pending is not None:
                yield pending
                yield from self._indent(stack, measure(_indent_text(pending)), pending)
                pending = None
            if tok.type in self.OPEN_PAREN_types:
                self.paren_level += 1
                if self.paren_level > MAX_PAREN:
                    raise PythonIndentationError("too many nested parentheses")
            elif tok.type in self.CLOSE_PAREN_types and self.paren_level > 0:
                self.paren_level -= 1
            last = tok
            yield tok
        if pending is not None:
            yield pending
        elif last is not None:
            yield Token.new_borrow_pos(self.NL_type, "", last)
        while len(stack) > 1:
            stack.pop()
            yield Token.new_borrow_pos(self.DEDENT_type, "", last) if last else Token(self.DEDENT_type, "")
        self.indent_level = [0]

    def _indent(self, stack: list[tuple[int, int]], where: tuple[int, int], tok: Token) -> Iterator[Token]:
        col, alt = where
        top_col, top_alt = stack[-1]
        if col == top_col:
            if alt != top_alt:
                raise PythonIndentationError(f"inconsistent use of tabs and spaces in indentation (line {tok.end_line})")
        elif col > top_col:
            if alt <= top_alt:
                raise PythonIndentationError(f"inconsistent use of tabs and spaces in indentation (line {tok.end_line})")
            if len(stack) + 1 > MAX_INDENT:
                raise PythonIndentationError("too many levels of indentation")
            stack.append((col, alt))
            yield Token.new_borrow_pos(self.INDENT_type, "", tok)
        else:
            while len(stack) > 1 and col < stack[-1][0]:
                stack.pop()
                yield Token.new_borrow_pos(self.DEDENT_type, "", tok)
            if col != stack[-1][0]:
                raise PythonIndentationError(f"unindent does not match any outer indentation level (line {tok.end_line})")
            if alt != stack[-1][1]:
                raise PythonIndentationError(f"inconsistent use of tabs and spaces in indentation (line {tok.end_line})")
        self.indent_level = [c for c, _ in stack]


def measure(indent: str) -> tuple[int, int]:
    """``(col, alt)`` of an indentation string by CPython's rule (tab stops of 8 and of 1, form feed resets)."""
    col = alt = 0
    for ch in indent:
        if ch == " ":
            col += 1
            alt += 1
        elif ch == "\t":
            col = (col // TAB_SIZE + 1) * TAB_SIZE
            alt += 1
        elif ch == "\f":
            col = alt = 0
    return col, alt


def _indent_text(tok: Token) -> str:
    text = str(tok)
    cut = max(text.rfind("\n"), text.rfind("\r"))
    return text[cut + 1 :] if cut >= 0 else ""
