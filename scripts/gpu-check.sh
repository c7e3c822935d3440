#!/usr/bin/env bash
# GPU check for the model runtime: on a machine with an NVIDIA GPU, build the `small` model, load it with
# onnxruntime's CUDA execution provider and run the low-rank benchmark there. Exits non-zero with a
# message saying which step failed (no driver, no CUDA EP binaries, session creation failed).
#
# onnxruntime-node ships the CUDA EP binaries separately (too large for npm): this repository's .npmrc
# skips them, so on a GPU box fetch them once with
#   ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js
# (needs network access to the NuGet feed, CUDA 12 and cuDNN 9 on the library path).
set -uo pipefail
cd "$(dirname "$0")/.."

fail() { echo "gpu-check: FAIL: $*" >&2; exit 1; }

command -v nvidia-smi >/dev/null 2>&1 || fail "nvidia-smi not found: no NVIDIA driver on this machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || fail "nvidia-smi cannot talk to the driver"

ORT_BIN=node_modules/onnxruntime-node/bin/napi-v6/linux/x64
if ! ls "$ORT_BIN"/libonnxruntime_providers_cuda.so >/dev/null 2>&1; then
  fail "onnxruntime-node has no CUDA EP binaries in $ORT_BIN (libonnxruntime_providers_cuda.so); install them with: ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js"
fi

echo "gpu-check: low-rank benchmark on the small preset with the CUDA execution provider" >&2
OUT=$(node trainer/cli/bin.js bench lowrank --provider cuda --json "$@" 2>&1) || fail "the CUDA execution provider did not load or run: ${OUT}"
echo "$OUT"
echo "gpu-check: OK" >&2
