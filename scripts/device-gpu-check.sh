#!/usr/bin/env bash
# The GPU check on a lent machine with no Node and no network (docs/MODEL.md, "GPU"): unpacks
# .gpu-bundle/ (scripts/device-bundle.sh: Node, the npm packages, the Vulkan loader), checks the NVIDIA
# driver and that onnxruntime-node's WebGPU provider finds an adapter, checks greedy decoding of `small`
# on webgpu against the CPU token for token (KV caches on the device), builds the model, then measures
# `bench transfer` (host ↔ device bytes a decode step, the device route beside the host route, and full
# mode's member switch on the host route and on the device-noise route) and runs
# `bench lowrank`, `bench full` and `bench server` with `--provider webgpu` and `--provider cpu` one after
# the other (GPU ÷ CPU), sampling nvidia-smi meanwhile. Writes OUTDIR/device-gpu-check.json (each step's
# command, result or failure, the GPU ÷ CPU ratios and the issue's goals: webgpu ÷ CPU base tokens/s at
# B = 32 ≥ 3, member switch ÷ 32-token episode ≤ 0.05 on the host route and with the device noise (θ kept
# on the device, `bench full`'s device_noise, with its member tokens/s, its graph runs and nodes a switch, and
# the same switch with a graph run per piece beside it), decode-step bytes ÷ logits + token ids),
# OUTDIR/smi.csv (the samples) and OUTDIR/steps.tar.gz (each step's output and log). Setup steps fail
# fast, naming the step; each benchmark is bounded by its own limit and by the whole run's deadline
# (ESOPT_DEADLINE_S, default 450 s, so the run ends within about 8 minutes), recorded as failed or skipped,
# never retried; the goals' benchmarks run first.
# Usage: scripts/device-gpu-check.sh OUTDIR [--model NAME] [--quick]
#   --quick: `small`-sized runs (the local rehearsal); environment: NVIDIA_SMI (default nvidia-smi),
#   ESOPT_GL_ROOT (where the Vulkan loader debs are unpacked, default /), VK_DRIVER_FILES (default the
#   NVIDIA driver's ICD under /usr/local/nvidia), ESOPT_DEVICE_WORK (scratch, default /tmp/esopt-device).
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:?usage: scripts/device-gpu-check.sh OUTDIR [--model NAME] [--quick]}
shift
MODEL=qwen3-0.6b-shape
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    *) echo "device-gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
B=.gpu-bundle
W=${ESOPT_DEVICE_WORK:-/tmp/esopt-device}
DEADLINE=${ESOPT_DEADLINE_S:-450}
START=$(date +%s)
STEPS=$W/steps
rm -rf "$STEPS"
mkdir -p "$W" "$STEPS"
STEP=start
elapsed() { echo $(($(date +%s) - START)); }
say() { echo "[$(elapsed)s] device-gpu-check: $*" >&2; }
# A step's record: name, status (ok|failed|timeout|skipped|differs), seconds, command, and its JSON output if any.
record() {
  local name=$1 status=$2 secs=$3 cmd=$4 json=${5:-}
  cmd=${cmd//$'\n'/ }
  cmd=${cmd//$'\t'/ }
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$secs" "$cmd" "$json" >> "$STEPS/steps.tsv"
}
summary() {
  [ -x "$W/node" ] || { say "no node to write the JSON summary with: see steps.tsv in steps.tar.gz"; return; }
  GPU="${GPU:-}" "$W/node" -e '
    const fs = require("node:fs");
    const [tsv, out, started] = process.argv.slice(1);
    const steps = fs.readFileSync(tsv, "utf8").trim().split("\n").filter(Boolean).map((l) => {
      const [name, status, seconds, command, json] = l.split("\t");
      let result = null;
      if (json && fs.existsSync(json)) { try { result = JSON.parse(fs.readFileSync(json, "utf8")); } catch (e) { result = { unparsed: fs.readFileSync(json, "utf8").slice(0, 2000) }; } }
      return { name, status, seconds: Number(seconds), command, result };
    });
    // GPU ÷ CPU of the same benchmark and sizes, where both ran
    const r = (n) => steps.find((s) => s.name === n && s.status === "ok")?.result;
    const ratio = (a, b) => (a && b ? a / b : null);
    const lw = r("lowrank-webgpu"), lc = r("lowrank-cpu"), sw = r("server-webgpu"), sc = r("server-cpu"), fw = r("full-webgpu"), fc = r("full-cpu");
    const gpu_over_cpu = {
      lowrank: lw && lc ? lw.batches.map((b, i) => ({ batch: b.batch, base_tokens_per_s: ratio(b.base_tokens_per_s, lc.batches[i]?.base_tokens_per_s), lowrank_tokens_per_s: ratio(b.lowrank_tokens_per_s, lc.batches[i]?.lowrank_tokens_per_s) })) : null,
      server_tokens_per_s: ratio(sw?.server_tokens_per_s, sc?.server_tokens_per_s),
      offline_tokens_per_s: ratio(sw?.offline_tokens_per_s, sc?.offline_tokens_per_s),
      full_episode_speed: ratio(fc?.episode_ms, fw?.episode_ms),
    };
    // the goals of issue 32 (docs/BENCHMARKS.md, "GPU")
    const tr = r("transfer"), b32 = gpu_over_cpu.lowrank?.find((b) => b.batch === 32);
    const step = (way, onDevice) => tr?.measured?.find((w) => w.way === way)?.routes.find((x) => x.kv_on_device === onDevice);
    const goals = {
      webgpu_over_cpu_base_tokens_per_s_b32: { value: b32?.base_tokens_per_s ?? null, goal: ">= 3" },
      member_switch_over_32_token_episode_webgpu: { value: fw?.switch_with_upload_ratio ?? null, host_switch_only: fw?.switch_ratio ?? null, theta_upload_ms: fw?.theta_upload_ms ?? null, episode_tokens: fw?.episode_tokens ?? null, goal: "<= 0.05" },
      // full mode with the run noise esopt-device-noise: θ stays on the device, each member is made there
      member_switch_over_32_token_episode_webgpu_device_noise: { value: fw?.device_noise?.switch_ratio ?? null, switch_ms: fw?.device_noise?.switch_ms ?? null, episode_ms: fw?.device_noise?.episode_ms ?? null, member_tokens_per_s: fw?.device_noise?.member_tokens_per_s ?? null, switch_host_to_device_bytes: fw?.device_noise?.switch_host_to_device_bytes ?? null, graph_runs_per_switch: fw?.device_noise?.graph_runs_per_switch ?? null, graph_nodes_per_switch: fw?.device_noise?.graph_nodes_per_switch ?? null, per_piece: fw?.device_noise?.per_piece ?? null, goal: "<= 0.05" },
      member_switch_bytes: tr?.member_switch ?? null,
      decode_step_bytes: tr?.measured ? { goal_bytes: tr.measured[0].goal_bytes, lowrank_device: step("lowrank", true)?.decode_step.total_bytes, lowrank_host: step("lowrank", false)?.decode_step.total_bytes, full_inputs_device: step("full-inputs", true)?.decode_step.total_bytes, full_inputs_host: step("full-inputs", false)?.decode_step.total_bytes, goal: "logits + token ids" } : null,
    };
    fs.writeFileSync(out, JSON.stringify({ gpu: process.env.GPU, started, finished: new Date().toISOString(), ok: steps.every((s) => s.status === "ok"), goals, gpu_over_cpu, steps }, null, 2) + "\n");
  ' "$STEPS/steps.tsv" "$OUTDIR/device-gpu-check.json" "$(date -u -d @"$START" +%FT%TZ)" || say "could not write the JSON summary"
}
SMI_PID=
finish() {
  [ -n "$SMI_PID" ] && kill "$SMI_PID" 2>/dev/null
  summary
  tar -czf "$OUTDIR/steps.tar.gz" -C "$W" steps 2>/dev/null || say "could not pack the steps' outputs"
}
trap finish EXIT
fail() { say "FAIL at step '$STEP': $*"; record "$STEP" failed "$(elapsed)" "$*"; exit 1; }
: > "$STEPS/steps.tsv"

STEP=driver
SMI=${NVIDIA_SMI:-nvidia-smi}
command -v "$SMI" >/dev/null 2>&1 || fail "nvidia-smi not found: no NVIDIA driver on this machine"
GPU=$("$SMI" --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1) || fail "nvidia-smi cannot talk to the driver: $GPU"
say "GPU: $GPU; $(nproc) cores; $(awk '/MemTotal/ {print int($2/1048576) " GiB"}' /proc/meminfo)"
record driver ok "$(elapsed)" "$SMI --query-gpu=name,driver_version,memory.total"

STEP=bundle
for f in "$B/node.xz" "$B/modules.tar.xz"; do [ -s "$f" ] || fail "$f missing: run scripts/device-bundle.sh here and carry .gpu-bundle"; done
ls "$B"/gl/*.deb >/dev/null 2>&1 || fail "$B/gl/*.deb missing: run scripts/device-bundle.sh"
xz -dc "$B/node.xz" > "$W/node" && chmod +x "$W/node" || fail "could not unpack $B/node.xz"
export PATH="$W:$PATH"
NODE_VERSION=$("$W/node" --version 2>&1) || fail "the carried node does not run here: $NODE_VERSION"
if [ -e node_modules ]; then say "node_modules exists: using it (a rehearsal), not the bundle's"; else
  tar -xJf "$B/modules.tar.xz" || fail "could not unpack $B/modules.tar.xz"
fi
say "node $NODE_VERSION, npm packages unpacked"
record bundle ok "$(elapsed)" "node $NODE_VERSION"

STEP=vulkan
GL_ROOT=${ESOPT_GL_ROOT:-/}
mkdir -p "$GL_ROOT"
for f in "$B"/gl/*.deb; do dpkg -x "$f" "$GL_ROOT" || fail "dpkg -x $f failed"; done
if [ "$GL_ROOT" = / ]; then ldconfig || fail "ldconfig failed"; else export LD_LIBRARY_PATH="$GL_ROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
NV_ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ]; then
  [ -f "$NV_ICD" ] || fail "no Vulkan ICD: $NV_ICD is absent and VK_DRIVER_FILES is unset ($(ls /usr/local/nvidia/share/vulkan/icd.d 2>&1 | tr '\n' ' '))"
  export VK_DRIVER_FILES=$NV_ICD
fi
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
# the driver's ICD names its library bare (libGLX_nvidia.so.0): let the loader find it where the driver lives
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"; done
[ -f "$NV_ICD" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
say "Vulkan ICD $VK_DRIVER_FILES: $(tr -d ' \n' < "$VK_DRIVER_FILES" | head -c 200)"
record vulkan ok "$(elapsed)" "dpkg -x $B/gl/*.deb $GL_ROOT; VK_DRIVER_FILES=$VK_DRIVER_FILES"

STEP=backends
BACKENDS=$(node -e 'const o = require("onnxruntime-node"); console.log(JSON.stringify(o.listSupportedBackends()))' 2>&1) || fail "onnxruntime-node does not load: $BACKENDS"
echo "$BACKENDS" | grep -q '"webgpu"' || fail "onnxruntime-node lists no webgpu backend: $BACKENDS"
say "onnxruntime-node backends: $BACKENDS"
record backends ok "$(elapsed)" "listSupportedBackends"

"$SMI" --query-gpu=timestamp,utilization.gpu,memory.used,power.draw,clocks.sm --format=csv -lms 500 > "$OUTDIR/smi.csv" 2>/dev/null &
SMI_PID=$!

# name, limit (s), then the command; its stdout is the step's JSON, its stderr goes to the log
run_step() {
  local name=$1 limit=$2; shift 2
  local left=$((DEADLINE - $(elapsed)))
  if [ "$left" -lt 15 ]; then say "$name: skipped, the run's deadline is ${DEADLINE}s"; record "$name" skipped 0 "$*"; return 2; fi
  [ "$limit" -gt "$left" ] && limit=$left
  say "$name (limit ${limit}s): $*"
  local t0 rc; t0=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$STEPS/$name.json" 2> >(tee "$STEPS/$name.err" | grep -v 'CleanUnusedInitializersAndNodeArgs\|VerifyEachNodeIsAssignedToAnEp\|artificially reduced' >&2)
  rc=$?
  local secs=$(($(date +%s) - t0))
  case $rc in
    0) record "$name" ok "$secs" "$*" "$STEPS/$name.json"; say "$name: ok in ${secs}s" ;;
    124|137) record "$name" timeout "$secs" "$*"; say "$name: TIMEOUT after ${secs}s" ;;
    3) record "$name" differs "$secs" "$*" "$STEPS/$name.json"; say "$name: tokens differ (recorded)" ;;
    *) record "$name" failed "$secs" "$* (exit $rc: $(grep -v 'CleanUnused\|VerifyEach\|artificially' "$STEPS/$name.err" | tail -3 | tr '\n' ' ' | cut -c1-600))" "$STEPS/$name.json"; say "$name: FAILED (exit $rc)" ;;
  esac
  return $rc
}
ESOPT=(node trainer/cli/bin.js)

STEP=parity
run_step parity 120 node --import tsx scripts/provider-parity.ts --provider webgpu --model small --rows 4 --new-tokens 32
case $? in 0|3) ;; *) STEP=parity; fail "the webgpu provider does not decode here (parity.err in steps.tar.gz)";; esac

STEP=model
say "building $MODEL (cached under .esopt/models)"
run_step model 150 node --import tsx --input-type=module -e "
  const { openModel } = await import('./trainer/engine/model/open-model.ts');
  const { modelSpecFlag } = await import('./trainer/engine/model/presets.ts');
  const t = Date.now();
  const model = openModel(modelSpecFlag(${MODEL@Q}, 0));
  console.log(JSON.stringify({ model: ${MODEL@Q}, dir: model.dir, open_ms: Date.now() - t }));" || { STEP=model; fail "could not build or open $MODEL"; }

if [ "$QUICK" = 1 ]; then
  TRANSFER=(--batch 4 --prompt 8 --new-tokens 4)
  LOWRANK=(--batches 4 --prompt-tokens 8 --new-tokens 8 --repeats 1)
  SERVER=(--concurrency 4 --max-tokens 8 --repeats 1)
  FULL=(--batches 1 --prompt-tokens 8 --new-tokens 4 --episode-tokens 32 --repeats 1 --cycles 10)
else
  TRANSFER=(--batch 32 --prompt 64 --new-tokens 8)
  LOWRANK=(--batches 8,32 --prompt-tokens 16 --new-tokens 16 --repeats 2)
  SERVER=(--concurrency 8 --max-tokens 16 --repeats 2)
  # the goal's episode: 32 tokens
  FULL=(--batches 1 --prompt-tokens 16 --new-tokens 8 --episode-tokens 32 --repeats 2 --cycles 20)
fi
FAILED=0
# host ↔ device bytes a decode step, measured on webgpu: the host route of full mode feeds θ every step
# (2.4 GB at qwen3-0.6b-shape, ≈ 1.6 s a step on the H200), so its 8 steps bound the limit, with full
# mode's member switch on both routes after them (θ uploaded once a member batch, and once)
run_step transfer 130 "${ESOPT[@]}" bench transfer --model "$MODEL" --context 1024 --measure-on webgpu "${TRANSFER[@]}" --json || FAILED=1
for bench in lowrank full server; do
  # limits from the H200 run of 2026-12-04 (results/gpu/); full mode's webgpu run now uploads θ once an
  # episode instead of every step; its CPU twin still goes first
  case $bench in lowrank) args=("${LOWRANK[@]}"); limit=100; order="webgpu cpu" ;; server) args=("${SERVER[@]}"); limit=90; order="webgpu cpu" ;; full) args=("${FULL[@]}"); limit=140; order="cpu webgpu" ;; esac
  for provider in $order; do
    run_step "$bench-$provider" "$limit" "${ESOPT[@]}" bench "$bench" --model "$MODEL" --provider "$provider" "${args[@]}" --json || FAILED=1
  done
done
say "done in $(elapsed)s; results in $OUTDIR/device-gpu-check.json"
exit $FAILED
