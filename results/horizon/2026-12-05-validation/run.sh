#!/bin/bash
# Pre-registered validation runs (docs/PREREGISTERED-RERUN.md), one after another on one core.
cd /work/wt-ci
OUT=results/horizon/2026-12-05-validation
mkdir -p $OUT
for name in all-linear attention mlp all; do
  d=$OUT/$name; mkdir -p $d
  { echo "command: taskset -c 1 node trainer/cli/bin.js experiment horizon --config configs/rerun-2026-12-05/validation-$name.json --methods es --out $d"; echo "commit $(git rev-parse HEAD)"; echo "start $(date -u +%FT%TZ)"; uptime; } > $d/machine.txt
  taskset -c 1 node trainer/cli/bin.js experiment horizon --config configs/rerun-2026-12-05/validation-$name.json --methods es --out $d --store /tmp/val-store-$name > $d/stdout.txt 2> $d/log.txt
  { echo "exit $?"; echo "end $(date -u +%FT%TZ)"; uptime; } >> $d/machine.txt
done
