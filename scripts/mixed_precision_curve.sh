#!/usr/bin/env bash
# The mixed-precision check at full length: the same run in fp32 and in bf16 (or fp16) for STEPS
# steps on the built-in corpus, then the largest gap between the two loss curves (each step's loss
# averaged over a window of 5 steps, as tests/train/test_mixed_precision.cpp does on a shorter run).
#
# Usage: scripts/mixed_precision_curve.sh [PRECISION] [OUT] [extra orion train flags...]
#   PRECISION  bf16 (default) or fp16;  OUT  folder for the two runs (default mixed-precision-curve)
# Environment: ORION (binary, default build/orion), CONFIG (stories260k), STEPS (300), BATCH (8),
#   SEQ (64), THREADS (0 = all cores), DATA (builtin:2000), LIMIT (0.02: the largest relative gap allowed)
# Exit status: 0 when the curves stay within LIMIT of each other.
set -euo pipefail
ORION=${ORION:-build/orion}
PRECISION=${1:-bf16}
OUT=${2:-mixed-precision-curve}
shift $(( $# >= 2 ? 2 : $# ))
CONFIG=${CONFIG:-stories260k} STEPS=${STEPS:-300} BATCH=${BATCH:-8} SEQ=${SEQ:-64} THREADS=${THREADS:-0}
DATA=${DATA:-builtin:2000} LIMIT=${LIMIT:-0.02}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

for p in fp32 "$PRECISION"; do
  rm -rf "$OUT/$p"
  "$ORION" train --config "$CONFIG" --data "$DATA" --steps "$STEPS" --batch "$BATCH" --seq "$SEQ" --threads "$THREADS" \
    --eval-every 0 --checkpoint-every 0 --sample 0 --export-format none --no-progress --precision "$p" \
    --metrics "$OUT/$p.csv" --out "$OUT/$p" "$@"
done

# metrics CSV: step,loss,... — compare the windowed curves.
paste -d, "$OUT/fp32.csv" "$OUT/$PRECISION.csv" | tail -n +2 | awk -F, -v limit="$LIMIT" -v n=5 -v p="$PRECISION" '
  { a[NR] = $2; b[NR] = $9 }
  END {
    worst = 0
    for (i = 1; i + n - 1 <= NR; i++) {
      sa = 0; sb = 0
      for (k = i; k < i + n; k++) { sa += a[k]; sb += b[k] }
      g = (sb - sa) / sa; if (g < 0) g = -g
      if (g > worst) { worst = g; at = i }
    }
    printf "%d steps: fp32 loss %.4f -> %.4f, %s %.4f -> %.4f; largest gap of the curves %.3f%% (steps %d..%d)\n",
      NR, a[1], a[NR], p, b[1], b[NR], 100 * worst, at, at + n - 1
    exit (worst <= limit ? 0 : 1)
  }'
