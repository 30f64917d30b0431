"""The server's commands of the ``engram`` script: ``serve`` runs the server, ``config`` prints the effective
config. The script belongs to the client distribution (``engram-grpc``, ``engram_cli``), which finds these two
through the ``engram.commands`` entry points that this distribution (``engram-server``) declares, each a callable
``(argv) -> exit code``; the client side never imports this package, nor this package the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path


def serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram serve", description="run the gRPC server")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING (default from config: INFO)")
    parser.add_argument("--listen", help="host:port (default 127.0.0.1:50051)")
    parser.add_argument("--data-dir", help="where memories live (default ./data)")
    parser.add_argument("--config", help="a TOML config file")
    parser.add_argument("--metrics-listen", help="host:port for Prometheus /metrics (default: off)")
    parser.add_argument("--console-listen", help="host:port for the web console (default: off; README Console)")
    parser.add_argument("--log-format", choices=("text", "json"))
    parser.add_argument("--ray", action="store_true",
                        help="run on Ray Serve (needs the cluster extra and object_store.bucket; README Running on a "
                             "cluster)")
    parser.add_argument("--address", dest="ray_address",
                        help="with --ray: the Ray cluster to join (default cluster.address; \"\": a local one)")
    return parser


def config_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram config",
                                     description="print the effective config as TOML (or the option table)")
    parser.add_argument("--log-level", help=argparse.SUPPRESS)  # the script's global option, passed on
    parser.add_argument("--config", help="a TOML config file")
    parser.add_argument("--defaults", action="store_true", help="the built-in defaults only")
    parser.add_argument("--markdown", action="store_true", help="the README's option table (defaults)")
    parser.add_argument("--advanced", action="store_true",
                        help="with --markdown: the [advanced] table (docs/reference/options-removed.md)")
    return parser


def serve_command(argv: list[str]) -> int:
    """``engram serve ARGV``: the ``engram.commands`` entry point ``serve``."""
    return _run(serve, serve_parser().parse_args(argv))


def config_command(argv: list[str]) -> int:
    """``engram config ARGV``: the ``engram.commands`` entry point ``config``."""
    return _run(config, config_parser().parse_args(argv))


def _run(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """A config the server refuses is a message and exit code 2, as the client commands report bad input."""
    from server.errors import ConfigError

    try:
        return command(args)
    except ConfigError as exc:
        sys.stderr.write(f"engram: {exc}\n")
        return 2


def serve(args: argparse.Namespace) -> int:
    from server.app import build_app
    from server.config import load_config
    from server.grpc.interceptors import REQUEST_ID
    from server.logs import configure_logging
    from server.store.dirlock import hold_data_dir

    overrides: dict[str, object] = {}
    for name in ("listen", "log_level", "metrics_listen", "console_listen", "log_format"):
        if getattr(args, name, None) is not None:
            overrides[name] = getattr(args, name)
    if args.data_dir:
        overrides["data_dir"] = Path(args.data_dir)
    if getattr(args, "ray_address", None) is not None:
        overrides["cluster"] = {"address": args.ray_address}
    config = load_config(toml_path=Path(args.config) if args.config else None, overrides=overrides)
    configure_logging(level=config.log_level, fmt=config.log_format, request_id=REQUEST_ID)
    # Before any model loads: a second server on this directory stops here, in a second, with the holder's pid.
    held = None if getattr(args, "ray", False) else hold_data_dir(config.data_dir)

    async def main() -> None:
        if getattr(args, "ray", False):
            try:
                from server.cluster.ingress import build_cluster_app
            except ImportError as exc:
                from server.errors import ConfigError

                raise ConfigError(f"engram serve --ray needs ray[serve] ({exc}): pip install -r "
                                  "requirements-cluster.txt, or pip install 'engram-server[cluster]'") from exc

            app = await build_cluster_app(config, deploy=config.cluster.deploy)
        else:
            app = build_app(config)
        if app.new_admin_key:
            sys.stdout.write(
                "\nA development admin key was created. It is shown once; keep it:\n\n"
                f"    ENGRAM_ADMIN_KEY={app.new_admin_key}\n\n")
            sys.stdout.flush()
        await app.serve_until_signal()

    try:
        asyncio.run(main())
    finally:
        if held is not None:
            held.close()
    return 0


def config(args: argparse.Namespace) -> int:
    from server.config import ServerConfig, load_config
    from server.config_doc import to_markdown, to_toml

    toml_path = Path(args.config) if args.config else None
    config = ServerConfig() if args.defaults or args.markdown else load_config(toml_path=toml_path)
    advanced = getattr(args, "advanced", False)   # --markdown --advanced: the [advanced] table
    sys.stdout.write(to_markdown(config, advanced=advanced) if args.markdown else to_toml(config))
    return 0
