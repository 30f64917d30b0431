"""The ``engram`` command line: ``serve`` and ``config`` are the server's commands (``server.cli``, imported only
when one of them runs); every other command is a client (``engram_client.cli``) and never imports the server,
so ``engram search`` starts fast and works where only the client's dependencies are installed.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from engram_client.cli import add_commands, connection_flags


def _serve(args: argparse.Namespace) -> int:
    from server.cli import serve

    return serve(args)


def _config(args: argparse.Namespace) -> int:
    from server.cli import config

    return config(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram", description="engram: long-term memory server for AI agents")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING (default from config: INFO)")
    connection_flags(parser, default=None)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gRPC server")
    serve.add_argument("--listen", help="host:port (default 127.0.0.1:50051)")
    serve.add_argument("--data-dir", help="where memories live (default ./data)")
    serve.add_argument("--config", help="a TOML config file")
    serve.add_argument("--metrics-listen", help="host:port for Prometheus /metrics (default: off)")
    serve.add_argument("--console-listen", help="host:port for the web console (default: off; README Console)")
    serve.add_argument("--log-format", choices=("text", "json"))
    serve.add_argument("--ray", action="store_true",
                       help="run on Ray Serve (needs the cluster extra and object_store.bucket; README Running on a cluster)")
    serve.add_argument("--address", dest="ray_address",
                       help="with --ray: the Ray cluster to join (default cluster.address; \"\": a local one)")
    serve.set_defaults(func=_serve)
    config = sub.add_parser("config", help="print the effective config as TOML (or the option table)")
    config.add_argument("--config", help="a TOML config file")
    config.add_argument("--defaults", action="store_true", help="the built-in defaults only")
    config.add_argument("--markdown", action="store_true", help="the README's option table (defaults)")
    config.add_argument("--advanced", action="store_true",
                        help="with --markdown: the [advanced] table (docs/reference/options-removed.md)")
    config.set_defaults(func=_config)
    add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if args.command != "serve" and args.log_level:
        logging.basicConfig(level=args.log_level.upper())
    try:
        return int(args.func(args))
    except Exception as exc:  # the CLI's one place to turn failures into a message and an exit code
        return _report(exc)


def _report(exc: Exception) -> int:
    import grpc

    from engram_client.cli.io import RecordError

    if isinstance(exc, BrokenPipeError):  # e.g. `engram export t | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        sys.stderr.write(f"engram: {exc.code().name}: {exc.details()}\n")
        return 1
    if isinstance(exc, (RecordError, OSError, ValueError)) or _is_config_error(exc):
        sys.stderr.write(f"engram: {exc}\n")
        return 2
    raise exc


def _is_config_error(exc: Exception) -> bool:
    """``server.errors.ConfigError`` (from serve or config) without importing the server for a client's error:
    such an error exists only once its module is loaded."""
    errors = sys.modules.get("server.errors")
    return errors is not None and isinstance(exc, errors.ConfigError)
