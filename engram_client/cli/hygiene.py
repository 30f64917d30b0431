"""``engram consolidate``, ``engram extract`` and ``engram settings``: the memory-hygiene RPCs from the command
line."""

from __future__ import annotations

import argparse

from engram_client.cli.commands import _out
from engram_client import EngramClient


def consolidate(args: argparse.Namespace, client: EngramClient) -> int:
    reply = client.consolidate(args.tenant, dry_run=args.dry_run)
    verb = "would consolidate" if args.dry_run else "consolidated"
    _out(f"{reply.clusters} clusters: {verb} {reply.consolidated} episodic memories"
         + (f"; {reply.restored} restored (their semantic memory was deleted)" if reply.restored else ""))
    for c in reply.consolidations:
        _out(f"  {c.memory_id or '(dry run)'} <- {', '.join(c.consolidates)}: {c.content[:100]}")
    return 0


def extract(args: argparse.Namespace, client: EngramClient) -> int:
    reply = client.extract(args.tenant, conversation=args.conversation, turns=args.turns)
    _out(f"{reply.facts} facts extracted: {len(reply.memory_ids)} memories written ({reply.pending} pending)")
    for memory_id in reply.memory_ids:
        _out(f"  {memory_id}")
    return 0


def settings(args: argparse.Namespace, client: EngramClient) -> int:
    """Prints each setting in effect and where it comes from; with --min-salience / --reset, changes them first."""
    if args.min_salience is not None or args.reset:
        reply = client.update_settings(args.tenant, min_salience=args.min_salience, reset=args.reset)
    else:
        reply = client.get_settings(args.tenant)
    for field in reply.effective.DESCRIPTOR.fields:
        own = reply.settings.HasField(field.name)
        _out(f"{field.name}: {getattr(reply.effective, field.name):.6g} "
             f"({'set for ' + args.tenant if own else 'server default: memory.' + field.name})")
    return 0
