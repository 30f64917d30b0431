#!/bin/sh
# Generates the TypeScript types and grpc-js service definitions from proto/engram/v1/*.proto with ts-proto
# (pinned in package.json), run as a protoc plugin through grpcio-tools' protoc (the Python venv's).
# Usage (from clients/typescript): sh scripts/generate.sh OUT_DIR   (npm run generate writes src/gen)
# PYTHON: the Python with grpcio-tools (default: the repository's .venv); PROTO_ROOT: the proto/ tree (default: the
# repository's).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?usage: generate.sh OUT_DIR}
python=${PYTHON:-$repo/.venv/bin/python}
proto=${PROTO_ROOT:-$repo/proto}
mkdir -p "$out"
"$python" -m grpc_tools.protoc \
  --plugin=protoc-gen-ts_proto="$here/node_modules/.bin/protoc-gen-ts_proto" \
  --ts_proto_out="$out" \
  --ts_proto_opt=outputServices=grpc-js,esModuleInterop=true,env=node,useOptionals=none,exportCommonSymbols=false \
  -I "$proto" \
  "$proto/engram/v1/messages.proto" "$proto/engram/v1/service.proto"
