"""The ``grammask`` command line: one subcommand module per job under :mod:`grammask.commands`."""

from __future__ import annotations

import argparse
import importlib
import sys

from grammask.errors import GrammaskError

# Each module defines ``add_parser(subparsers)`` and ``run(args) -> int``.
COMMANDS = ("generate", "compile", "demo")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grammask", description="Exact grammar-constrained decoding for LLMs.")
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"grammask.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"grammask.commands.{name}":
                raise
            continue
        module.add_parser(sub)
        modules[name] = module
    args = parser.parse_args(argv)
    try:
        return modules[args.command].run(args)
    except GrammaskError as e:
        print(f"grammask {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
