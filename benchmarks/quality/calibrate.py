"""Fits the relevance calibration (server/fusion/calibration.py) on dev data, through the real server.

    .venv/bin/python -m benchmarks.quality.calibrate [--out server/fusion/calibration.json]

Dev data only: SciFact *train* claims over the test corpus (the reranker recipe's held-out dev claims for
the cross-encoder model, every train claim for the fusion model) and the LoCoMo questions (categories 1-4)
over turns written as ``"<speaker>: <text>"`` episodic memories. The SciFact test claims and the zh/en
set are never read here: they are where the README reports. Each search asks for every fused candidate
(top_k 200, decay, importance and temporal boosts off, "as of" a fixed time) so the features of every
candidate are seen; the features are rebuilt from the hits' breakdowns exactly as the server computes
them (:func:`server.fusion.calibration.fused_features`). Each data set weighs the same in the fit.

Cross-fitting (``--cross-fit conv-26=DIR --cross-fit …``): the bundled cross-encoder was trained further on the
dev conversations' questions (training/qa_stage.py), so its logits on them are in sample. With ``--cross-fit``
each named dev conversation's rows are read through a server whose cross-encoder is ``DIR``, that stage trained
without the conversation (``python -m training.qa_stage --init <stage one> --out DIR --conversations <the other
two>``): the fit then sees the logits the bundled model gives a conversation it never read.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from benchmarks.quality.block import LOCOMO_DEV, LOCOMO_HELD_OUT
from benchmarks.quality.datasets import load_locomo, load_scifact, repo_root
from benchmarks.quality.harness import EvalServer, Ingested, Stage, docs_of_hit
from benchmarks.quality.suites import FIXED_NOW_MS, locomo_inputs
from server.engine.search import DENSE_WEIGHT, DENSE_WEIGHT_CJK, DENSE_WEIGHT_CODE, LEXICAL_WEIGHT, RRF_K
from server.fusion.calibration import FUSED_FEATURES, RERANK_FEATURES, fused_features
from server.fusion.rrf import rrf_max
from engram_proto.v1 import messages_pb2 as pb
from server.text import has_cjk, has_code

log = logging.getLogger("benchmarks.quality.calibrate")

ALL = Stage("calibration", rerank=True, temporal=False)
ROW_KEYS = ("fx", "fy", "rx", "ry", "fq", "rq", "rh")
L2 = 1e-3


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, *, l2: float = L2, steps: int = 50) -> tuple[np.ndarray, float]:
    """Weighted L2-regularised logistic regression by Newton's method: (coef, intercept)."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    beta = np.zeros(xb.shape[1])
    reg = np.full(xb.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ beta, -60, 60)))
        grad = xb.T @ (w * (p - y)) + reg * beta
        hess = (xb * (w * p * (1 - p))[:, None]).T @ xb + np.diag(reg)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta[:-1], float(beta[-1])


Rows = tuple[list[list[float]], list[float], list[list[float]], list[float], list[int], list[int], list[int]]


def _rows(server: EvalServer, tenant: Ingested, hits: Mapping[str, Sequence[pb.Hit]], texts: Mapping[str, str],
          qrels: Mapping[str, Mapping[str, int]]) -> Rows:
    """Each hit's features and label, for both models, the index of its query (``fq``, ``rq``: the rows of one
    query are what a ranking compares) and a rerank row's hit position (``rh``)."""
    fused_x: list[list[float]] = []
    fused_y: list[float] = []
    rerank_x: list[list[float]] = []
    rerank_y: list[float] = []
    fused_q: list[int] = []
    rerank_q: list[int] = []
    rerank_h: list[int] = []   # the hit's position in its query's list (fused rows are every hit, in order)
    for qi, (qid, hs) in enumerate(hits.items()):
        if not hs:
            continue
        text = texts[qid]
        dense_w = DENSE_WEIGHT * (DENSE_WEIGHT_CJK if has_cjk(text) else 1.0) * (
            DENSE_WEIGHT_CODE if has_code(text) else 1.0)
        top = rrf_max(k=RRF_K, weights=(dense_w, LEXICAL_WEIGHT))
        ids = np.arange(len(hs), dtype=np.int64)
        rrf_norm = np.array([h.breakdown.rrf for h in hs]) / top
        dense = sorted((h.breakdown.dense_rank, i, h.breakdown.dense_score) for i, h in enumerate(hs) if h.breakdown.dense_rank)
        lexical = sorted((h.breakdown.bm25_rank, i, h.breakdown.bm25_score) for i, h in enumerate(hs) if h.breakdown.bm25_rank)
        cols = fused_features(ids, rrf_norm, np.array([i for _, i, _ in dense], dtype=np.int64),
                              np.array([s for _, _, s in dense]), np.array([i for _, i, _ in lexical], dtype=np.int64),
                              np.array([s for _, _, s in lexical]))
        labels = [float(any(qrels[qid].get(d, 0) > 0 for d in docs_of_hit(tenant, h))) for h in hs]
        logits = [h.breakdown.rerank for h in hs if h.breakdown.HasField("rerank")]
        cols["logit_gap"] = np.array([h.breakdown.rerank - max(logits) if h.breakdown.HasField("rerank") else 0.0
                                      for h in hs])
        for i, h in enumerate(hs):
            fused_x.append([cols[f][i] for f in FUSED_FEATURES])
            fused_y.append(labels[i])
            fused_q.append(qi)
            if h.breakdown.HasField("rerank"):
                rerank_x.append([h.breakdown.rerank if f == "logit" else float(cols[f][i]) for f in RERANK_FEATURES])
                rerank_y.append(labels[i])
                rerank_q.append(qi)
                rerank_h.append(i)
    return fused_x, fused_y, rerank_x, rerank_y, fused_q, rerank_q, rerank_h


def collect(server: EvalServer) -> dict[str, dict[str, np.ndarray]]:
    """Rows per data set: ``scifact`` and ``locomo:<conversation id>`` for every LoCoMo conversation."""
    from training.data import is_dev
    from training.recipe import DEV_SHARE

    out: dict[str, dict[str, np.ndarray]] = {}
    sf_test, sf_train = load_scifact(split="test"), load_scifact(split="train")
    tenant = server.ingest("cal-scifact", [(d.id, pb.MemoryInput(content=d.text, type=pb.MEMORY_TYPE_SEMANTIC))
                                           for d in sf_test.docs])
    texts = {q.id: q.text for q in sf_train.queries}
    hits = server.search_hits(tenant, sf_train.queries, ALL, now_ms=FIXED_NOW_MS, top_k=200)
    fx, fy, _, _, fq, _, _ = _rows(server, tenant, hits, texts, sf_train.qrels)
    dev = {q.id for q in sf_train.queries if is_dev(q.id, dev_share=DEV_SHARE)}
    _, _, rx, ry, _, rq, rh = _rows(server, tenant, {q: h for q, h in hits.items() if q in dev}, texts,
                                    sf_train.qrels)
    out["scifact"] = {"fx": np.array(fx), "fy": np.array(fy), "rx": np.array(rx), "ry": np.array(ry),
                      "fq": np.array(fq, dtype=np.int64), "rq": np.array(rq, dtype=np.int64),
                      "rh": np.array(rh, dtype=np.int64)}
    out.update(collect_locomo(server))
    return out


def collect_locomo(server: EvalServer, only: Sequence[str] = ()) -> dict[str, dict[str, np.ndarray]]:
    """Rows ``locomo:<conversation id>`` of every LoCoMo conversation (``only``: of those named)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for conv in load_locomo():
        if only and conv.id not in only:
            continue
        tenant = server.ingest(f"cal-locomo-{conv.id}", locomo_inputs(conv))
        qs = [q for q in conv.questions]
        hits = server.search_hits(tenant, [_q(q) for q in qs], ALL, now_ms=conv.now * 1000, top_k=200)
        part = _rows(server, tenant, hits, {q.id: q.text for q in qs}, {q.id: {e: 1 for e in q.evidence} for q in qs})
        out[f"locomo:{conv.id}"] = {k: np.array(part[i]) for i, k in enumerate(ROW_KEYS)}
    return out


def parse_cross_fit(specs: Sequence[str]) -> dict[str, Path]:
    """``conv=DIR`` specs: each a dev conversation, once, and an existing cross-encoder folder."""
    folds: dict[str, Path] = {}
    for spec in specs:
        conv, sep, path = spec.partition("=")
        if not sep or not path:
            raise ValueError(f"--cross-fit {spec!r}: expected <conversation>=<cross-encoder folder>")
        if conv not in LOCOMO_DEV:
            raise ValueError(f"--cross-fit {spec!r}: {conv!r} is not a dev conversation ({', '.join(LOCOMO_DEV)})")
        if conv in folds:
            raise ValueError(f"--cross-fit names {conv} twice")
        if not Path(path).is_dir():
            raise ValueError(f"--cross-fit {spec!r}: no folder {path}")
        folds[conv] = Path(path)
    return folds


def cross_fitted(rows: Mapping[str, Mapping[str, np.ndarray]], folds: Mapping[str, Path],
                 read: Callable[[str, Path], Mapping[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
    """``rows`` with each fold's conversation's rows replaced by ``read(conversation, folder)``'s."""
    out = {name: dict(d) for name, d in rows.items()}
    for conv, folder in folds.items():
        out[f"locomo:{conv}"] = dict(read(conv, folder))
    return out


def _read_fold(conv: str, folder: Path) -> dict[str, np.ndarray]:
    with tempfile.TemporaryDirectory(prefix="engram-calibrate-fold-") as tmp, \
            EvalServer(Path(tmp) / "data", reranker=str(folder)) as server:
        return collect_locomo(server, only=(conv,))[f"locomo:{conv}"]


def select(rows: Mapping[str, Mapping[str, np.ndarray]],
           conversations: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
    """The fit's data sets: SciFact, and the named LoCoMo conversations' rows as one set."""
    missing = [c for c in conversations if f"locomo:{c}" not in rows]
    if missing:
        raise ValueError(f"no rows for LoCoMo conversations {missing}")
    parts = [rows[f"locomo:{c}"] for c in conversations]
    locomo = {k: np.concatenate([p[k] for p in parts if len(p[k])]) for k in ROW_KEYS if all(k in p for p in parts)}
    for key in ("fq", "rq"):   # query indices stay distinct across the conversations
        if key in locomo:
            offsets = np.cumsum([0] + [int(p[key].max()) + 1 if len(p[key]) else 0 for p in parts[:-1]])
            locomo[key] = np.concatenate([p[key] + o for p, o in zip(parts, offsets, strict=True) if len(p[key])])
    return {"scifact": dict(rows["scifact"]), "locomo": locomo}


def save_rows(path: Path, rows: Mapping[str, Mapping[str, np.ndarray]]) -> None:
    np.savez_compressed(path, **{f"{name}|{k}": v for name, d in rows.items() for k, v in d.items()})


def load_rows(path: Path) -> dict[str, dict[str, np.ndarray]]:
    out: dict[str, dict[str, np.ndarray]] = {}
    with np.load(path) as z:
        for key in z.files:
            name, k = key.split("|")
            out.setdefault(name, {})[k] = z[key]
    return out


def _q(question):  # type: ignore[no-untyped-def]
    from benchmarks.quality.datasets import Query

    return Query(id=question.id, text=question.text)


def fit(data: Mapping[str, Mapping[str, np.ndarray]], xkey: str, ykey: str) -> tuple[np.ndarray, float, dict]:
    xs, ys, ws = [], [], []
    for name, d in data.items():
        if len(d[xkey]) == 0:
            continue
        xs.append(d[xkey])
        ys.append(d[ykey])
        ws.append(np.full(len(d[ykey]), 1.0 / len(d[ykey])))   # each data set weighs the same
    x, y, w = np.vstack(xs), np.concatenate(ys), np.concatenate(ws)
    w = w / w.mean()
    coef, intercept = fit_logistic(x, y, w)
    stats = {}
    for name, d in data.items():
        p = 1.0 / (1.0 + np.exp(-(d[xkey] @ coef + intercept)))
        stats[name] = {"rows": int(len(d[ykey])), "positives": int(d[ykey].sum()),
                       "mean_p": round(float(p.mean()), 4), "base_rate": round(float(d[ykey].mean()), 4),
                       "mean_p_positive": round(float(p[d[ykey] > 0].mean()), 4),
                       "log_loss": round(float(-np.mean(d[ykey] * np.log(p + 1e-12) + (1 - d[ykey]) * np.log(1 - p + 1e-12))), 4)}
    return coef, intercept, stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=repo_root() / "server" / "fusion" / "calibration.json")
    parser.add_argument("--make-default", action="store_true", help="make this embedder's fit the file's default")
    parser.add_argument("--report", type=Path, default=None,
                        help="the fit's report (default benchmarks/results/quality/calibration-<embedder>.json)")
    parser.add_argument("--locomo", choices=("dev", "all"), default="dev",
                        help="LoCoMo conversations fitted on: the dev ones (default) or all five")
    parser.add_argument("--rows", type=Path, default=None,
                        help="an .npz of collected rows: read if it exists (no server run), else written")
    parser.add_argument("--leave-out", default="", help="a dev conversation left out of the fit (to measure it)")
    parser.add_argument("--cross-fit", action="append", default=[], metavar="CONV=DIR",
                        help="a dev conversation's rows read through this cross-encoder (its question stage trained "
                             "without the conversation); repeat for each")
    parser.add_argument("--fold-rows", type=Path, default=None,
                        help="an .npz of the cross-fitted conversations' rows: read if it exists, else written")
    args = parser.parse_args(argv)
    try:
        folds = parse_cross_fit(args.cross_fit)
    except ValueError as e:
        parser.error(str(e))
    if args.leave_out and args.leave_out not in LOCOMO_DEV:
        parser.error(f"--leave-out must name a dev conversation ({', '.join(LOCOMO_DEV)})")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for noisy in ("server", "models"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.rows is not None and args.rows.is_file():
        rows = load_rows(args.rows)
        names = {k: str(v) for k, v in json.loads(args.rows.with_suffix(".json").read_text()).items()}
    else:
        with tempfile.TemporaryDirectory(prefix="engram-calibrate-") as tmp, EvalServer(Path(tmp) / "data") as server:
            info = server.info()
            names = {"embedder": info.embedder.name, "reranker": info.reranker.name}
            rows = collect(server)
        if args.rows is not None:
            save_rows(args.rows, rows)
            args.rows.with_suffix(".json").write_text(json.dumps(names) + "\n")
    if folds:
        if args.fold_rows is not None and args.fold_rows.is_file():
            kept = load_rows(args.fold_rows)
            rows = cross_fitted(rows, folds, lambda conv, _: kept[f"locomo:{conv}"])
        else:
            rows = cross_fitted(rows, folds, _read_fold)
            if args.fold_rows is not None:
                save_rows(args.fold_rows, {f"locomo:{c}": rows[f"locomo:{c}"] for c in folds})
    conversations = LOCOMO_DEV if args.locomo == "dev" else LOCOMO_DEV + LOCOMO_HELD_OUT
    if args.leave_out:
        conversations = tuple(c for c in conversations if c != args.leave_out)
    data = select(rows, conversations)
    fcoef, fint, fstats = fit(data, "fx", "fy")
    rcoef, rint, rstats = fit(data, "rx", "ry")
    source = ("benchmarks/quality/calibrate.py: SciFact train claims (cross-encoder: its held-out dev claims) over the "
              f"test corpus, and LoCoMo questions (categories 1-4) of {', '.join(conversations)} over "
              "'<speaker>: <text>' turns written one by one (threaded by the server); equal weight each"
              + ("; cross-fitted: " + ", ".join(f"{c} through {p.name}" for c, p in folds.items()) + " (each "
                 "cross-encoder's question stage trained without that conversation)" if folds else ""))
    fit_entry = {
        "reranker": names["reranker"], "source": source,
        "fused": {"features": list(FUSED_FEATURES), "coef": [round(float(c), 5) for c in fcoef], "intercept": round(fint, 5)},
        "rerank": {"features": list(RERANK_FEATURES), "coef": [round(float(c), 5) for c in rcoef], "intercept": round(rint, 5)},
    }
    # One fit per embedder, kept beside the others; the one just made becomes the default when asked.
    calibration = json.loads(args.out.read_text()) if args.out.is_file() else {"fits": {}}
    calibration["fits"][names["embedder"]] = fit_entry
    if args.make_default or "default" not in calibration:
        calibration["default"] = names["embedder"]
    args.out.write_text(json.dumps(calibration, indent=2) + "\n")
    if args.report is None:
        slug = names["embedder"].rsplit("/", 1)[-1]
        args.report = repo_root() / "benchmarks" / "results" / "quality" / f"calibration-{slug}.json"
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps({"embedder": names["embedder"], **fit_entry,
                                       "fit": {"fused": fstats, "rerank": rstats}}, indent=2) + "\n")
    log.info("fused %s %.3f %s", fcoef, fint, fstats)
    log.info("rerank %s %.3f %s", rcoef, rint, rstats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
