# engram: `make serve` runs the server on the embedded CPU default; `make test` runs the test suite.
# Both create .venv and install the pinned dependencies on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TS_STAMP := clients/typescript/node_modules/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: install serve test test-slow proto bench-quality bench-serving bench-index bench-durability bench-cluster reranker query-adapter reranker-student bench-rerank-cost lint package package-check clean docs

install: $(STAMP)

$(STAMP): requirements.txt requirements-integrations.txt requirements-package.txt pyproject.toml \
		clients/python/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet -r requirements-integrations.txt
	$(PY) -m pip install --quiet --no-deps pyserini==1.6.0
	$(PY) -m pip install --quiet -r requirements-package.txt
	$(PY) -m pip uninstall --quiet --yes engram  # the distribution's former name, in a .venv made before the split
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e ./clients/python -e .
	touch $(STAMP)

serve: $(STAMP)
	$(VENV)/bin/engram serve --listen 127.0.0.1:50051 --data-dir ./data --metrics-listen 127.0.0.1:9464 \
		--console-listen 127.0.0.1:8080

test: $(STAMP) $(TS_STAMP)
	$(PY) -m pytest -q

# The TypeScript client (clients/typescript): its pinned toolchain from the npm registry (no install scripts). Its
# node suite runs inside pytest against a real server (tests/e2e/test_node_client.py); test-ts runs only that file.
$(TS_STAMP): clients/typescript/package-lock.json
	@if command -v npm >/dev/null; then cd clients/typescript && npm ci --ignore-scripts --no-audit --no-fund \
		&& touch node_modules/.installed; else echo "npm not found: the TypeScript client's tests are skipped"; fi

test-ts: $(STAMP) $(TS_STAMP)
	$(PY) -m pytest -q tests/e2e/test_node_client.py

# The slow suite includes the Ray Serve cluster tests: the cluster extra (~500 MB) is installed first.
test-slow: $(STAMP) $(VENV)/.cluster-installed
	$(PY) -m pytest -q -m "slow"

$(VENV)/.cluster-installed: requirements-cluster.txt
	$(PY) -m pip install --quiet -r requirements-cluster.txt
	touch $@

# The Python stubs, then the TypeScript client's (its regeneration check in make test fails on stale ones).
proto: $(STAMP) $(TS_STAMP)
	$(PY) proto/generate.py
	@if command -v npm >/dev/null; then cd clients/typescript && npm run generate; fi

bench-quality: $(STAMP)
	$(PY) -m benchmarks.quality.run

bench-serving: $(STAMP)
	$(PY) -m benchmarks.serving.run

bench-index: $(STAMP)
	$(PY) -m benchmarks.index.run

bench-durability: $(STAMP)
	$(PY) -m benchmarks.durability.run

# Single node vs engram on Ray (benchmarks/cluster; results in benchmarks/results/cluster). Parity on the quality
# sets: python -m benchmarks.cluster.parity --suite locomo|scifact --side single|ray, then --compare.
bench-cluster: $(STAMP) $(VENV)/.cluster-installed
	$(PY) -m benchmarks.cluster.run

# Trains engram's own cross-encoder into models/weights/engram-reranker-v1 (see training/): stage one, then the
# LoCoMo dev questions' stage on top of it (training/qa_stage.py).
reranker: $(STAMP)
	$(PY) -m training
	$(PY) -m training.qa_stage

# Fits the query adapter into models/weights/engram-query-adapter (training/query_adapter.py: dev data only).
query-adapter: $(STAMP)
	$(PY) -m training.query_adapter

# Distils a 3-layer student of engram-reranker-v1 into models/weights/engram-reranker-v1-l3 (training/distill.py).
reranker-student: $(STAMP)
	$(PY) -m training.distill

# ms/pair and quality of each cross-encoder variant (benchmarks/rerank_cost; results in benchmarks/results/rerank_cost).
bench-rerank-cost: $(STAMP)
	$(PY) -m benchmarks.rerank_cost.quality --variants all --floor
	$(PY) -m benchmarks.rerank_cost.timing --variants all

# The documentation site: docs/ built by MkDocs Material into site/ (--strict: a broken link or a page missing
# from the nav fails), the gRPC and config references generated at build time (docs/gen/hooks.py), then every
# internal link of the built HTML checked (docs/gen/check_links.py).
docs: $(STAMP) $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	$(PY) docs/gen/check_links.py site

$(VENV)/.docs-installed: requirements-docs.txt
	$(PY) -m pip install --quiet -r requirements-docs.txt
	touch $@

# The two distributions, sdist and wheel each, into dist/: engram-grpc (clients/python: SDK, proto stubs, the
# `engram` command, integrations as extras) and engram-server (this directory). docs/install/packages.md.
package: $(STAMP)
	rm -rf dist
	$(PY) -m build --quiet --no-isolation --outdir dist clients/python
	$(PY) -m build --quiet --no-isolation --outdir dist .

# Installs the wheels into fresh venvs and runs them against real servers (scripts/package_check.py).
package-check: package
	$(PY) scripts/package_check.py dist

clean:
	rm -rf $(VENV) build dist *.egg-info clients/python/build clients/python/*.egg-info
