#!/usr/bin/env bash
# The horizon experiment as it was run for docs/RESULTS.md: one process per (H, seed) cell of
# configs/experiment-horizon.json, all in parallel on a 16-core machine. Usage: results/horizon/device-run.sh OUTDIR
set -euo pipefail
out=$1
mkdir -p "$out/raw" "$out/logs"
node -e '
const c = JSON.parse(require("fs").readFileSync("configs/experiment-horizon.json", "utf8"));
for (const h of c.horizons) for (const s of c.seeds) require("fs").writeFileSync(`/tmp/cell-h${h}-s${s}.json`, JSON.stringify({ ...c, horizons: [h], seeds: [s] }));
'
for f in /tmp/cell-h*-s*.json; do
  name=$(basename "$f" .json)
  node trainer/cli/bin.js experiment horizon --config "$f" --out "$out/raw" --store "/tmp/store-$name" --json > "$out/logs/$name.out.txt" 2> "$out/logs/$name.err.txt" &
done
wait
