"""Every exception grammask raises on bad input, in one place.

All derive from :class:`GrammaskError`, so ``except grammask.GrammaskError`` catches
anything the library reports about its inputs. Messages name the offending piece
(terminal, rule, keyword, token id, file) so a user can act on them. :class:`Deadline` lives here
too: it is what raises :class:`CompileTimeoutError`, and every layer may import this module.
"""

from __future__ import annotations

import gc
import time


class GrammaskError(Exception):
    """Base class of all errors grammask reports about its inputs."""


class ConfigurationError(GrammaskError, ValueError):
    """An argument has a wrong type or value (an unknown option, a mask row of the wrong width)."""


class GrammarError(GrammaskError):
    """A grammar cannot be loaded or compiled (syntax, undefined names, empty language)."""


class GrammarSyntaxError(GrammarError):
    """The grammar source does not parse; the message carries the line and column."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(f"{message}{where}")


class UndefinedSymbolError(GrammarError):
    """A rule uses a rule or terminal that is not defined."""


class EmptyLanguageError(GrammarError):
    """The grammar (or one of its terminals) derives no finite sentence."""


class GrammarConflictError(GrammarError):
    """The grammar is not LALR(1): the message names the conflicting rules and terminal."""


class UnsupportedRegexError(GrammarError):
    """A terminal's regex uses a feature that has no finite-automaton meaning (lookaround, backreference), or a language's
    regex is too long to write out."""


class UnsupportedSchemaError(GrammarError):
    """A JSON Schema keyword cannot be enforced exactly; the message names it and its JSON pointer."""


class VocabularyError(GrammaskError):
    """A tokenizer file or object cannot be turned into a vocabulary."""


class CanonicalError(VocabularyError):
    """A tokenizer's canonical tokenizations cannot be decided exactly (an unsupported normalizer,
    pre-tokenizer or model); the message names the part at fault."""


class TokenError(GrammaskError):
    """A token id is out of range, or is not allowed in the matcher's current state."""


class TokenOutOfRangeError(TokenError):
    """A token id outside ``[0, vocab.n_logits)``."""


class TokenRejectedError(TokenError):
    """``advance`` was given a token the current mask does not allow; the state is unchanged.

    ``token_id`` is the rejected token; ``reason`` says why in words (the grammar, the end of
    output, or the token budget).
    """

    def __init__(self, token_id: int, reason: str):
        self.token_id = token_id
        self.reason = reason
        super().__init__(f"token {token_id} {reason}")


class EngineTokenRejectedError(TokenRejectedError, ValueError):
    """A serving engine gave a request's grammar a token its mask did not allow (the state is unchanged).

    Also a ``ValueError``: SGLang's scheduler catches that to abort the one request rather than the server.
    """


class TextRejectedError(GrammaskError):
    """A text given to a matcher (a prefix to start after) cannot begin a sentence of the grammar.

    ``position`` is the byte offset (in the text's UTF-8) of the first byte after which no sentence
    can follow.
    """

    def __init__(self, position: int, message: str):
        self.position = position
        super().__init__(message)


class MatcherStateError(GrammaskError):
    """An operation that the matcher's state does not permit (rollback past the start, advance after EOS)."""


class CacheError(GrammaskError):
    """A compiled-grammar cache file is unreadable, corrupt or stale (normally rebuilt, not raised)."""


class BudgetError(GrammaskError):
    """A token budget too small for any sentence of the grammar, or a grammar whose budgets cannot be guaranteed."""


class BudgetUnsupportedError(BudgetError):
    """The grammar cannot have token budgets at all (its LALR(1) conflicts were resolved as Lark does)."""


class ModelError(GrammaskError):
    """A language model cannot be found, fetched, converted or run."""


class FetchError(GrammaskError):
    """A file cannot be downloaded (registry unreachable, unknown package, checksum mismatch)."""


class DecodingError(GrammaskError):
    """A generation request cannot be run: a bad decoding parameter, or a prompt that does not fit the model."""


class CompileTimeoutError(GrammarError):
    """Compiling a grammar ran past its time limit; ``grammar`` and ``phase`` say which and where."""

    def __init__(self, grammar: str, phase: str, seconds: float):
        self.grammar = grammar
        self.phase = phase
        self.seconds = seconds
        super().__init__(f"compiling grammar {grammar!r} took more than {seconds:.3g} s (stopped in {phase})")


class Deadline:
    """The time by which one compile must end: long loops call :meth:`check` with their phase.

    ``seconds`` None means no limit. Cooperative: nothing is interrupted between checks. A compile stopped
    by its deadline still has to let go of what it built before its caller sees the error (1.9 million objects, a
    big schema's shapes, take 0.15 s to free), so a check counts that too: the objects the compile holds are the
    collector's allocation count, which grows while :mod:`grammask.gc_pause` keeps the collector off (process-wide:
    compiles on other threads count too, which only makes the check earlier).
    """

    def __init__(self, seconds: float | None, grammar: str = "grammar"):
        self.seconds = seconds
        self.grammar = grammar
        self._end = None if seconds is None else time.monotonic() + seconds

    def check(self, phase: str) -> None:
        """Raise :class:`CompileTimeoutError` naming ``phase`` if the time is up (freeing what is held included)."""
        if self._end is not None and time.monotonic() + gc.get_count()[0] * _FREE_SECONDS_PER_OBJECT > self._end:
            raise CompileTimeoutError(self.grammar, phase, self.seconds or 0.0)


def check_timeout(timeout: float | None) -> float | None:
    """``timeout`` if it is None or a positive number of seconds; raises ConfigurationError otherwise."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0):
        raise ConfigurationError(f"timeout must be a positive number of seconds or None, not {timeout!r}")
    return timeout


_FREE_SECONDS_PER_OBJECT = 1.3e-7  # measured on the project's CPU box: 78-140 ns per object held (0.16 s for 2.0 million
# shape objects, 0.13 s for 0.95 million of a schema whose objects hold more)

NO_DEADLINE = Deadline(None)
"""The deadline that never passes (the default of every function that takes one)."""
