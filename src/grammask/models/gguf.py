"""GGUF model files converted once to a Hugging Face directory (tokenizer.json + safetensors + config) that
transformers loads in about a second. Needs the 'hf' extra (torch, transformers, gguf, accelerate) only to
convert; a converted directory is found without it.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
from pathlib import Path
from time import perf_counter

from grammask.errors import ModelError
from grammask.fetch import cache_dir

_SOURCE_FILE = "grammask-source.txt"


def converted_gguf(gguf: Path, *, target: Path | None = None) -> Path:
    """The directory holding ``gguf`` converted to tokenizer.json + safetensors + config (converted on first use).

    ``target`` defaults to a cache directory named after the file and its size and modification time.
    Raises :class:`~grammask.errors.ModelError` when the file cannot be converted (see :func:`convert_gguf`).
    """
    gguf = gguf.resolve()
    if target is None:
        st = gguf.stat()
        digest = hashlib.sha256(f"{gguf}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
        target = cache_dir("models") / f"{gguf.stem}-{digest}"
    if target.is_dir():
        return target
    convert_gguf(gguf, target)
    return target


def convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantize a GGUF model into a fast-loading Hugging Face directory at ``target``.

    The directory appears whole or not at all (written beside it, then renamed), so its existence means done.
    Raises :class:`~grammask.errors.ModelError` when a package of the 'hf' extra is missing or the file
    cannot be read.
    """
    for module in ("torch", "transformers", "gguf", "accelerate"):
        try:
            __import__(module)
        except ImportError:
            raise ModelError(f"reading GGUF files needs the {module!r} package: pip install 'grammask[hf]'") from None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    print(f"grammask: converting {gguf.name} to safetensors (once; later loads are fast)", file=sys.stderr, flush=True)
    start = perf_counter()
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise ModelError(f"cannot read the GGUF model {gguf}: {e}") from None
    # transformers refuses to save a model it considers GGUF-quantized; the weights are already dequantized.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _SOURCE_FILE).write_text(f"{gguf}\n")
        try:
            tmp.rename(target)
        except OSError:
            if not target.is_dir():  # else another process finished the same conversion first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"grammask: converted in {perf_counter() - start:.0f} s into {target}", file=sys.stderr, flush=True)
