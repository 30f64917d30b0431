"""Where a server's time goes while it ingests: py-spy samples of the server process during one client's Writes
of 128 (~1 KB turns or short ones), summed by stage of the write path.

Each sample (one busy thread at one instant) is put in the first stage whose marker its stack holds, read from
the innermost frame out; the shares are of all busy samples. Needs py-spy (``pip install py-spy``; ptrace).

    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.ingest.profile --kind long --n 512 --name long
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.ingest.run import RESULTS, client_for, command_line, cpu_model, start_server, write_all
from benchmarks.ingest.texts import long_turns, short_turns

# (stage, markers): a frame "function (path:line)" matches a marker (function, path part) when its function starts
# with the first ("" = any) and its path holds the second; frames are checked innermost first.
STAGES: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("embed: forward pass", (("forward", "models/"), ("_forward", "server/engine/ingest"), ("embed", "models/"))),
    ("embed: tokenize", (("tokenize", "models/"), ("_encode", "models/"))),
    ("dedupe lookups", (("near_duplicates", ""), ("_duplicate_of", ""), ("batch_neighbours", ""))),
    ("WAL group commit", (("", "server/store/wal"), ("commit", "server/store/"), ("fsync", ""))),
    ("FAISS add", (("add", "server/index/"),)),
    ("Lucene add / commit", (("", "server/lexical/"),)),
    ("audit", (("log_audit", ""), ("", "server/store/audit"))),
    ("salience", (("", "server/hygiene/salience"), ("prepare", "server/hygiene/writes"))),
    ("thread contexts", (("thread_contexts", ""),)),
    ("validation / normalise", (("validate_memories", ""), ("normalise_input", ""))),
    ("idempotency", (("", "server/engine/idempotent"), ("fingerprint", ""))),
    ("gRPC / protobuf", (("", "grpc"), ("", "mapping.py"), ("", "protobuf"))),
)


def stage_of(stack: str) -> str:
    for frame in reversed(stack.split(";")):
        function, _, where = frame.partition(" (")
        function = function.rpartition(".")[2]   # "Staging.near_duplicates" -> "near_duplicates"
        for stage, markers in STAGES:
            if any(function.startswith(f) and p in where for f, p in markers):
                return stage
    return "other"


def summarise(raw: Path) -> dict[str, float]:
    counts: Counter[str] = Counter()
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            counts[stage_of(stack)] += int(n)
    total = max(1, sum(counts.values()))
    return {k: round(100 * v / total, 1) for k, v in counts.most_common()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", choices=("long", "short"), default="long")
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--tiny-encoder", action="store_true",
                   help="a 2-layer, 32-wide random encoder: the write path beside a near-free forward pass")
    p.add_argument("--in-flight", type=int, default=1, help="Writes in flight")
    p.add_argument("--name", default="")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    texts = long_turns(args.n) if args.kind == "long" else short_turns(args.n)
    name = args.name or args.kind
    args.out.mkdir(parents=True, exist_ok=True)
    raw = args.out / f"profile_{name}.txt"
    with tempfile.TemporaryDirectory(prefix="engram-ingest-profile-") as tmp:
        env = {"ENGRAM_MODELS__DEVICE": "cpu"}
        if args.tiny_encoder:
            from benchmarks.ingest.run import TINY_SERVER_ENV
            from models.testing import build_tiny_encoder

            env.update({"ENGRAM_MODELS__EMBEDDER": str(build_tiny_encoder(Path(tmp) / "tiny")), **TINY_SERVER_ENV})
        server = start_server(Path(tmp), "server", env)
        try:
            with client_for(server) as client:
                client.create_tenant("warm")
                write_all(client, "warm", texts[:args.batch], batch=args.batch)
                client.create_tenant("profiled")
                spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "-p",
                                        str(server.proc.pid), "-r", "50", "-f", "raw", "-o", str(raw), "--threads",
                                        "--nonblocking", "-d", "3600"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
                time.sleep(1.0)
                rate = write_all(client, "profiled", texts, batch=args.batch, in_flight=args.in_flight)
                spy.send_signal(2)   # SIGINT: py-spy writes what it has
                spy.wait(60)
        finally:
            server.stop()
    result = {"kind": args.kind, "n": args.n, "in_flight": args.in_flight, "tiny_encoder": args.tiny_encoder,
              "machine": cpu_model(), "command": command_line(),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "ingest": rate,
              "busy_samples_pct": summarise(raw)}
    (args.out / f"profile_{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
