"""The on-disk format of compiled grammars: one uncompressed ``.npz`` of plain arrays plus JSON metadata.

Loading never unpickles anything (``allow_pickle=False``). The zip container keeps a CRC-32
of every array, which reading checks, so a corrupt or truncated file is detected; the
metadata names the cache key, so a file for another grammar, vocabulary or format version is
never used. Any problem reading a file raises :class:`~grammask.errors.CacheError`; callers rebuild.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from grammask.errors import CacheError

_META = "__meta__"


def save_arrays(path: Path, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Write arrays and metadata atomically (a temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = dict(arrays)
    payload[_META] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_arrays(path: Path, expected_key: str) -> tuple[dict[str, np.ndarray], dict]:
    """Read a file written by :func:`save_arrays`; CacheError if missing, corrupt, or for another key."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise CacheError(f"no cache file at {path}") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise CacheError(f"cache file {path} is unreadable ({e})") from None
    try:
        meta = json.loads(arrays.pop(_META).tobytes().decode())
    except (KeyError, ValueError, UnicodeDecodeError) as e:
        raise CacheError(f"cache file {path} has no valid metadata ({e})") from None
    if meta.get("key") != expected_key:
        raise CacheError(f"cache file {path} is stale (built for another grammar, vocabulary or version)")
    return arrays, meta
