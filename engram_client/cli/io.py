"""The CLI's file and terminal side: JSONL/CSV records ↔ MemoryInput, a progress bar, readable tables.

Needs only the SDK's dependencies (grpcio, protobuf); nothing here talks to the server.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor

from engram_proto.v1 import messages_pb2 as pb
from engram_client import memory_input

# Fields an export writes that are the server's, not the writer's: an import skips them.
EXPORT_ONLY = frozenset({"memory_id", "status", "access_count", "superseded_by", "source_refs", "updated_at_ms",
                         "supersedes", "salience", "normalized", "consolidated_into", "consolidates"})
_INPUT_FIELDS = pb.MemoryInput.DESCRIPTOR.fields_by_name
_LIST_SEPARATOR = "|"


class RecordError(ValueError):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.message = message


def _csv_value(field: FieldDescriptor, text: str) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return json.loads(text)  # metadata: a JSON object
    if field.is_repeated:
        return [part.strip() for part in text.split(_LIST_SEPARATOR) if part.strip()]
    if field.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return float(text)
    if field.type in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_INT32):
        return int(text)
    if field.type == FieldDescriptor.TYPE_BOOL:
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"not a boolean: {text!r}")
        return text.lower() in ("true", "1", "yes")
    return text


def record_to_input(record: dict[str, Any], *, where: str) -> pb.MemoryInput:
    data = {k: v for k, v in record.items() if k not in EXPORT_ONLY}
    unknown = sorted(set(data) - set(_INPUT_FIELDS))
    if unknown:
        raise RecordError(where, f"unknown field(s) {', '.join(unknown)}; known: {', '.join(_INPUT_FIELDS)}")
    try:
        return memory_input(data)
    except (ValueError, json_format.ParseError) as exc:
        raise RecordError(where, str(exc)) from exc


@dataclass(frozen=True)
class Record:
    """One record of an import file: its line (CSV: the row's line), its raw text, and the parsed input or
    why it could not be parsed."""

    line: int
    raw: str
    memory: pb.MemoryInput | None = None
    error: str = ""


def scan_records(path: Path, *, fmt: str = "") -> list[Record]:
    """Every record of a JSONL or CSV file (by extension unless ``fmt``), each parsed or with its error.
    CSV: a header row of MemoryInput field names; lists separated by '|'; metadata as a JSON object."""
    return list(iter_records(path, fmt=fmt))


def iter_records(path: Path, *, fmt: str = "") -> Iterator[Record]:
    """:func:`scan_records` one record at a time: a file of any size in constant memory."""
    fmt = fmt or ("csv" if path.suffix.lower() == ".csv" else "jsonl")
    with path.open(newline="" if fmt == "csv" else None, encoding="utf-8") as handle:
        if fmt == "csv":
            reader = csv.DictReader(handle)
            for row in reader:
                n = reader.line_num
                raw = json.dumps(row, ensure_ascii=False)
                try:
                    values = {k: _csv_value(_INPUT_FIELDS[k], v) if k in _INPUT_FIELDS else v
                              for k, v in row.items() if k and v not in (None, "")}
                    yield Record(n, raw, record_to_input(values, where=f"{path.name}:{n}"))
                except RecordError as exc:
                    yield Record(n, raw, error=exc.message)
                except (ValueError, json.JSONDecodeError) as exc:
                    yield Record(n, raw, error=str(exc))
        else:
            for n, line in enumerate(handle, start=1):
                if line.strip():
                    yield _jsonl_record(n, line.rstrip("\n"))


def _jsonl_record(n: int, line: str) -> Record:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        return Record(n, line, error=f"not JSON: {exc}")
    if isinstance(record, str):
        record = {"content": record}
    if not isinstance(record, dict):
        return Record(n, line, error="each line must be a JSON object (or a string)")
    try:
        return Record(n, line, record_to_input(record, where=str(n)))
    except RecordError as exc:
        return Record(n, line, error=exc.message)


def read_records(path: Path, *, fmt: str = "") -> list[pb.MemoryInput]:
    """Every record of the file, checked before anything is sent; the first bad one raises RecordError."""
    out = []
    for r in scan_records(path, fmt=fmt):
        if r.memory is None:
            raise RecordError(f"{path.name}:{r.line}", r.error)
        out.append(r.memory)
    return out


def rejects_path(path: Path) -> Path:
    """Where ``engram import --skip-invalid`` writes the records it could not import: beside the input."""
    return path.with_name(path.name + ".rejects.jsonl")


def memory_record(m: pb.Memory) -> dict[str, Any]:
    """A stored memory as one JSONL record; ``engram import`` reads it back (new ids, no supersede links)."""
    out = json_format.MessageToDict(m, preserving_proto_field_name=True)
    for name, value in list(out.items()):
        field = pb.Memory.DESCRIPTOR.fields_by_name[name]
        if field.type == FieldDescriptor.TYPE_INT64 and not field.is_repeated:
            out[name] = int(value)
    for name, prefix in (("type", "MEMORY_TYPE_"), ("status", "MEMORY_STATUS_")):
        if name in out:
            out[name] = str(out[name]).removeprefix(prefix).lower()
    return out


class Progress:
    """``label [#####.....] 640/1000  64%  213/s  extra`` on one line of stderr, redrawn in place."""

    def __init__(self, total: int, *, label: str, stream: TextIO | None = None, enabled: bool | None = None,
                 width: int = 30) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.width = width
        self.done = 0
        self.started = time.monotonic()
        self._last_draw = 0.0

    def advance(self, n: int, *, extra: str = "") -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._last_draw > 0.1 or self.done >= self.total):
            self._last_draw = now
            self.stream.write("\r" + self.line(extra=extra))
            self.stream.flush()

    def line(self, *, extra: str = "") -> str:
        frac = min(self.done / self.total, 1.0)
        filled = int(frac * self.width)
        rate = self.done / max(time.monotonic() - self.started, 1e-9)
        bar = "#" * filled + "." * (self.width - filled)
        eta = f" ETA {_clock(max(0, self.total - self.done) / rate)}" if 0 < self.done < self.total else ""
        return f"{self.label} [{bar}] {self.done}/{self.total} {frac:4.0%} {rate:6.0f}/s{eta} {extra}".rstrip()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    """``42s``, ``7m05s``, ``3h12m``."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, stretch: int = -1) -> str:
    """A plain aligned table; column ``stretch`` (default: the last) is cut to fit the terminal."""
    cells = [[str(c) for c in headers], *[[_cell(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    limit = shutil.get_terminal_size((120, 24)).columns
    index = stretch % len(headers)
    room = limit - (sum(widths) - widths[index]) - 2 * (len(headers) - 1)
    widths[index] = max(12, min(widths[index], room))
    lines = []
    for n, row in enumerate(cells):
        parts = [(c if len(c) <= widths[i] else c[:widths[i] - 1] + "…").ljust(widths[i]) for i, c in enumerate(row)]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).replace("\n", " ")


def age(ms: int, *, now_ms: int | None = None) -> str:
    if not ms:
        return "-"
    seconds = max(0, ((now_ms if now_ms is not None else int(time.time() * 1000)) - ms) // 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
