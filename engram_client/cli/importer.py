"""``engram import``: records of a JSONL or CSV file written in batches, every outcome tied to its file line.

Big files: the file is read twice, one record at a time (constant memory whatever its size): once to check every
line and count them, then to send. ``--window`` Writes are in flight at once; the progress bar shows
memories/s and the time left.

Resumable: every record's key is the SHA-256 of the file's name, its line number and the line itself, and each
Write carries an idempotency key made of its records' keys. An import that was interrupted (killed, a lost
connection) and is run again with the same file and batch size sends the same Writes with the same keys: the
server answers those it already applied from its record (server/engine/idempotent.py) and applies the rest,
so every memory is written once. The server keeps a tenant's last 10,000 answered calls for 24 hours: resume
within that (at --batch-size 128, 1.28M records).

Without ``--skip-invalid`` the first bad record stops the import and the message says which file line it was,
why, and how much of the file was already written; with it, bad records (unparseable or refused by the
server) go to ``<file>.rejects.jsonl`` beside the input, each with its line and reason, and the rest is
imported. The server refuses a whole Write for one bad memory (``memories[i]...``): the import maps i back to
its record, sets it aside and resends the others (under a key of their own).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

import grpc

from engram_client.cli.commands import _out
from engram_client.cli.io import Progress, Record, RecordError, iter_records, rejects_path
from engram_proto.v1 import service_pb2 as spb
from engram_client import EngramClient

_INDEX_RE = re.compile(r"^memories\[(\d+)\]")
SHOWN_REJECTS = 20   # file lines named in the summary; the rejects file has them all


def _refused(exc: grpc.RpcError) -> int | None:
    """The batch position a Write refusal names (``memories[2].content ...``), else None."""
    if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:   # type: ignore[attr-defined]
        return None
    m = _INDEX_RE.match(exc.details() or "")                # type: ignore[attr-defined]
    return int(m.group(1)) if m else None


def _reason(exc: grpc.RpcError) -> str:
    return _INDEX_RE.sub("", exc.details() or "").lstrip(". ")  # type: ignore[attr-defined]


def record_key(identity: str, record: Record) -> str:
    """One record's key: its file's identity, its line number and the line's text."""
    return hashlib.sha256(f"{identity}\n{record.line}\n{record.raw}".encode()).hexdigest()


def write_key(identity: str, batch: list[Record]) -> str:
    """A Write's idempotency key (at most 128 characters of [A-Za-z0-9._:~-]): the same records, the same key."""
    digest = hashlib.sha256("".join(record_key(identity, r) for r in batch).encode()).hexdigest()
    return f"import:{digest[:48]}"


class Importer:
    """Sends batches (from any thread) and keeps the outcome: counts, written lines, rejects (streamed to the
    rejects file as they come)."""

    def __init__(self, client: EngramClient, tenant: str, path: Path, *, skip_invalid: bool) -> None:
        self.client, self.tenant, self.path, self.skip_invalid = client, tenant, path, skip_invalid
        self.identity = path.name
        self.counts: Counter[str] = Counter()
        self.written = 0
        self.first_line = self.last_line = 0
        self.reject_lines: list[int] = []   # the first SHOWN_REJECTS
        self._rejects: TextIO | None = None
        self._lock = threading.Lock()

    def reject(self, record: Record, reason: str) -> None:
        if not self.skip_invalid:
            raise RecordError(f"{self.path.name}:{record.line}", f"{reason}\n{self._so_far(record.line)}")
        with self._lock:
            if self._rejects is None:
                self._rejects = rejects_path(self.path).open("w", encoding="utf-8")
            self._rejects.write(json.dumps({"line": record.line, "error": reason, "record": record.raw},
                                           ensure_ascii=False) + "\n")
            self.counts["rejected"] += 1
            if len(self.reject_lines) < SHOWN_REJECTS:
                self.reject_lines.append(record.line)

    def _so_far(self, line: int) -> str:
        with self._lock:
            done, lines = self.written, (self.first_line, self.last_line)
        where = f" (file lines {lines[0]}-{lines[1]})" if done else ""
        return (f"{done} record(s) of {self.path.name} were imported into {self.tenant}{where}; line {line} and "
                "everything after it were not. Fix the line, or rerun with --skip-invalid to import the rest and "
                f"write the rejects to {rejects_path(self.path).name}")

    def send(self, batch: list[Record]) -> int:
        """Writes ``batch`` (its refused records set aside, the rest resent); the records written."""
        while batch:
            try:
                reply = self.client.write(self.tenant, [r.memory for r in batch],
                                          idempotency_key=write_key(self.identity, batch))
            except grpc.RpcError as exc:
                i = _refused(exc)
                if i is None or i >= len(batch):
                    raise
                if not self.skip_invalid:   # what comes before the bad record is written, then the import stops
                    self.send(batch[:i])
                self.reject(batch[i], _reason(exc))
                batch = batch[:i] + batch[i + 1:]
                continue
            with self._lock:
                for result in reply.results:
                    self.counts[spb.WriteOutcome.Name(result.outcome).removeprefix("WRITE_OUTCOME_").lower()] += 1
                self.written += len(batch)
                self.first_line = min(self.first_line or batch[0].line, batch[0].line)
                self.last_line = max(self.last_line, batch[-1].line)
            return len(batch)
        return 0

    def close(self) -> Path | None:
        if self._rejects is None:
            return None
        self._rejects.close()
        return rejects_path(self.path)


def checked_count(path: Path, fmt: str, importer: Importer) -> int:
    """The first pass: every record parsed (none kept); without --skip-invalid the first bad one raises, before
    anything is written. The records' count."""
    total = 0
    for r in iter_records(path, fmt=fmt):
        total += 1
        if r.memory is None and not importer.skip_invalid:
            importer.reject(r, r.error)
    return total


def batches(records: Iterator[Record], size: int, importer: Importer) -> Iterator[list[Record]]:
    """The parsed records in batches of ``size`` (the same batches on every run of the same file); unparseable
    ones are rejected on the way."""
    batch: list[Record] = []
    for r in records:
        if r.memory is None:
            importer.reject(r, r.error)
            continue
        batch.append(r)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def import_file(args: argparse.Namespace, client: EngramClient) -> int:
    path = Path(args.file)
    importer = Importer(client, args.tenant, path, skip_invalid=args.skip_invalid)
    total = checked_count(path, args.format, importer)
    progress = Progress(total, label=f"importing {path.name}", enabled=True if args.progress else None)
    if args.no_progress:
        progress.enabled = False
    window: deque[tuple[int, Future[int]]] = deque()

    def settle_oldest() -> None:
        size, future = window.popleft()
        future.result()   # a failure stops the import (what is in flight still finishes)
        progress.advance(size, extra=" ".join(f"{k} {v}" for k, v in sorted(importer.counts.items())))

    rejected_before = 0
    try:
        with ThreadPoolExecutor(max(1, args.window), thread_name_prefix="import") as pool:
            for batch in batches(iter_records(path, fmt=args.format), args.batch_size, importer):
                while len(window) >= max(1, args.window):
                    settle_oldest()
                parsed_rejects = importer.counts["rejected"] - rejected_before   # lines set aside while reading
                rejected_before = importer.counts["rejected"]
                if parsed_rejects:
                    progress.advance(parsed_rejects)
                window.append((len(batch), pool.submit(importer.send, batch)))
            while window:
                settle_oldest()
    finally:
        progress.close()
        target = importer.close()
    summary = ", ".join(f"{v} {k}" for k, v in sorted(importer.counts.items(), key=lambda kv: kv[0] == "rejected"))
    of = f" of {total}" if importer.written != total else ""
    _out(f"imported {importer.written}{of} records into {args.tenant}: {summary}")
    if target is not None:
        more = " ..." if importer.counts["rejected"] > len(importer.reject_lines) else ""
        _out(f"{importer.counts['rejected']} rejected (file lines {', '.join(map(str, importer.reject_lines))}{more}): "
             f"written to {target}")
    return 0
