#!/bin/bash
cd /work/main
for m in small qwen3-0.6b-shape; do for v in "float64 0" "float32 0" "float32 0.04"; do set -- $v
  echo "=== $m $1 kl $2 $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -f "wall %e s" npx esopt bench memory --vs grpo --grpo-state $1 --grpo-kl $2 --model $m --population 2 --batch 1 --prompt-tokens 16 --new-tokens 16 --iterations 1 --json 2>&1 | grep -v "npm warn\|onnxruntime"
done; done
echo "=== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
