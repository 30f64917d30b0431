"""The ingest benchmark: how fast a server takes memories in, against what its embedder alone can do.

Parts (``--parts``, default all):

* ``embed``: the embedder alone, loaded as the server loads it, on the same texts in batches of 128 with every
  core: one pass with all cores as torch threads (``wide``), one pass per core side by side (``split``), and
  length-sorted chunks on every core as the write stage runs them (``chunked``); the best of them is the
  hardware's rate (``embed_best``).
* ``a``: ~1 KB conversation turns (``--n-long``) and LoCoMo-sized ones (``--n-short``) written by one client in
  Writes of ``--batch`` to an idle server; the rate against ``embed_best`` measured in the same run (target:
  at least 0.85x).
* ``b``: one search client (top 10, the server's default rerank depth) alone, then during a full-speed import of
  long turns (two Writes in flight); p50 / p95 against ``search.latency_target_ms`` (target: p95 within +20 %).
* ``c``: ``engram import`` of a JSONL file of ``--n`` short turns, SIGKILLed at about half and run again: the
  tenant ends with exactly N memories; rates and the import processes' peak RSS.

Results: JSON + PNG under benchmarks/results/ingest/. ``--device cuda`` runs the server and the embedder on a
GPU (benchmarks/gpu/run.sh); the embedder part needs neither FAISS nor Java.

    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.ingest.run --n-long 2000 --n-short 5000 --n 20000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.ingest.texts import long_turns, short_turns

if TYPE_CHECKING:   # the server's modules import FAISS: the embedder part runs where it is not installed
    from benchmarks.serving.run import ServerProcess

log = logging.getLogger("benchmarks.ingest")
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "ingest"
TARGET_RATIO = 0.85
GPU_TARGET_SHORT = 20_000   # short memories/s on one H200


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return platform.processor()
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "")


def command_line() -> str:
    """How this process was started, as a result file quotes it: ``python -m <module> <args>`` (no path of this
    machine), or the script's name and arguments when it was not run as a module."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    head = f"python -m {spec.name}" if spec is not None else f"python {Path(sys.argv[0]).name}"
    return " ".join([head, *sys.argv[1:]])


# -- the embedder alone ---------------------------------------------------------------------------------------
def embed_alone(texts_by_kind: dict[str, list[str]], *, device: str, batch: int) -> dict[str, Any]:
    """Texts/s of the server's embedder on ``texts`` (passage prefix added, as the write path does)."""
    import torch

    from models.threads import process_cpus, torch_threads
    from server.config import load_config

    config = load_config(env={**os.environ, "ENGRAM_MODELS__DEVICE": device})
    note = "the server's embedder, as configured"
    try:
        from server.app import load_embedder   # the server's modules: FAISS

        model = load_embedder(config, device)
    except Exception as exc:  # noqa: BLE001 (a bare GPU box: FAISS or the weight packages were not carried)
        model, note = shaped_embedder(config, device, exc)
    model.warmup()
    cores = process_cpus()
    out: dict[str, Any] = {"cores": cores, "embedder": model.name, "embedder_note": note}

    def run(texts: list[str]) -> None:
        for i in range(0, len(texts), batch):
            model.embed(texts[i:i + batch])
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    for kind, raw in texts_by_kind.items():
        texts = [model.passage_prefix + t for t in raw]
        run(texts[:batch])   # warm: the shapes of this kind
        rates: dict[str, float] = {}
        t0 = time.perf_counter()
        with torch_threads(cores if device == "cpu" else 0):
            run(texts)
        rates["wide"] = len(texts) / (time.perf_counter() - t0)
        if device.startswith("cuda"):   # a GPU's rate with four Writes' texts in one pass
            wide = batch * 4
            run(texts[:wide])
            t0 = time.perf_counter()
            for i in range(0, len(texts), wide):
                model.embed(texts[i:i + wide])
            torch.cuda.synchronize()
            rates[f"batch_{wide}"] = len(texts) / (time.perf_counter() - t0)
            out[f"{kind}_stages"] = cuda_stages(model, texts, batch=batch)
            rates["pipelined"] = out[f"{kind}_stages"].pop("pipelined")
        if device == "cpu" and cores > 1:
            parts = [texts[i::cores] for i in range(cores)]

            def one(part: list[str]) -> None:
                with torch_threads(1):
                    run(part)

            with ThreadPoolExecutor(cores) as pool:
                t0 = time.perf_counter()
                list(pool.map(one, parts))
                rates["split"] = len(texts) / (time.perf_counter() - t0)
            rates["chunked"] = chunked_rate(model, texts, batch=batch, lanes=cores)
        out[kind] = {k: round(v, 2) for k, v in rates.items()} | {"best": round(max(rates.values()), 2)}
        log.info("embedder alone, %s: %s", kind, out[kind])
    return out


def cuda_stages(model: Any, texts: list[str], *, batch: int) -> dict[str, float]:
    """Where a GPU's embedding time goes, in texts/s of each stage alone: tokenizing (CPU) in batches of ``batch``,
    the forward pass of the tokenized batches in micro-batches of 64 (a CPU's), of a whole batch and of the CUDA
    default (models._hf.CUDA_MICRO_BATCH), and both overlapped (``pipelined``: a thread tokenizes the next batches
    while the GPU runs this one)."""
    import torch

    from models._hf import CUDA_MICRO_BATCH

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)   # the CPU: a smoke test
    chunks = [texts[i:i + batch] for i in range(0, len(texts), batch)]
    t0 = time.perf_counter()
    tokens = [model.tokenize(c) for c in chunks]
    stages = {"tokenize": len(texts) / (time.perf_counter() - t0)}
    default = model.batch_size
    try:
        for micro in sorted({64, batch, CUDA_MICRO_BATCH}):
            model.batch_size = micro
            model.forward(tokens[0])
            sync()
            t0 = time.perf_counter()
            for t in tokens:
                model.forward(t)
            sync()
            stages[f"forward_micro_{micro}"] = len(texts) / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(1) as pool:
            for t in pool.map(model.tokenize, chunks):
                model.forward(t)
        sync()
        stages["pipelined"] = len(texts) / (time.perf_counter() - t0)
    finally:
        model.batch_size = default
    return {k: round(v, 2) for k, v in stages.items()}


def embedder_shape(config: Any) -> tuple[Any, str]:
    """The shape (models.testing) and name of a random-weight stand-in for the configured embedder: 12 layers for
    multilingual-e5-small, MiniLM-L6's 6 otherwise."""
    from models.multilingual import E5_NAME
    from models.testing import E5_SMALL_BERT, MINILM_L6_BERT

    if config.models.embedder == E5_NAME:
        return E5_SMALL_BERT, "engram-e5-small-shaped-encoder"
    return MINILM_L6_BERT, "engram-minilm-shaped-encoder"


def shaped_embedder(config: Any, device: str, exc: Exception) -> tuple[Any, str]:
    """An encoder of the configured embedder's shape with random weights (12 layers for multilingual-e5-small,
    6 for MiniLM), the MiniLM WordPiece tokenizer, the configured dtype and lengths: the embedder's speed where
    its weights could not travel. The note says so; the rates are speed only."""
    from models.embedder import HFEmbedder
    from models.testing import build_shaped_encoder

    shape, name = embedder_shape(config)
    with tempfile.TemporaryDirectory() as tmp:
        model = HFEmbedder.load(build_shaped_encoder(Path(tmp) / "enc", shape, name=name), device=device,
                                dtype=config.models.dtype, max_length=config.models.embed_max_length)
    note = (f"{config.models.embedder or 'minilm'}-shaped encoder ({shape.num_hidden_layers} layers, "
            f"{shape.hidden_size} wide) with RANDOM weights and the MiniLM WordPiece tokenizer: speed only (weights unavailable: {exc})")
    log.warning("embedder alone: %s", note)
    return model, note


# random vectors of distinct texts lie close together (cosine 0.95-0.998 between the synthetic turns): with the
# embedder's own thresholds most Writes would merge into a neighbour and skip the index adds
SHAPED_SERVER_ENV = {"ENGRAM_ADVANCED__DEDUPE_COSINE": "0.999", "ENGRAM_MEMORY__UPDATE_LINK_COSINE": "0.999"}
# models.testing's tiny random encoder (2 layers, 32 wide) in a server, to time the write path beside a near-free
# forward pass: no merges, and the update linker's work per memory as the default e5 gives it. On 2,048 short turns
# e5's link cosine 0.86 leaves per memory ~25 other rows of its Write of 128 and ~7.4 of 8 stored neighbours at or
# above it (each new text analysed, a neighbour list built and judged); this encoder at 0.98: ~19 and ~7.2.
TINY_SERVER_ENV = {"ENGRAM_ADVANCED__DEDUPE_COSINE": "0.999", "ENGRAM_MEMORY__UPDATE_LINK_COSINE": "0.98"}


def use_shaped_if_missing(env: dict[str, str]) -> str | None:
    """Where the configured embedder's weights are absent (a GPU box they could not travel to), builds an encoder of
    its shape with random weights and points this benchmark and its server at it (``ENGRAM_MODELS__EMBEDDER``, set
    in ``os.environ`` and ``env``), with near-duplicate merging and update links set above the random vectors'
    similarities (SHAPED_SERVER_ENV: every Write still looks both up, none merges). Returns the note, or None when
    the configured embedder loads."""
    from models.testing import build_shaped_encoder
    from server.app import load_embedder
    from server.config import load_config

    config = load_config(env={**os.environ, **env})
    try:
        load_embedder(config, "cpu")
        return None
    except Exception as exc:  # noqa: BLE001 (the weight package was not carried)
        reason = exc
    shape, name = embedder_shape(config)
    path = build_shaped_encoder(Path(tempfile.mkdtemp(prefix="engram-shaped-")) / "enc", shape, name=name)
    os.environ["ENGRAM_MODELS__EMBEDDER"] = env["ENGRAM_MODELS__EMBEDDER"] = str(path)
    env.update(SHAPED_SERVER_ENV)
    note = (f"{config.models.embedder}-shaped encoder ({shape.num_hidden_layers} layers, {shape.hidden_size} wide) "
            f"with RANDOM weights and the MiniLM WordPiece tokenizer, in the benchmark and the server, "
            f"{SHAPED_SERVER_ENV}: speed only (weights unavailable: {reason})")
    log.warning("%s", note)
    return note


def chunked_rate(model: Any, texts: list[str], *, batch: int, lanes: int, passages: int = 0) -> float:
    """Texts/s of the embedder run as the server's write stage runs it with no search waiting: each batch tokenized
    once, its length-sorted chunks (scheduler.embed_chunks) on ``lanes`` threads of one torch thread each.
    ``passages``: also each cut text's passage windows, up to that many (the write stage's rows, EmbedStage; 0: the
    first window only)."""
    from models.base import TokenBatch
    from models.threads import torch_threads
    from server.batching.scheduler import embed_chunks
    from server.engine.ingest import CHUNK_TOKENS, EmbedStage

    stage = EmbedStage(embedder=model, device_pool=None, passages=passages)   # type: ignore[arg-type]

    def forward(tokens: TokenBatch, rows: list[int]) -> None:
        with torch_threads(1):
            model.forward(TokenBatch(input_ids=tuple(tokens.input_ids[i] for i in rows),
                                     token_type_ids=tuple(tokens.token_type_ids[i] for i in rows)))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(lanes) as pool:
        for i in range(0, len(texts), batch):
            tokens = stage._tokenize(texts[i:i + batch])[0]   # the rows the server embeds
            chunks = embed_chunks(tokens.lengths.tolist(), max_tokens=CHUNK_TOKENS, parts=lanes)
            list(pool.map(lambda rows: forward(tokens, rows), chunks))
    return len(texts) / (time.perf_counter() - t0)


# -- a server -------------------------------------------------------------------------------------------------
def start_server(workdir: Path, name: str, env: dict[str, str]) -> ServerProcess:
    from benchmarks.serving.run import ServerProcess

    empty = workdir / f"empty-{name}"
    empty.mkdir()
    server = ServerProcess(empty, batching=True, workdir=workdir, name=name, env=env)
    server.wait_ready()
    return server


def client_for(server: ServerProcess) -> Any:
    from benchmarks.serving.build import ADMIN_KEY
    from engram_client import EngramClient

    return EngramClient(server.address, key=ADMIN_KEY, timeout_s=600)


def write_all(client: Any, tenant: str, texts: list[str], *, batch: int, in_flight: int = 1,
              stop: threading.Event | None = None, memory_type: str = "semantic") -> dict[str, Any]:
    """Writes ``texts`` in Writes of ``batch``, ``in_flight`` at once, each a ``memory_type`` memory; memories/s."""
    chunks = [texts[i:i + batch] for i in range(0, len(texts), batch)]
    t0 = time.perf_counter()
    written = merged = linked = 0

    def send(chunk: list[str]) -> tuple[int, int, int]:
        if stop is not None and stop.is_set():
            return 0, 0, 0
        results = client.write(tenant, [{"content": t, "type": memory_type} for t in chunk]).results
        return len(results), sum(bool(r.merged_into) for r in results), sum(bool(r.updates) for r in results)

    with ThreadPoolExecutor(in_flight) as pool:
        for n, m, u in pool.map(send, chunks):
            written, merged, linked = written + n, merged + m, linked + u
    seconds = time.perf_counter() - t0
    # merged: near duplicates folded into an earlier memory; linked: written as an update of an older one
    return {"memories": written, "seconds": round(seconds, 2), "rate": round(written / seconds, 2),
            "merged": merged, "linked_as_update": linked}


def part_a(server: ServerProcess, texts_by_kind: dict[str, list[str]], *, batch: int,
           memory_type: str = "semantic") -> dict[str, Any]:
    out: dict[str, Any] = {}
    with client_for(server) as client:
        client.create_tenant("warm")
        write_all(client, "warm", [t for texts in texts_by_kind.values() for t in texts[:batch]], batch=batch)
        for kind, texts in texts_by_kind.items():
            client.create_tenant(f"ingest-{kind}")
            out[kind] = write_all(client, f"ingest-{kind}", texts, batch=batch, memory_type=memory_type)
            log.info("server ingest, %s: %s", kind, out[kind])
    return out


def part_b(server: ServerProcess, texts: list[str], queries: list[str], *, batch: int, seconds: float,
           target_ms: float, synthetic: bool = False, memory_type: str = "semantic") -> dict[str, Any]:
    """One search client alone, then beside an import of ``texts`` (``memory_type`` memories, two Writes in
    flight) into another tenant: p50 / p95 against ``target_ms``."""
    from benchmarks.serving.build import ADMIN_KEY
    from benchmarks.serving.load import run_load

    with client_for(server) as client:
        client.create_tenant("searched")
        write_all(client, "searched", short_turns(2000, seed=7, synthetic=synthetic), batch=batch)
        client.create_tenant("bulk")
        # Disjoint query halves: the cross-encoder's pair cache must not answer the second phase from the first.
        first, second = queries[:len(queries) // 2], queries[len(queries) // 2:]
        alone = asyncio.run(run_load(server.address, ADMIN_KEY, tenants=["searched"], queries=first,
                                     concurrency=1, seconds=seconds, rerank_depth=0, seed=3)).summary()
        stop = threading.Event()
        importer: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: importer.update(
            write_all(client, "bulk", texts, batch=batch, in_flight=2, stop=stop, memory_type=memory_type)))
        thread.start()
        time.sleep(2.0)   # the import at full speed first
        during = asyncio.run(run_load(server.address, ADMIN_KEY, tenants=["searched"], queries=second,
                                      concurrency=1, seconds=seconds, rerank_depth=0, seed=4)).summary()
        stop.set()
        thread.join()
    keys = ("requests", "p50_ms", "p95_ms", "p99_ms", "rerank_depth_used", "errors")
    return {"target_ms": target_ms, "alone": {k: alone[k] for k in keys}, "during_import": {k: during[k] for k in keys},
            "import": importer, "p95_over_target": round(float(during["p95_ms"]) / target_ms, 3)}


def _memories(client: Any, tenant: str) -> int:
    return int(client.stats(tenant).tenants[0].memories)


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident set so far (VmHWM), 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    return next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM:")), 0.0)


def _watch(proc: subprocess.Popen[bytes], until: Callable[[], bool]) -> float:
    """Polls ``proc`` until it exits or ``until()``; its peak RSS (MB) as last read."""
    peak = 0.0
    while proc.poll() is None and not until():
        peak = max(peak, _peak_rss_mb(proc.pid))
        time.sleep(0.05)
    return peak


def part_c(server: Any, workdir: Path, *, n: int, batch: int, window: int, synthetic: bool = False,
           numbered: bool = False) -> dict[str, Any]:
    """``numbered``: generated turns with a number each (benchmarks.ingest.big.short_memory; no two merge, so the
    tenant ends with exactly ``n``), else LoCoMo-sized turns (a few merge as near-duplicates). A ``server`` with
    ``stage_totals`` (big.Server(timed=...)): the write path's ms per Write in each step, for the first run (the
    empty tenant to the kill) and the resumed one (the kill to ``n``)."""
    from benchmarks.ingest.big import short_memory
    from benchmarks.serving.build import ADMIN_KEY

    path = workdir / "import.jsonl"
    texts = (short_memory(i) for i in range(n)) if numbered else short_turns(n, seed=11, synthetic=synthetic)
    with path.open("w", encoding="utf-8") as f:
        for text in texts:
            f.write(json.dumps({"content": text, "type": "semantic"}) + "\n")
    timed = getattr(server, "timed", None) is not None
    totals = [server.stage_totals()] if timed else []
    tenant_stats: list[dict[str, Any]] = []
    polling = threading.Event()
    command = [sys.executable, "-m", "engram_cli", "import", "imported", str(path), "--address", server.address,
               "--key", ADMIN_KEY, "--batch-size", str(batch), "--window", str(window), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with client_for(server) as client:
        client.create_tenant("imported")
        poller = threading.Thread(target=_poll_stats, args=(client, "imported", tenant_stats, polling), daemon=True)
        poller.start()
        t0 = time.perf_counter()
        first = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        peak = _watch(first, lambda: _memories(client, "imported") >= n // 2)
        first.send_signal(signal.SIGKILL)
        first.wait()
        killed_s, at_kill = time.perf_counter() - t0, _memories(client, "imported")
        totals += [server.stage_totals()] if timed else []
        t1 = time.perf_counter()
        second = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        peak = max(peak, _watch(second, lambda: False))
        summary = second.communicate()[0].decode().strip().splitlines()[-2:]
        resumed_s = time.perf_counter() - t1
        final = _memories(client, "imported")
        totals += [server.stage_totals()] if timed else []
        polling.set()
        poller.join()
        contents = [m.content for m in client.iter_memories("imported", page_size=1000)]
    # Every record once: the summary counts each record's outcome (a Write applied before the kill answered from
    # the server's record); a near-duplicate of an earlier record is MERGED into it, not stored again.
    outcomes = {word: int(count) for count, word in re.findall(r"(\d+) (created|merged)", summary[0] if summary else "")}
    created = outcomes.get("created", 0) if outcomes else -1
    return {"n": n, "memories_at_kill": at_kill, "first_run_s": round(killed_s, 2),
            "first_run_rate": round(at_kill / killed_s, 2), "resumed_s": round(resumed_s, 2),
            "resumed_rate": round((final - at_kill) / resumed_s, 2), "final_memories": final,
            "distinct_contents": len(set(contents)), "summary": summary,
            "each_record_once": final == created == len(set(contents)) == len(contents)
            and created + outcomes.get("merged", 0) == n,
            "import_peak_rss_mb": round(peak, 1), "file_mb": round(path.stat().st_size / 2**20, 2),
            "resume_exit": second.returncode, "tenant_stats": tenant_stats,
            **({"stages_ms_per_write": stage_split(totals, at_kill, final, batch),
                "writes": totals[-1].get("writes", [])} if timed else {})}


def _poll_stats(client: Any, tenant: str, rows: list[dict[str, Any]], stop: threading.Event) -> None:
    """The tenant every 2 s (memories, state: BUILDING while a dense index build runs, the dense index)."""
    while not stop.wait(2.0):
        t = client.stats(tenant).tenants[0]
        rows.append({"wall": round(time.time(), 2), "memories": t.memories, "state": t.state,
                     "dense_index": t.dense_index})


def stage_split(totals: list[dict[str, Any]], at_kill: int, final: int, batch: int) -> dict[str, Any]:
    """Ms per Write in each step of the write path: the first run (0 to ``at_kill`` memories) and the resumed one."""
    from benchmarks.ingest.stages import per_write

    first = max(1, -(-at_kill // batch))
    return {f"0-{at_kill}": per_write(totals[0], totals[1], first),
            f"{at_kill}-{final}": per_write(totals[1], totals[2], max(1, -(-(final - at_kill) // batch)))}


# -- the run --------------------------------------------------------------------------------------------------
def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    kinds = [k for k in ("long", "short") if k in results.get("a", {}) and k in results.get("embed", {})]
    x = np.arange(len(kinds))
    ax1.bar(x - 0.2, [results["embed"][k]["best"] for k in kinds], 0.4, label="embedder alone (all cores)")
    ax1.bar(x + 0.2, [results["a"][k]["rate"] for k in kinds], 0.4, label="server ingest")
    ax1.set_xticks(x, [f"{k} turns" for k in kinds])
    ax1.set_ylabel("memories / s")
    ax1.legend()
    if "b" in results:
        b = results["b"]
        labels = ["alone", "during import"]
        ax2.bar(np.arange(2) - 0.2, [b["alone"]["p50_ms"], b["during_import"]["p50_ms"]], 0.4, label="p50")
        ax2.bar(np.arange(2) + 0.2, [b["alone"]["p95_ms"], b["during_import"]["p95_ms"]], 0.4, label="p95")
        ax2.axhline(b["target_ms"] * 1.2, color="red", linestyle="--", label="target + 20 %")
        ax2.set_xticks(np.arange(2), labels)
        ax2.set_ylabel("search latency (ms)")
        ax2.legend()
    fig.suptitle(f"ingest: {results['machine']} ({results['name']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="embed,a,b,c", help="comma-separated: embed, a, b, c")
    p.add_argument("--n-long", type=int, default=2000, help="~1 KB turns for part a (and b's import)")
    p.add_argument("--n-short", type=int, default=5000, help="LoCoMo-sized turns for part a")
    p.add_argument("--kinds", default="long,short", help="part a and the embedder: long, short or both")
    p.add_argument("--n", type=int, default=20000, help="memories in part c's JSONL import")
    p.add_argument("--batch", type=int, default=128, help="memories per Write")
    p.add_argument("--window", type=int, default=4, help="part c: Writes in flight (engram import --window)")
    p.add_argument("--c-texts", choices=("numbered", "turns"), default="numbered",
                   help="part c: generated turns with a number each (exactly N memories) or LoCoMo-sized turns")
    p.add_argument("--stages", action="store_true",
                   help="part c on a server of its own that times the write path's steps (benchmarks.ingest.stages)")
    p.add_argument("--search-seconds", type=float, default=20.0)
    p.add_argument("--keep", type=Path, default=None,
                   help="with --stages: part c's server data in KEEP/data, kept (benchmarks.ingest.big measure)")
    p.add_argument("--device", default="cpu", help="cpu | cuda")
    p.add_argument("--texts", choices=("locomo", "synthetic"), default="locomo",
                   help="turns built from LoCoMo (../shared/data) or from templates (a box without the data)")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
    p.add_argument("--memory-type", choices=("semantic", "episodic"), default="semantic",
                   help="parts a and b: the type of every memory written (episodic: chat turns, their own windows)")
    p.add_argument("--shaped-if-missing", action="store_true",
                   help="where the configured embedder's weights are absent, an encoder of its shape with random weights "
                        "in the benchmark and the server (speed only; a GPU box the weights could not travel to)")
    p.add_argument("--name", default="ingest")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    parts = set(args.parts.split(","))
    env = {"ENGRAM_MODELS__DEVICE": args.device, **dict(e.split("=", 1) for e in args.env)}
    shaped_note = use_shaped_if_missing(env) if args.shaped_if_missing else None
    synthetic = args.texts == "synthetic"
    kinds = args.kinds.split(",")
    texts = {k: long_turns(args.n_long, synthetic=synthetic) if k == "long" else short_turns(args.n_short, synthetic=synthetic)
             for k in ("long", "short") if k in kinds}
    results: dict[str, Any] = {"name": args.name, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "machine": cpu_model(), "device": args.device, "command": command_line(),
                               "env": env, "batch": args.batch, **({"shaped_note": shaped_note} if shaped_note else {}),
                               "texts": {k: {"n": len(v), "mean_chars": round(float(np.mean([len(t) for t in v])), 1)}
                                         for k, v in texts.items()}}
    if "embed" in parts:
        results["embed"] = embed_alone(texts, device=args.device, batch=args.batch)
    from server.config import load_config

    target_ms = load_config(env={**os.environ, **env}).search.latency_target_ms
    with tempfile.TemporaryDirectory(prefix="engram-ingest-") as tmp:
        work = Path(tmp)
        if parts & {"a", "b"} or "c" in parts and not args.stages:
            server = start_server(work, "server", env)
            try:
                results["server"] = server.wait_ready()
                if "a" in parts:
                    results["a"] = part_a(server, texts, batch=args.batch, memory_type=args.memory_type)
                if "b" in parts:
                    from benchmarks.serving.corpus import query_texts

                    results["b"] = part_b(server, long_turns(args.n_long, seed=5, synthetic=synthetic), query_texts(5000),
                                          batch=args.batch,
                                          seconds=args.search_seconds, target_ms=target_ms, synthetic=synthetic,
                                          memory_type=args.memory_type)
                if "c" in parts and not args.stages:
                    results["c"] = part_c(server, work, n=args.n, batch=args.batch, window=args.window,
                                          synthetic=synthetic, numbered=args.c_texts == "numbered")
            finally:
                server.stop()
        if "c" in parts and args.stages:
            from benchmarks.ingest.big import Server

            data = args.keep / "data" if args.keep else work / "timed-data"
            timed = Server(data, work / "server-timed.log", env=env, timed=work / "stages.json")
            try:
                timed.wait_ready()
                results["c"] = part_c(timed, work, n=args.n, batch=args.batch, window=args.window,
                                      synthetic=synthetic, numbered=args.c_texts == "numbered")
            finally:
                timed.stop()
    if args.device.startswith("cuda"):   # the GPU target: 20k short memories/s
        rates = {k: results[k]["short"].get("best", results[k]["short"].get("rate")) for k in ("embed", "a") if k in results}
        results["gpu_target_short_per_s"] = {"target": GPU_TARGET_SHORT, **rates}
    if "a" in results and "embed" in results:
        results["ratio"] = {k: round(results["a"][k]["rate"] / results["embed"][k]["best"], 3) for k in texts}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if "a" in results or "b" in results:
        plot(results, args.out / f"{args.name}.png")
    print(json.dumps({k: results[k] for k in ("embed", "a", "ratio", "b", "c", "gpu_target_short_per_s") if k in results},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
