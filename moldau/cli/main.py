"""The ``moldau`` command: one module per subcommand, each with ``add_parser``."""

from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand modules, in help order. A module that is missing is skipped, so the command keeps
# working while a subcommand is being written.
SUBCOMMANDS = ["serve", "topics", "produce", "consume", "metadata", "configs", "groups",
               "transactions", "log_dirs", "leader_election", "reassign_partitions", "proxy",
               "schema_registry", "rest_proxy",
               "doctor", "perf", "pipeline", "rest", "registry", "dev_cluster"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="moldau", description="Moldau: a Kafka-compatible event streaming platform."
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"moldau {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"moldau.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"moldau.cli.{name}":
                continue
            raise
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
