#!/usr/bin/env bash
# A run trained by `esopt train` on the torch-llama-tied fixture (scripted policy: rewards vary by member, so
# every update moves θ), in low-rank and full mode; θ_K exported as safetensors with esopt's greedy tokens
# beside it; then PyTorch loads the file by name into the fixture's model and decodes the same prompts.
#   bash results/export/check-safetensors-torch.sh > results/export/check-safetensors-torch-2026-12-05.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for mode in lowrank full; do
  cat > "$work/$mode.json" <<JSON
{ "environment": { "name": "sudoku", "options": { "size": 4, "blanks": 4, "shapedReward": true, "invalidMove": "waste" } }, "tasks": { "seed": 3, "trainPerIteration": 2, "evalCount": 2 },
  "model": { "dir": "test/fixtures/torch-llama-tied" }, "mode": "$mode", "rank": 2,
  "es": { "population": 6, "sigma": 0.05, "alpha": 0.5, "weightDecay": 0 }, "iterations": 4, "evalInterval": 4, "checkpointInterval": 2,
  "policy": "scripted:random", "workers": 1, "seed": 11 }
JSON
  echo "\$ node trainer/cli/bin.js train --config $mode.json --run torch-$mode --store STORE --json"
  node trainer/cli/bin.js train --config "$work/$mode.json" --run "torch-$mode" --store "$work/store" --json 2>/dev/null | tail -1 | node -e 'const r = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(JSON.stringify({ run: r.run, iterations: r.iterations, thetaHash: r.thetaHash }))'
  echo "\$ npx tsx scripts/export-greedy.ts --store STORE --run torch-$mode --out OUT-$mode --format safetensors --iteration 3 --prompts test/fixtures/torch-llama-tied/greedy.json"
  npx tsx scripts/export-greedy.ts --store "$work/store" --run "torch-$mode" --out "$work/out-$mode" --format safetensors --iteration 3 --prompts test/fixtures/torch-llama-tied/greedy.json 2>/dev/null \
    | node -e 'const s = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(JSON.stringify({ iteration: s.iteration, thetaHash: s.thetaHash, checkpoint: s.checkpoint, replayed: s.replayed, files: s.files.map((f) => `${f.path} ${f.bytes}`) }))'
  echo "\$ /usr/bin/python3 scripts/check-safetensors-torch.py OUT-$mode test/fixtures/torch-llama-tied"
  /usr/bin/python3 scripts/check-safetensors-torch.py "$work/out-$mode" test/fixtures/torch-llama-tied | sed "s|$work/||g"
done
