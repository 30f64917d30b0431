"""The ``engram`` command line of the client distribution (``engram-grpc``): the client commands
(``engram_client.cli``: tenant, key, write, search, import, export, mcp...) talk to a running server over gRPC and
never import the server, so ``engram search`` starts fast and works where only grpcio and protobuf are installed.

``serve`` and ``config`` are the server's: the ``engram-server`` distribution declares them as entry points of
the group ``engram.commands`` (each a callable ``(argv) -> exit code`` that parses its own flags), loaded only when
one of them runs. Without that distribution they say which package to install.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
from collections.abc import Callable

from engram_client.cli import add_commands, connection_flags

COMMANDS_GROUP = "engram.commands"
SERVER_DISTRIBUTION = "engram-server"
SERVER_COMMANDS = {  # the help lines of the commands the server distribution adds
    "serve": "run the gRPC server (engram serve --help for its flags)",
    "config": "print the effective config as TOML (or the option table)",
}


def server_command(name: str) -> Callable[[list[str]], int] | None:
    """The installed ``engram.commands`` entry point ``name``, loaded; None when no distribution declares it."""
    for entry in importlib.metadata.entry_points(group=COMMANDS_GROUP, name=name):
        return entry.load()  # type: ignore[no-any-return]
    return None


def _version() -> str:
    try:
        return importlib.metadata.version("engram-grpc")
    except importlib.metadata.PackageNotFoundError:
        return ""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram", description="engram: long-term memory server for AI agents")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING (default from config: INFO)")
    connection_flags(parser, default=None)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_ in SERVER_COMMANDS.items():  # flags are the server's own: passed on unparsed
        sub.add_parser(name, help=help_, add_help=False)
    add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and args.command not in SERVER_COMMANDS:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if args.command != "serve" and args.log_level:
        logging.basicConfig(level=args.log_level.upper())
    try:
        if args.command in SERVER_COMMANDS:
            return _server(args.command, [*(["--log-level", args.log_level] if args.log_level else []), *rest])
        return int(args.func(args))
    except Exception as exc:  # the CLI's one place to turn failures into a message and an exit code
        return _report(exc)


def _server(name: str, argv: list[str]) -> int:
    command = server_command(name)
    if command is None:
        version = _version()
        sys.stderr.write(f"engram {name} needs the {SERVER_DISTRIBUTION} package (pip install "
                         f"{SERVER_DISTRIBUTION}{'==' + version if version else ''})\n")
        return 2
    return int(command(argv))


def _report(exc: Exception) -> int:
    import grpc

    from engram_client.cli.io import RecordError

    if isinstance(exc, BrokenPipeError):  # e.g. `engram export t | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        sys.stderr.write(f"engram: {exc.code().name}: {exc.details()}\n")
        return 1
    if isinstance(exc, (RecordError, OSError, ValueError)):
        sys.stderr.write(f"engram: {exc}\n")
        return 2
    raise exc

