#!/usr/bin/env bash
# GPU check at a real model shape: on a machine with an NVIDIA GPU, build the qwen3-0.6b-shape preset
# (once, cached under .esopt/models), load it with onnxruntime's CUDA execution provider and run there
# `bench lowrank` (tokens/s, low-rank ÷ base), `bench full` (θ as inputs ÷ initializers, the member switch)
# and `bench server` (HTTP ÷ offline), plus `bench transfer` (bytes per step, computed). Writes one JSON
# file (default gpu-check.json; `--out FILE`) with the GPU, each result and the exact commands. Exits
# non-zero with the step that failed (no driver, no CUDA EP binaries, a benchmark that did not run).
#
# onnxruntime-node ships the CUDA EP binaries separately (too large for npm): this repository's .npmrc
# skips them, so on a GPU box fetch them once with
#   ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js
# (needs network access to the NuGet feed, CUDA 12 and cuDNN 9 on the library path).
# The webgpu route, which needs no extra binaries, on a machine without Node: scripts/device-gpu-check.sh.
# Usage: scripts/gpu-check.sh [--out FILE] [--model NAME|DIR]
set -uo pipefail
cd "$(dirname "$0")/.."

OUT_FILE=gpu-check.json
MODEL=qwen3-0.6b-shape
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT_FILE="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    *) echo "gpu-check: unknown argument $1 (usage: scripts/gpu-check.sh [--out FILE] [--model NAME|DIR])" >&2; exit 2 ;;
  esac
done

fail() { echo "gpu-check: FAIL: $*" >&2; exit 1; }
SMI="${NVIDIA_SMI:-nvidia-smi}"

command -v "$SMI" >/dev/null 2>&1 || fail "nvidia-smi not found: no NVIDIA driver on this machine, so there is no GPU to check (nothing was run)"
GPU=$("$SMI" --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1) || fail "nvidia-smi cannot talk to the driver: $GPU"
echo "gpu-check: $GPU" >&2

ORT_BIN=node_modules/onnxruntime-node/bin/napi-v6/linux/x64
if ! ls "$ORT_BIN"/libonnxruntime_providers_cuda.so >/dev/null 2>&1; then
  fail "onnxruntime-node has no CUDA EP binaries in $ORT_BIN (libonnxruntime_providers_cuda.so); install them with: ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js"
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# name, then the esopt arguments; each result lands in $TMP/name.json
bench() {
  local name=$1; shift
  echo "gpu-check: esopt $* --json" >&2
  echo "esopt $*" > "$TMP/$name.cmd"
  node trainer/cli/bin.js "$@" --json > "$TMP/$name.json" 2> "$TMP/$name.err" || fail "esopt $* failed (the CUDA execution provider did not load or run): $(tail -5 "$TMP/$name.err")"
}
bench transfer bench transfer --model "$MODEL" --batch 32 --context 1024
bench lowrank bench lowrank --model "$MODEL" --provider cuda --batches 8,32 --prompt-tokens 16 --new-tokens 48 --repeats 5
bench full bench full --model "$MODEL" --provider cuda --batches 1,8 --prompt-tokens 64 --new-tokens 64 --episode-tokens 256 --repeats 3 --cycles 200
bench server bench server --model "$MODEL" --provider cuda --concurrency 32 --max-tokens 32 --repeats 3

GPU="$GPU" TMP="$TMP" node -e '
  const fs = require("node:fs");
  const part = (n) => ({ command: fs.readFileSync(`${process.env.TMP}/${n}.cmd`, "utf8").trim(), result: JSON.parse(fs.readFileSync(`${process.env.TMP}/${n}.json`, "utf8")) });
  const out = { gpu: process.env.GPU, date: new Date().toISOString(), transfer: part("transfer"), lowrank: part("lowrank"), full: part("full"), server: part("server") };
  process.stdout.write(JSON.stringify(out, null, 2) + "\n");
' > "$OUT_FILE" || fail "could not write $OUT_FILE"
echo "gpu-check: OK, results in $OUT_FILE" >&2
