"""Where grammask keeps downloaded and derived files (tokenizers, the default model, compiled grammars)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """``$GRAMMASK_CACHE`` or ``~/.cache/grammask``, joined with ``parts`` and created if missing."""
    root = Path(os.environ.get("GRAMMASK_CACHE") or Path.home() / ".cache" / "grammask")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
