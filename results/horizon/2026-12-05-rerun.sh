#!/bin/bash
# The pre-registered rerun (docs/PREREGISTERED-RERUN.md): ES and random search first, then GRPO, one core.
while pgrep -f run-validation.sh >/dev/null; do sleep 10; done
cd /work/wt-ci
d=results/horizon/2026-12-05-all-linear
mkdir -p $d
cfg=configs/rerun-2026-12-05/horizon-all-linear.json
for methods in es,randomSearch grpo; do
  { echo "command: taskset -c 1 node trainer/cli/bin.js experiment horizon --config $cfg --methods $methods --out $d --store /tmp/rerun-store"; echo "commit $(git rev-parse HEAD)"; echo "start $(date -u +%FT%TZ)"; uptime; } >> $d/machine.txt
  taskset -c 1 node trainer/cli/bin.js experiment horizon --config $cfg --methods $methods --out $d --store /tmp/rerun-store >> $d/stdout.txt 2>> $d/log.txt
  { echo "exit $?"; echo "end $(date -u +%FT%TZ)"; uptime; } >> $d/machine.txt
done
