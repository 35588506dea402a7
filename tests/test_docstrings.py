"""Every public function that raises says so in its docstring (issue 17).

The check reads ``src/grammask`` with :mod:`ast` (nothing is imported): a public function or method
(module level, or in a public class; a name not starting with ``_``, plus ``__init__`` and
``__post_init__``, whose docstring may be the class's) whose own body holds a ``raise`` statement must
have a docstring containing "raise". Nested functions and numba kernels (``@nb.njit``/``@njit``) are
not checked. A second check: no public function raises a bare built-in exception; bad input is a
:mod:`grammask.errors` class (``ConfigurationError`` for a bad argument).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "grammask"

CONSTRUCTORS = ("__init__", "__post_init__")
BARE_BUILTINS = {"Exception", "ValueError", "TypeError", "RuntimeError", "KeyError", "IndexError", "AssertionError"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _is_numba_kernel(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in fn.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "njit":
            return True
    return False


def _raises(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Raise]:
    """The ``raise`` statements of ``fn``'s own body (not those of functions or classes nested in it)."""
    found, todo = [], list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, ast.Raise):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def public_functions(source: str):
    """``(qualified name, function, docstrings)`` of the public functions and methods of a module's source.

    ``docstrings`` is the function's docstring, with the class's appended for a constructor. Numba
    kernels are left out: they run compiled, where only built-in exceptions exist.
    """
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not node.name.startswith("_") and not _is_numba_kernel(node):
                yield node.name, node, ast.get_docstring(node) or ""
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if (item.name.startswith("_") and item.name not in CONSTRUCTORS) or _is_numba_kernel(item):
                    continue
                doc = ast.get_docstring(item) or ""
                if item.name in CONSTRUCTORS:
                    doc += "\n" + (ast.get_docstring(node) or "")
                yield f"{node.name}.{item.name}", item, doc


def undocumented_raises(source: str) -> list[str]:
    """Public functions of ``source`` that raise but whose docstring does not say "raise"."""
    return [
        name
        for name, fn, doc in public_functions(source)
        if _raises(fn) and "raise" not in doc.lower()
    ]


def bare_builtin_raises(source: str) -> list[str]:
    """Public functions of ``source`` that raise a bare built-in exception (``raise ValueError(...)``)."""
    out = []
    for name, fn, _ in public_functions(source):
        for r in _raises(fn):
            exc = r.exc.func if isinstance(r.exc, ast.Call) else r.exc
            if isinstance(exc, ast.Name) and exc.id in BARE_BUILTINS:
                out.append(f"{name} raises {exc.id}")
    return out


def _modules():
    for path in sorted(SRC.rglob("*.py")):
        yield path.relative_to(SRC.parent).as_posix(), path.read_text(encoding="utf-8")


# --- the checker on small sources ----------------------------------------------------------------

_SAMPLE = '''
import numba as nb
from numba import njit


def silent(x):
    """Returns x."""
    if x < 0:
        raise ValueError("negative")
    return x


def told(x):
    """Returns x; raises GrammaskError for a negative x."""
    if x < 0:
        raise GrammaskError("negative")
    return x


def _private(x):
    raise GrammaskError("private")


def outer():
    """Defines a helper that raises; outer itself does not."""
    def inner():
        raise GrammaskError("nested")
    return inner


@nb.njit(cache=True)
def kernel(x):
    raise ValueError("compiled")


@njit
def kernel2(x):
    raise ValueError("compiled")


class Public:
    """A class whose constructor Raises GrammaskError for a bad value."""

    def __init__(self, x):
        if x < 0:
            raise GrammaskError("bad")

    def method(self):
        try:
            return 1
        except KeyError:
            raise

    def _helper(self):
        raise GrammaskError("private")


class Quiet:
    """Says nothing."""

    def __init__(self, x):
        if x < 0:
            raise GrammaskError("bad")


class _Private:
    def method(self):
        raise GrammaskError("private class")
'''


def test_checker_flags_exactly_the_undocumented_raisers():
    assert undocumented_raises(_SAMPLE) == ["silent", "Public.method", "Quiet.__init__"]


def test_checker_flags_bare_builtins_in_public_functions_only():
    assert bare_builtin_raises(_SAMPLE) == ["silent raises ValueError"]


def test_checker_passes_a_documented_function_and_fails_it_undocumented():
    documented = 'def f():\n    """Raises :class:`GrammarError` always."""\n    raise GrammarError("x")\n'
    assert undocumented_raises(documented) == []
    assert undocumented_raises(documented.replace("Raises", "Fails with")) == ["f"]


# --- grammask itself -----------------------------------------------------------------------------


def test_the_checker_sees_grammask_public_functions():
    names = {f"{module}:{name}" for module, source in _modules() for name, fn, _ in public_functions(source) if _raises(fn)}
    assert len(names) > 40
    for expected in ("grammask/vocab.py:Vocabulary.decode", "grammask/matcher.py:Matcher.advance",
                     "grammask/grammar/gbnf.py:grammar_from_gbnf", "grammask/vocab.py:Vocabulary.__init__"):
        assert expected in names


def test_every_public_function_that_raises_says_so():
    missing = [f"{module}:{name}" for module, source in _modules() for name in undocumented_raises(source)]
    assert missing == [], "docstrings that do not say what the function raises:\n" + "\n".join(missing)


def test_no_public_function_raises_a_bare_builtin():
    bare = [f"{module}:{what}" for module, source in _modules() for what in bare_builtin_raises(source)]
    assert bare == [], "use a grammask.errors class (ConfigurationError for a bad argument):\n" + "\n".join(bare)
