"""`make reranker-student`: a smaller cross-encoder distilled from engram-reranker-v1.

    python -m training.distill [--teacher models/weights/engram-reranker-v1] [--keep 0,2,5] [--epochs 1]

The recipe's training pairs (``make reranker``'s groups: SciFact train claims with their dev share held
out, self-supervised SciFact sentences and LoCoMo turn queries, each with 7 BM25 hard negatives; mined into
``benchmarks/.cache/reranker`` as the recipe mines them) are scored once by the teacher, as the server runs
it (bfloat16 where the CPU has it, traced, packed tokens; cached beside the candidates). The student is the
teacher cut to the layers in ``--keep`` (their weights, the embeddings, pooler and head copied), trained
to reproduce the teacher's logit on every pair (mean squared error on the raw logit, so its scale, which
the relevance calibration reads, stays the teacher's; plus a listwise KL term for the order within
each group). Pairs are read at ``--max-length`` tokens (the
teacher's 128 by default). Seeded and deterministic like the recipe; fp16 weights, tokenizer, provenance
and ``training_log.json`` into ``models/weights/engram-reranker-v1-l3``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import logging
import math
import platform
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.quality.datasets import load_scifact, repo_root
from training.data import Group
from training.recipe import DEFAULT_CACHE, training_groups
from training.train import Stepper, autocast_dtype, save, seed_everything

log = logging.getLogger(__name__)

TEACHER = repo_root() / "models" / "weights" / "engram-reranker-v1"
NAME = "engram-reranker-v1-l3"
DEFAULT_OUT = repo_root() / "models" / "weights" / NAME


@dataclass(frozen=True)
class DistillConfig:
    keep: tuple[int, ...] = (0, 2, 5)   # teacher layers the student keeps, in order (first and last kept)
    max_length: int = 128               # tokens per pair, student and teacher alike
    groups_per_step: int = 4            # 4 groups x 8 pairs = 32 pairs a step, as the recipe
    epochs: int = 1
    lr: float = 2e-4                    # body and head (both start from the teacher's weights)
    # + kl_weight x KL(teacher's softmax over a group || the student's): the order within a group (the
    # positive against its hard negatives), where MSE alone weighs the many clear negatives as much
    kl_weight: float = 1.0
    weight_decay: float = 0.01
    warmup_share: float = 0.05
    seed: int = 13
    # one thread: on the shared 2-core box a second OpenMP thread waits at every barrier (models/threads.py)
    threads: int = 1
    log_every: int = 10
    precision: str = "auto"             # bfloat16 autocast where native (training.train.autocast_dtype)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def teacher_logits(groups: Sequence[Group], *, teacher: Path, max_length: int, cache: Path,
                   threads: int) -> np.ndarray:
    """``(groups, passages)`` float32 teacher logits, read from ``cache`` when the same teacher weights
    scored the same pairs at the same length before."""
    pairs = [(g.query, p) for g in groups for p in g.passages]
    digest = hashlib.sha256()
    digest.update(_sha256(teacher / "model.safetensors").encode())
    digest.update(str(max_length).encode())
    for q, p in pairs:
        digest.update(q.encode())
        digest.update(b"\0")
        digest.update(p.encode())
        digest.update(b"\1")
    path = cache / f"teacher_logits-{digest.hexdigest()[:16]}.npy"
    width = len(groups[0].passages)
    if path.is_file():
        log.info("teacher logits cached in %s", path)
        return np.load(path).reshape(len(groups), width)
    from models.reranker import HFCrossEncoder

    torch.set_num_threads(threads)
    model = HFCrossEncoder.load(teacher, max_length=max_length, trace=True, unpad=True, batch_size=32)
    started, out, chunk = time.perf_counter(), [], 512
    for i in range(0, len(pairs), chunk):
        out.append(model.score(pairs[i:i + chunk]))
        if (i // chunk) % 10 == 0:
            log.info("teacher scored %d/%d pairs (%.0fs)", i + len(out[-1]), len(pairs), time.perf_counter() - started)
    logits = np.concatenate(out).astype(np.float32)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, logits)
    log.info("teacher scored %d pairs in %.0fs (%s, %s)", len(pairs), time.perf_counter() - started,
             model.describe()["dtype"], path.name)
    return logits.reshape(len(groups), width)


def init_student(teacher: Path, keep: Sequence[int]) -> tuple[Any, Any]:
    """(tokenizer, model): the teacher with only the layers in ``keep`` (float32, eager attention)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(teacher), use_fast=True)
    model = AutoModelForSequenceClassification.from_pretrained(str(teacher), dtype=torch.float32,
                                                               attn_implementation="eager")
    layers = model.base_model.encoder.layer
    if not keep or any(not 0 <= i < len(layers) for i in keep) or list(keep) != sorted(set(keep)):
        raise ValueError(f"keep must be increasing layer indexes of the teacher's {len(layers)}, got {keep}")
    model.base_model.encoder.layer = torch.nn.ModuleList([layers[i] for i in keep])
    model.config.num_hidden_layers = len(keep)
    return tokenizer, model


def distill(groups: Sequence[Group], targets: np.ndarray, *, teacher: Path, cfg: DistillConfig,
            log_path: Path | None = None) -> tuple[Any, Any, list[dict[str, float]]]:
    """Trains the student on every pair of ``groups`` to reproduce ``targets`` (one logit per pair)."""
    if len(groups) != targets.shape[0]:
        raise ValueError("one row of teacher logits per group")
    half = autocast_dtype(cfg.precision)
    seed_everything(cfg.seed, threads=cfg.threads)
    tokenizer, model = init_student(teacher, cfg.keep)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    per_epoch = math.ceil(len(groups) / cfg.groups_per_step)
    steps = cfg.epochs * per_epoch
    warmup = max(1, int(steps * cfg.warmup_share))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
    rng = random.Random(cfg.seed)
    order = list(range(len(groups)))
    stepper = Stepper(model, optimizer, scheduler, steps=steps, log_every=cfg.log_every, log_path=log_path)
    log.info("distilling %d steps (%d layers of the teacher: %s) in %s", steps, len(cfg.keep), cfg.keep,
             half or torch.float32)
    model.train()
    for epoch in range(cfg.epochs):
        if epoch:
            rng.shuffle(order)
        for start in range(0, len(order), cfg.groups_per_step):
            rows = order[start:start + cfg.groups_per_step]
            queries = [groups[r].query for r in rows for _ in groups[r].passages]
            passages = [p for r in rows for p in groups[r].passages]
            enc = tokenizer(queries, passages, truncation="longest_first", max_length=cfg.max_length,
                            padding=True, return_tensors="pt")
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=half is not None):
                logits = model(**enc).logits.view(-1)
            target = torch.from_numpy(targets[rows].reshape(-1))
            student = logits.float()
            loss = torch.nn.functional.mse_loss(student, target)
            if cfg.kl_weight > 0:
                width = len(groups[rows[0]].passages)
                loss = loss + cfg.kl_weight * torch.nn.functional.kl_div(
                    torch.log_softmax(student.view(-1, width), dim=-1),
                    torch.log_softmax(target.view(-1, width), dim=-1), log_target=True, reduction="batchmean")
            stepper.step(loss, epoch=epoch)
    model.eval()
    return tokenizer, model, stepper.history


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m training.distill", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", type=Path, default=TEACHER)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--name", default=NAME)
    # the recipe's data (training.recipe.parse defaults)
    p.add_argument("--selfsup", type=int, default=3500)
    p.add_argument("--locomo", type=int, default=1500)
    p.add_argument("--negatives", type=int, default=7)
    p.add_argument("--pool-depth", type=int, default=30)
    # The first 1,200 of the recipe's 5,753 shuffled groups (9,600 pairs): the teacher's scoring and one pass of
    # the student fit ~30 min on the shared 2-core box
    p.add_argument("--train-limit", type=int, default=1200, help="use only the first N groups (0 = all)")
    defaults = DistillConfig()
    p.add_argument("--keep", default=",".join(map(str, defaults.keep)), help="teacher layers kept, e.g. 0,2,5")
    for field, value in asdict(defaults).items():
        if field != "keep":
            p.add_argument(f"--{field.replace('_', '-')}", type=type(value), default=value)
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    cfg = DistillConfig(**{**{k: getattr(args, k) for k in asdict(DistillConfig()) if k != "keep"},
                           "keep": tuple(int(x) for x in args.keep.split(","))})
    started = time.perf_counter()
    docs = {d.id: d.text for d in load_scifact(split="train").docs}
    groups, counts = training_groups(args, docs, seed=cfg.seed)
    mined_s = time.perf_counter() - started
    t0 = time.perf_counter()
    targets = teacher_logits(groups, teacher=args.teacher, max_length=cfg.max_length, cache=args.cache,
                             threads=cfg.threads)
    teacher_s = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    curve = args.out / "training_curve.jsonl"
    curve.unlink(missing_ok=True)
    t0 = time.perf_counter()
    tokenizer, model, history = distill(groups, targets, teacher=args.teacher, cfg=cfg, log_path=curve)
    train_s = time.perf_counter() - t0
    teacher_meta = json.loads((args.teacher / "engram_provenance.json").read_text(encoding="utf-8"))
    provenance = {
        "name": args.name,
        "provenance": (f"engram training.distill (make reranker-student), seed {cfg.seed}: "
                       f"{teacher_meta.get('name', args.teacher.name)} (sha256 "
                       f"{_sha256(args.teacher / 'model.safetensors')[:12]}) cut to its layers {list(cfg.keep)}, "
                       "trained to reproduce the teacher's logits (MSE + listwise KL) on the recipe's training pairs "
                       f"(make reranker's groups; {teacher_meta.get('data', {}).get('never_used', '')} never used)"),
        "base_model": teacher_meta.get("name", str(args.teacher)),
        "teacher": str(args.teacher.relative_to(repo_root()) if args.teacher.is_relative_to(repo_root())
                       else args.teacher),
        "training": {**asdict(cfg), "keep": list(cfg.keep), "loss": "mse(student logit, teacher logit) + kl_weight x listwise KL(teacher || student)"},
        "data": {**counts, "pairs": int(targets.size), "negatives": args.negatives, "pool_depth": args.pool_depth,
                 "never_used": "SciFact test claims/judgments; LoCoMo questions, answers and evidence labels"},
    }
    save(tokenizer, model, args.out, max_length=cfg.max_length, provenance=provenance)
    report: dict[str, Any] = {
        **provenance, "history": history,
        "teacher_logits": {"mean": round(float(targets.mean()), 4), "std": round(float(targets.std()), 4)},
        "seconds": {"mine": round(mined_s, 1), "teacher": round(teacher_s, 1), "train": round(train_s, 1),
                    "total": round(time.perf_counter() - started, 1)},
        "weights_sha256": _sha256(args.out / "model.safetensors"),
        "versions": {p: importlib.metadata.version(p) for p in ("torch", "transformers")},
        "platform": platform.platform(),
    }
    (args.out / "training_log.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    report = run(parse(argv))
    print(json.dumps({k: report[k] for k in ("seconds", "weights_sha256", "teacher_logits")}, indent=2))


if __name__ == "__main__":
    main()
