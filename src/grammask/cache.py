"""The disk cache of compiled grammars and their budget tables, and its file format.

A file is one uncompressed ``.npz`` of plain arrays plus JSON metadata.
Loading never unpickles anything (``allow_pickle=False``). The zip container keeps a CRC-32
of every array, which reading checks, so a corrupt or truncated file is detected; the
metadata names the cache key, so a file for another grammar, vocabulary or format version is
never used. Any problem reading a file raises :class:`~grammask.errors.CacheError`; callers rebuild.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from grammask.errors import CacheError

log = logging.getLogger("grammask")

_META = "__meta__"
T = TypeVar("T")


class DiskCache:
    """A folder of cache files, one per (key, kind); ``folder=None`` is a cache that keeps nothing.

    Files are named by the key's first 32 hex digits and the kind (``<key>.npz`` for compiled
    grammars, ``<key>.<kind>.npz`` for what is built beside them). A file that is corrupt, stale
    or unreadable is reported in the log and rebuilt; one that cannot be written is reported and
    skipped, so the cache never makes a compile fail.
    """

    def __init__(self, folder: Path | None):
        self.folder = folder

    def path(self, key: str, kind: str = "") -> Path | None:
        """Where the file of ``key`` and ``kind`` lies (None for a cache that keeps nothing)."""
        if self.folder is None:
            return None
        return self.folder / f"{key[:32]}{'.' + kind if kind else ''}.npz"

    def get_or_build(
        self,
        key: str,
        kind: str,
        build: Callable[[], T],
        encode: Callable[[T], tuple[dict[str, np.ndarray], dict]],
        decode: Callable[[dict[str, np.ndarray], dict], T],
    ) -> tuple[T, bool]:
        """The value cached for ``key`` and ``kind``, or ``build()`` stored there; and whether it came from disk.

        ``decode`` may raise KeyError or TypeError for a file that lacks a field: that file is rebuilt too.
        A missing, corrupt or stale file is rebuilt and one that cannot be written is skipped, each with a
        warning (no :class:`CacheError` leaves); what ``build`` raises propagates.
        """
        found = self.get(key, kind, decode)
        if found is not None:
            return found, True
        value = build()
        if self.folder is not None:
            self.put(key, kind, *encode(value))
        return value, False

    def get(self, key: str, kind: str, decode: Callable[[dict[str, np.ndarray], dict], T]) -> T | None:
        """The value cached for ``key`` and ``kind``, or None (a corrupt or stale file is reported in the log and
        ignored; ``decode`` may raise KeyError or TypeError for a file that lacks a field)."""
        path = self.path(key, kind)
        if path is not None and path.exists():
            try:
                arrays, meta = load_arrays(path, f"{kind}:{key}")
                try:
                    return decode(arrays, meta)
                except (KeyError, TypeError) as e:
                    raise CacheError(f"cache file {path} lacks a field ({e})") from None
            except CacheError as e:
                log.warning("grammask: %s; rebuilding it", e)
        return None

    def put(self, key: str, kind: str, arrays: dict[str, np.ndarray], meta: dict) -> None:
        """Store arrays and metadata for ``key`` and ``kind`` (a file that cannot be written is reported in the
        log and skipped)."""
        path = self.path(key, kind)
        if path is not None:
            try:
                save_arrays(path, arrays, {**meta, "key": f"{kind}:{key}"})
            except OSError as e:
                log.warning("grammask: could not write the cache file %s (%s)", path, e)

    def clear(self) -> int:
        """Delete every cache file in the folder; the number deleted."""
        if self.folder is None or not self.folder.is_dir():
            return 0
        files = list(self.folder.glob("*.npz"))
        for f in files:
            f.unlink(missing_ok=True)
        return len(files)


def save_arrays(path: Path, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Write arrays and metadata atomically (a temporary file renamed into place).

    Raises ``OSError`` when the file cannot be written (the temporary file is removed).
    """
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
    """Read a file written by :func:`save_arrays`; raises :class:`CacheError` if missing, corrupt, or for another key."""
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
