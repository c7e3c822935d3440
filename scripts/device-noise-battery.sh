#!/usr/bin/env bash
# Runs dieharder tests on the device noise definition's mixed words (scripts/device-noise-stream.ts) for
# version 1 and the draft mixer, each stream consecutive and members interleaved, at nice 19; appends each
# test's raw output to results/noise/$DATE-dieharder-<mixer>-<layout>.txt. A test is D or D:N (-d D -n N:
# the 200-series tests need an ntuple, which -a supplies and a single -d does not). Tests go one at a time
# over the four streams, so a run cut short leaves the same tests done for each.
#   scripts/device-noise-battery.sh [TEST ...]
set -euo pipefail
cd "$(dirname "$0")/.."
DATE=${DATE:-2026-12-05}
TESTS=("$@")
[ ${#TESTS[@]} -gt 0 ] || TESTS=(0 1 2 3 4 8 9 10 11 12 13 15 16 17 100 101 102 200:1 200:2 200:3 201:2 201:3 201:4 202:2 202:3 204 205 206 207 208 209)
for t in "${TESTS[@]}"; do
  args=(-d "${t%%:*}")
  [[ $t == *:* ]] && args+=(-n "${t#*:}")
  for mixer in v1 draft; do
    for layout in consecutive members; do
      out=results/noise/$DATE-dieharder-$mixer-$layout.txt
      {
        echo "# dieharder -g 200 ${args[*]}  <  scripts/device-noise-stream.ts --mixer $mixer --layout $layout   ($(date -u +%FT%TZ))"
        nice -n 19 node_modules/.bin/tsx scripts/device-noise-stream.ts --mixer "$mixer" --layout "$layout" 2>/dev/null \
          | nice -n 19 dieharder -g 200 "${args[@]}" 2>&1 | grep -v '^#=\+#$\|dieharder version\|^ *rng_name\|^ *stdin_input_raw|' || true
      } >> "$out"
    done
  done
done
