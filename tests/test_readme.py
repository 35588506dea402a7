"""Every Python example and every ``grammask`` command line in README.md runs as written."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from grammask.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYTHON = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)
COMMANDS = [
    line
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.DOTALL)
    for line in block.splitlines()
    if line.startswith("grammask ")
]
CAT = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}


def _needs_model(text: str) -> bool:
    return "generate" in text


def test_readme_has_examples():
    assert len(PYTHON) >= 3 and len(COMMANDS) >= 2


@pytest.mark.parametrize("block", PYTHON, ids=[f"python{i}" for i in range(len(PYTHON))])
def test_python_example_runs(block, monkeypatch):
    if _needs_model(block):
        pytest.importorskip("torch", reason="the 'hf' extra is not installed")
    monkeypatch.chdir(ROOT)
    exec(compile(block, "README.md", "exec"), {"__name__": "readme_example"})  # noqa: S102 (the README's own code)


@pytest.mark.parametrize("line", COMMANDS, ids=[f"cmd{i}" for i in range(len(COMMANDS))])
def test_command_line_runs(line, tmp_path, monkeypatch, capsys):
    if _needs_model(line):
        pytest.importorskip("torch", reason="the 'hf' extra is not installed")
    (tmp_path / "cat.json").write_text(json.dumps(CAT))
    monkeypatch.chdir(tmp_path)
    assert cli_main(shlex.split(line, comments=True)[1:]) == 0, capsys.readouterr().err
