"""The server's commands of the ``engram`` script (``engram_cli``): ``serve`` runs the server, ``config`` prints
the effective config. The client commands live in ``engram_client.cli`` and never import this package.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path


def serve(args: argparse.Namespace) -> int:
    from server.app import build_app
    from server.config import load_config
    from server.grpc.interceptors import REQUEST_ID
    from server.logs import configure_logging

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

    async def main() -> None:
        if getattr(args, "ray", False):
            try:
                from server.cluster.ingress import build_cluster_app
            except ImportError as exc:
                from server.errors import ConfigError

                raise ConfigError(f"engram serve --ray needs ray[serve] ({exc}): pip install -r "
                                  "requirements-cluster.txt, or pip install 'engram[cluster]'") from exc

            app = await build_cluster_app(config, deploy=config.cluster.deploy)
        else:
            app = build_app(config)
        if app.new_admin_key:
            sys.stdout.write(
                "\nA development admin key was created. It is shown once; keep it:\n\n"
                f"    ENGRAM_ADMIN_KEY={app.new_admin_key}\n\n")
            sys.stdout.flush()
        await app.serve_until_signal()

    asyncio.run(main())
    return 0


def config(args: argparse.Namespace) -> int:
    from server.config import ServerConfig, load_config
    from server.config_doc import to_markdown, to_toml

    toml_path = Path(args.config) if args.config else None
    config = ServerConfig() if args.defaults or args.markdown else load_config(toml_path=toml_path)
    advanced = getattr(args, "advanced", False)   # --markdown --advanced: the [advanced] table
    sys.stdout.write(to_markdown(config, advanced=advanced) if args.markdown else to_toml(config))
    return 0
