"""The house's shape: no import cycles, and every import follows the layer map in docs/architecture.md."""

from __future__ import annotations

import importlib
import re
import types
from pathlib import Path

import pytest
from import_graph import cycles, import_graph

import grammask

ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _layer_map() -> dict[str, set[str]]:
    """The ``layers`` block of docs/architecture.md: group -> the groups it may import."""
    (block,) = re.findall(r"```layers\n(.*?)```", ARCHITECTURE.read_text(encoding="utf-8"), flags=re.DOTALL)
    allowed = {}
    for line in block.splitlines():
        if not line.strip():
            continue
        group, _, deps = line.partition("->")
        allowed[group.strip()] = {d.strip() for d in deps.split(",") if d.strip()}
    return allowed


def _group(module: str, groups: set[str]) -> str | None:
    """The longest group name that is ``module`` or a package above it (names without ``grammask.``)."""
    name = module.removeprefix("grammask").lstrip(".") or "grammask"
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in groups:
            return candidate
    return None


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_layer_map_covers_every_module():
    groups = set(_layer_map())
    assert [m for m in import_graph() if _group(m, groups) is None] == []


def test_imports_follow_the_layer_map():
    allowed = _layer_map()
    groups = set(allowed)
    unknown = {d for deps in allowed.values() for d in deps} - groups
    assert not unknown, f"the layer map names groups it does not define: {sorted(unknown)}"
    wrong = []
    for module, deps in import_graph().items():
        group = _group(module, groups)
        for dep in deps:
            target = _group(dep, groups)
            if target != group and target not in allowed[group]:
                wrong.append(f"{module} -> {dep} ({group} -> {target})")
    assert wrong == [], "imports the layer map in docs/architecture.md does not allow"


def test_layer_map_is_acyclic():
    allowed = _layer_map()
    graph = {g: {d for d in deps if d != g} for g, deps in allowed.items()}
    assert cycles(graph) == []


@pytest.mark.parametrize("name", ["grammask.mask_tables", "grammask.compiler", "grammask.compiled", "grammask.engine"])
def test_modules_are_not_shadowed(name):
    assert isinstance(importlib.import_module(name), types.ModuleType)


def test_top_level_names():
    assert callable(grammask.compile) and isinstance(grammask.Compiler, type)
    for name in grammask.__all__:
        assert hasattr(grammask, name), name
    assert issubclass(grammask.ConfigurationError, ValueError)
    assert issubclass(grammask.ConfigurationError, grammask.GrammaskError)
