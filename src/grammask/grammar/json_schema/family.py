"""One lexer terminal per language, with overlaps resolved so that a context-free lexer stays exact.

grammask's lexer does not know the parser state: a lexeme that two terminals match is always
emitted as the one with the higher priority. A family holds the languages a grammar needs
(string values, property names, numbers), closes them under intersection of overlapping
members, and ranks them so that every member outranks the members that strictly contain it.
Then a lexeme ``w`` is always emitted as the smallest member containing it, and a position
that admits language ``L`` is exact when it accepts the members contained in ``L``.
"""

from __future__ import annotations

from typing import Protocol

from grammask.errors import NO_DEADLINE, Deadline


class Language(Protocol):
    """A language of lexemes; its questions raise :class:`~grammask.errors.CompileTimeoutError` once ``deadline`` has
    passed."""

    key: tuple

    def intersect(self, other, deadline: Deadline = NO_DEADLINE): ...

    def is_subset(self, other, deadline: Deadline = NO_DEADLINE) -> bool: ...

    def is_empty(self) -> bool: ...


class Family:
    """Languages keyed by :attr:`Language.key`, closed under intersection by :meth:`close`.

    ``deadline`` is checked before each pair of languages is compared or intersected, and by the languages'
    questions (raises :class:`~grammask.errors.CompileTimeoutError` once it has passed).
    """

    def __init__(self, deadline: Deadline = NO_DEADLINE) -> None:
        self.deadline = deadline
        self.members: dict[tuple, Language] = {}
        self._subset: dict[tuple[tuple, tuple], bool] = {}
        self._wide: tuple[int, list[tuple]] | None = None
        self._terminals: tuple[int, list[tuple]] | None = None
        self._within: dict[tuple, frozenset[tuple]] = {}
        self._within_size = 0
        self.closed = True

    def add(self, language: Language) -> tuple:
        if language.key not in self.members:
            self.members[language.key] = language
            self.closed = False
        return language.key

    def subset(self, a: tuple, b: tuple) -> bool:
        if _single(a) and _single(b):
            return a == b
        found = self._subset.get((a, b))
        if found is None:
            self.deadline.check("the overlaps of the JSON Schema's languages")
            found = a == b or self.members[a].is_subset(self.members[b], self.deadline)
            self._subset[(a, b)] = found
        return found

    def close(self) -> None:
        """Add the intersection of every two overlapping members neither of which contains the other."""
        pending = list(self.members)
        done: list[tuple] = []
        done_sets: list[tuple] = []  # the members of done that are not single strings
        while pending:
            a = pending.pop()
            for b in done_sets if _single(a) else done:  # two single strings are disjoint
                self.deadline.check("the overlaps of the JSON Schema's languages")
                if self.subset(a, b) or self.subset(b, a):
                    continue
                both = self.members[a].intersect(self.members[b], self.deadline)
                if not both.is_empty() and both.key not in self.members:
                    self.members[both.key] = both
                    pending.append(both.key)
            done.append(a)
            if not _single(a):
                done_sets.append(a)
        self.closed = True

    def contained_in(self, keys) -> list[tuple]:
        """The non-empty members contained in at least one of the members ``keys``, in the members' order."""
        found = frozenset().union(*(self.within(k) for k in keys))
        return [m for m in self.terminal_members() if m in found]

    def within(self, key: tuple) -> frozenset[tuple]:
        """The non-empty members contained in the member ``key`` (remembered until the members change)."""
        if self._within_size != len(self.members):
            self._within, self._within_size = {}, len(self.members)
        found = self._within.get(key)
        if found is None:
            if _single(key):  # a single string holds only itself
                found = frozenset((key,))
            else:
                found = frozenset(m for m in self.terminal_members() if self.subset(m, key))
            self._within[key] = found
        return found

    def terminal_members(self) -> list[tuple]:
        """The members that need a terminal (all but the empty language; remembered until the members change)."""
        if self._terminals is None or self._terminals[0] != len(self.members):
            self._terminals = (len(self.members), [m for m, language in self.members.items() if not language.is_empty()])
        return self._terminals[1]

    def priority(self, key: tuple) -> int:
        """The number of members strictly containing ``key``: smaller languages rank higher."""
        others = self._sets() if _single(key) else self.members  # no single string strictly holds another
        return sum(1 for other in others if other != key and self.subset(key, other) and not self.subset(other, key))

    def _sets(self) -> list[tuple]:
        """The members that are not single strings (kept until the members change)."""
        if self._wide is None or self._wide[0] != len(self.members):
            self._wide = (len(self.members), [m for m in self.members if not _single(m)])
        return self._wide[1]


def _single(key: tuple) -> bool:
    """Whether ``key`` names one string (a string literal's key, ``("literal", text)``)."""
    return key[0] == "literal" and len(key) == 2
