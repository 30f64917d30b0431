"""The ``engram`` command line's client side: every command but ``serve`` and ``config`` is a client built on
the SDK (``engram_client``) and talks to a running server over gRPC. ``engram_cli`` puts them beside the
server's commands under one ``engram`` script.

Client commands find the server and the key through ``--address`` / ``--key`` or the environment
(``ENGRAM_ADDRESS``, ``ENGRAM_KEY``, falling back to ``ENGRAM_ADMIN_KEY``), read once by
``engram_client.config.load_client_config``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import Any

TYPES = ("episodic", "semantic", "procedural")
STATUSES = ("active", "pending", "superseded", "expired", "archived")


def _mcp(args: argparse.Namespace) -> int:
    """``engram mcp``: the MCP server (engram_integrations.mcp, the ``mcp`` extra) over stdio or HTTP."""
    from engram_client.config import load_client_config

    try:
        from engram_integrations.mcp import serve_http, serve_stdio
    except ImportError as exc:
        sys.stderr.write(f"engram mcp needs the mcp extra (pip install 'engram-grpc[mcp]'): {exc}\n")
        return 2
    cfg = load_client_config(address=args.address, key=args.key, timeout_s=args.timeout)
    if args.transport == "stdio":
        asyncio.run(serve_stdio(address=cfg.address, key=cfg.key, tenant_id=args.tenant or "", timeout_s=cfg.timeout_s))
    else:  # each HTTP request brings its own key as its bearer credential
        asyncio.run(serve_http(address=cfg.address, listen=args.listen, path=args.path, tenant_id=args.tenant or "",
                               timeout_s=cfg.timeout_s))
    return 0


def _client_command(run: Callable[[argparse.Namespace, Any], int]) -> Callable[[argparse.Namespace], int]:
    def command(args: argparse.Namespace) -> int:
        from engram_client import EngramClient
        from engram_client.config import load_client_config

        cfg = load_client_config(address=args.address, key=args.key, timeout_s=args.timeout)
        with EngramClient(cfg.address, key=cfg.key, timeout_s=cfg.timeout_s) as client:
            return run(args, client)

    return command


def add_commands(sub: Any) -> None:
    """The client commands (tenant, key, write, search, consolidate, extract, import, export, info, stats, mcp,
    audit) as subcommands of ``sub``."""
    from engram_client.cli import commands as c
    from engram_client.cli.hygiene import consolidate, extract, settings
    from engram_client.cli.importer import import_file

    common = argparse.ArgumentParser(add_help=False)  # the connection flags, also after the command
    connection_flags(common, default=argparse.SUPPRESS)

    def add(name: str, run: Callable[[argparse.Namespace, Any], int], help_: str, parent: Any = sub) -> Any:
        p = parent.add_parser(name, help=help_, parents=[common])
        p.set_defaults(func=_client_command(run))
        return p

    tenant = sub.add_parser("tenant", help="create, list or delete tenants (admin key)").add_subparsers(
        dest="action", required=True)
    add("create", c.tenant_create, "create a tenant", tenant).add_argument("tenant")
    add("list", c.tenant_list, "tenants this key covers", tenant)
    p = add("delete", c.tenant_delete, "delete a tenant and purge its memories", tenant)
    p.add_argument("tenant")
    p.add_argument("--yes", action="store_true", help="confirm the purge")

    key = sub.add_parser("key", help="create, revoke or rotate API keys (admin key)").add_subparsers(
        dest="action", required=True)
    p = add("create", c.key_create, "create a key; prints its secret once", key)
    p.add_argument("name")
    p.add_argument("--tenant", action="append", help="a tenant id the key covers (repeatable)")
    p.add_argument("--prefix", action="append", help="a tenant id prefix the key covers, e.g. acme/ (repeatable)")
    p.add_argument("--admin", action="store_true", help="an admin key (tenants and keys)")
    add("revoke", c.key_revoke, "revoke a key by id", key).add_argument("key_id")
    add("rotate", c.key_rotate, "new secret for a key id; the old one stops working", key).add_argument("key_id")

    p = add("write", c.write, "write one memory")
    p.add_argument("tenant")
    p.add_argument("content")
    p.add_argument("--type", dest="type_", choices=TYPES, default="semantic")
    p.add_argument("--importance", type=float)
    p.add_argument("--confidence", type=float)
    p.add_argument("--entity", action="append")
    p.add_argument("--source-ref", default="")
    p.add_argument("--scope", default="")
    p.add_argument("--slot", default="", help="the memory's key (slot), e.g. budget: a newer one supersedes it")
    p.add_argument("--pinned", action="store_true")

    p = add("search", c.search, "search memories; prints a table with the score breakdown")
    p.add_argument("tenant")
    p.add_argument("query")
    p.add_argument("-k", "--top-k", type=int, default=10)
    p.add_argument("--type", action="append", choices=TYPES)
    p.add_argument("--entity", action="append")
    p.add_argument("--rerank-depth", type=int)
    p.add_argument("--include-pending", action="store_true")
    p.add_argument("--context", action="store_true", help="also print the prompt-ready context block")
    p.add_argument("--json", action="store_true")
    p.add_argument("--gate", action="store_true", help="the recall gate: no search when the text is small talk")

    p = add("consolidate", consolidate, "fold repeated episodic memories into semantic ones now")
    p.add_argument("tenant")
    p.add_argument("--dry-run", action="store_true", help="list the clusters, change nothing")

    p = add("extract", extract, "run the server's configured extractor on a conversation's recent turns now")
    p.add_argument("tenant")
    p.add_argument("--conversation", default="", help="the turns' source_ref before '#' (else their scope)")
    p.add_argument("--turns", type=int, default=0, help="recent turns to send (default: the server's window, 10)")

    p = add("settings", settings, "show or change a tenant's settings (its own key or an admin key)")
    p.add_argument("tenant")
    p.add_argument("--min-salience", type=float, help="skip writes below this salience (0 = never); this tenant only")
    p.add_argument("--reset", action="append", default=[], metavar="NAME",
                   help="return a setting (e.g. min_salience) to the server's default (repeatable)")

    p = add("import", import_file, "import memories from JSONL or CSV (batched writes in flight, progress bar; run again to resume)")
    p.add_argument("tenant")
    p.add_argument("file")
    p.add_argument("--format", choices=("jsonl", "csv"), default="", help="default: from the file extension")
    p.add_argument("--batch-size", type=int, default=128,
                   help="records per Write; keep it when resuming an import (the Writes' keys depend on it)")
    p.add_argument("--window", type=int, default=4, help="Writes in flight at once")
    p.add_argument("--progress", action="store_true", help="draw the progress bar even when stderr is no tty")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--skip-invalid", action="store_true",
                   help="import the valid records; write the rejects (line, reason, record) to FILE.rejects.jsonl")

    p = add("export", c.export, "export memories as JSONL (default: active and pending)")
    p.add_argument("tenant")
    p.add_argument("file", nargs="?", help="default: stdout")
    p.add_argument("--status", action="append", choices=STATUSES)
    p.add_argument("--type", action="append", choices=TYPES)

    add("info", c.info, "server version, models, limits")
    p = add("stats", c.stats, "loaded tenants, index tiers, memory budget (admin key)")
    p.add_argument("tenant", nargs="?")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("mcp", help="serve engram's tools to MCP clients (agents) over stdio or streamable HTTP",
                       parents=[common])
    p.add_argument("--tenant", help="the tenant the tools act on (default: the one tenant the key covers)")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    p.add_argument("--listen", default="127.0.0.1:8765", help="http: host:port (port 0: any free port)")
    p.add_argument("--path", default="/mcp", help="http: the endpoint path")
    p.set_defaults(func=_mcp)
    p = add("audit", c.audit, "a tenant's audit log")
    p.add_argument("tenant")
    p.add_argument("--op", action="append", help="only these ops: write, merge, supersede, delete, search, ...")
    p.add_argument("--memory", help="only entries naming this memory id")
    p.add_argument("--limit", type=int, default=50, help="the last N entries (0: all)")
    p.add_argument("--json", action="store_true")


def connection_flags(parser: argparse.ArgumentParser, *, default: Any) -> None:
    parser.add_argument("--address", default=default,
                        help="server host:port (default ENGRAM_ADDRESS or 127.0.0.1:50051)")
    parser.add_argument("--key", default=default, help="API key (default ENGRAM_KEY, else ENGRAM_ADMIN_KEY)")
    parser.add_argument("--timeout", type=float, default=default,
                        help="seconds per call, retries included (default ENGRAM_TIMEOUT_S or 30)")
