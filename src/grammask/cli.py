"""The ``grammask`` command line: one subcommand module per job under :mod:`grammask.commands`."""

from __future__ import annotations

import argparse
import sys

from grammask.commands import compile as compile_command
from grammask.commands import generate as generate_command
from grammask.errors import GrammaskError

# Each module defines ``add_parser(subparsers)`` and ``run(args) -> int``.
COMMANDS = {"generate": generate_command, "compile": compile_command}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grammask", description="Exact grammar-constrained decoding for LLMs.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command].run(args)
    except GrammaskError as e:
        print(f"grammask {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
