"""SciFact test with the query adapter on and off, one ingest, one in-process server at its defaults.

    .venv/bin/python -m benchmarks.quality.query_adapter_ab [--out <json>]   # default: results/quality/

The corpus is written once (one SEMANTIC memory an abstract, as the scifact suite writes it); the test claims are
searched at the defaults (top_k 100, "as of" the suite's fixed time, caches off) with the pipeline's adapter off, on,
and off again (the two off rows must agree: the adapter is the only difference); with ``--other PATH``, the server's
own, the adapter or tower in PATH, and the server's own again. The LoCoMo side of the same
comparison is the block suite's ``no query adapter`` variant (``run --only block --block-variants
"defaults,no query adapter"``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import platform
import tempfile
import time
from pathlib import Path

from benchmarks.quality.datasets import evaluate, load_scifact, repo_root
from benchmarks.quality.harness import DEFAULTS, EvalServer
from benchmarks.quality.suites import FIXED_NOW_MS
from engram_proto.v1 import messages_pb2 as pb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path,
                        default=repo_root() / "benchmarks" / "results" / "quality" / "query_adapter_scifact.json")
    parser.add_argument("--other", default="",
                        help="a folder of another query adapter or tower: its row between the server's own two")
    args = parser.parse_args(argv)
    test = load_scifact(split="test")
    items = [(d.id, pb.MemoryInput(content=d.text, type=pb.MEMORY_TYPE_SEMANTIC, source_ref=d.id)) for d in test.docs]
    out: dict = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 "machine": platform.processor() or platform.machine(),
                 "command": "python -m benchmarks.quality.query_adapter_ab"
                 + (f" --other {args.other}" if args.other else ""), "rows": {}}
    with tempfile.TemporaryDirectory() as tmp, EvalServer(Path(tmp)) as server:
        t0 = time.monotonic()
        tenant = server.ingest("scifact", items)
        out["ingest_s"] = round(time.monotonic() - t0, 1)
        pipeline = server._app.engine.search_pipeline   # type: ignore[union-attr]  # the in-process server's
        adapter = pipeline.query_adapter
        if adapter is None:
            raise SystemExit("the server loaded no query adapter (advanced.query_adapter): nothing to compare")
        out["adapter_sha256"] = adapter.sha256
        with server.caches_off():
            try:
                rows = ((("on (default)", adapter), (f"other {args.other}", args.other), ("on again", adapter))
                        if args.other else (("off", None), ("on (default)", adapter), ("off again", None)))
                for name, use in rows:
                    folder = use if isinstance(use, str) else ""
                    pipeline.query_adapter = adapter if folder else use
                    with server.adapter_swapped(folder) if folder else contextlib.nullcontext():
                        run = server.search(tenant, test.queries, DEFAULTS, now_ms=FIXED_NOW_MS, top_k=100)
                    out["rows"][name] = {k: round(v, 4) for k, v in evaluate(run, test.qrels, ks=(10, 100)).items()}
                    print(name, out["rows"][name], flush=True)
            finally:
                pipeline.query_adapter = adapter
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
