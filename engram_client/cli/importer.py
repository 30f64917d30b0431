"""``engram import``: records of a JSONL or CSV file written in batches, every outcome tied to its file line.

Without ``--skip-invalid`` the first bad record stops the import and the message says which file line it was,
why, and how much of the file was already written; with it, bad records (unparseable or refused by the
server) go to ``<file>.rejects.jsonl`` beside the input, each with its line and reason, and the rest is
imported. The server refuses a whole Write for one bad memory (``memories[i]...``): the import maps i back to
its record, sets it aside and resends the others.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

import grpc

from engram_client.cli.commands import _out
from engram_client.cli.io import Progress, Record, RecordError, chunks, rejects_path, scan_records
from engram_proto.v1 import service_pb2 as spb
from engram_client import EngramClient

_INDEX_RE = re.compile(r"^memories\[(\d+)\]")


def _refused(exc: grpc.RpcError) -> int | None:
    """The batch position a Write refusal names (``memories[2].content ...``), else None."""
    if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:   # type: ignore[attr-defined]
        return None
    m = _INDEX_RE.match(exc.details() or "")                # type: ignore[attr-defined]
    return int(m.group(1)) if m else None


def _reason(exc: grpc.RpcError) -> str:
    return _INDEX_RE.sub("", exc.details() or "").lstrip(". ")  # type: ignore[attr-defined]


class Importer:
    def __init__(self, client: EngramClient, tenant: str, path: Path, *, skip_invalid: bool) -> None:
        self.client, self.tenant, self.path, self.skip_invalid = client, tenant, path, skip_invalid
        self.counts: Counter[str] = Counter()
        self.rejects: list[tuple[Record, str]] = []
        self.written_lines: list[int] = []

    def reject(self, record: Record, reason: str) -> None:
        if not self.skip_invalid:
            raise RecordError(f"{self.path.name}:{record.line}", f"{reason}\n{self._so_far(record.line)}")
        self.rejects.append((record, reason))
        self.counts["rejected"] += 1

    def _so_far(self, line: int) -> str:
        done = len(self.written_lines)
        where = f" (file lines {self.written_lines[0]}-{self.written_lines[-1]})" if done else ""
        return (f"{done} record(s) of {self.path.name} were imported into {self.tenant}{where}; line {line} and "
                "everything after it were not. Fix the line, or rerun with --skip-invalid to import the rest and "
                f"write the rejects to {rejects_path(self.path).name}")

    def send(self, batch: list[Record]) -> None:
        while batch:
            try:
                reply = self.client.write(self.tenant, [r.memory for r in batch])
            except grpc.RpcError as exc:
                i = _refused(exc)
                if i is None or i >= len(batch):
                    raise
                if not self.skip_invalid:   # what comes before the bad record is written, then the import stops
                    self.send(batch[:i])
                self.reject(batch[i], _reason(exc))
                batch = batch[:i] + batch[i + 1:]
                continue
            for r, result in zip(batch, reply.results, strict=True):
                self.counts[spb.WriteOutcome.Name(result.outcome).removeprefix("WRITE_OUTCOME_").lower()] += 1
                self.written_lines.append(r.line)
            return

    def write_rejects(self) -> Path | None:
        if not self.rejects:
            return None
        target = rejects_path(self.path)
        with target.open("w", encoding="utf-8") as f:
            for record, reason in self.rejects:
                f.write(json.dumps({"line": record.line, "error": reason, "record": record.raw},
                                   ensure_ascii=False) + "\n")
        return target


def import_file(args: argparse.Namespace, client: EngramClient) -> int:
    path = Path(args.file)
    records = scan_records(path, fmt=args.format)
    importer = Importer(client, args.tenant, path, skip_invalid=args.skip_invalid)
    good = []
    for r in records:                       # without --skip-invalid nothing is written when a line cannot parse
        if r.memory is None:
            importer.reject(r, r.error)
        else:
            good.append(r)
    progress = Progress(len(records), label=f"importing {path.name}", enabled=True if args.progress else None)
    if args.no_progress:
        progress.enabled = False
    try:
        for batch in chunks(good, args.batch_size):
            importer.send(list(batch))
            progress.advance(len(batch), extra=" ".join(f"{k} {v}" for k, v in importer.counts.items()))
    finally:
        progress.close()
    summary = ", ".join(f"{v} {k}" for k, v in sorted(importer.counts.items(), key=lambda kv: kv[0] == "rejected"))
    done = len(importer.written_lines)
    of = f" of {len(records)}" if done != len(records) else ""
    _out(f"imported {done}{of} records into {args.tenant}: {summary}")
    target = importer.write_rejects()
    if target is not None:
        lines = ", ".join(str(r.line) for r, _ in importer.rejects[:20])
        _out(f"{len(importer.rejects)} rejected (file lines {lines}{' ...' if len(importer.rejects) > 20 else ''}): "
             f"written to {target}")
    return 0
