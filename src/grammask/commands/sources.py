"""Grammar sources named on the command line: reading files with errors a user can act on."""

from __future__ import annotations

import json
from pathlib import Path

from grammask.errors import GrammarError


def read_text(path: Path) -> str:
    """The UTF-8 text of a grammar or schema file; raises :class:`GrammarError` if unreadable or not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise GrammarError(f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise GrammarError(f"cannot read {path}: not UTF-8 ({e})") from None


def read_schema(path: Path) -> object:
    """The JSON document of a JSON Schema file; raises :class:`GrammarError` if unreadable or not JSON."""
    try:
        return json.loads(read_text(path))
    except ValueError as e:
        raise GrammarError(f"{path} is not JSON: {e}") from None
