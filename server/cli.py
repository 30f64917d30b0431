"""The ``engram`` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path


def _serve(args: argparse.Namespace) -> int:
    from server.app import build_app
    from server.config import load_config

    overrides: dict[str, object] = {}
    if args.listen:
        overrides["listen"] = args.listen
    if args.data_dir:
        overrides["data_dir"] = Path(args.data_dir)
    if args.log_level:
        overrides["log_level"] = args.log_level
    config = load_config(toml_path=Path(args.config) if args.config else None, overrides=overrides)
    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def main() -> None:
        app = build_app(config)
        if app.new_admin_key:
            sys.stdout.write(
                "\nA development admin key was created. It is shown once; keep it:\n\n"
                f"    ENGRAM_ADMIN_KEY={app.new_admin_key}\n\n")
            sys.stdout.flush()
        await app.serve_until_signal()

    asyncio.run(main())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engram", description="engram: long-term memory server for AI agents")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING (default from config: INFO)")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gRPC server")
    serve.add_argument("--listen", help="host:port (default 127.0.0.1:50051)")
    serve.add_argument("--data-dir", help="where memories live (default ./data)")
    serve.add_argument("--config", help="a TOML config file")
    serve.set_defaults(func=_serve)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
