#!/usr/bin/env bash
# The original project's stability run, at full size: CHAINS chains × STEPS steps, where every step is
# a fresh `orion train` process resuming from the checkpoint the previous process wrote. Reports each
# chain's losses, the NaN/Inf count (skipped steps and non-finite losses) and the spread of step times.
# (tests/train and tests/tools run the same protocol on a tiny config; this is the big one.)
#
# Usage: scripts/stability_run.sh [CONFIG] [OUT] [extra orion train flags...]
#   CONFIG  a preset or JSON config (default stories110m; gpt2-124m works too)
#   OUT     folder for the chains (default stability-run; chain<k>/ inside, replaced)
# Environment: ORION (binary, default build/orion), CHAINS (5), STEPS (5), BATCH (4), SEQ (64),
#   THREADS (0 = all cores), DATA (default builtin:2000; each chain trains its tokenizer on it).
# Example: scripts/stability_run.sh gpt2-124m /tmp/stab --lr 3e-4
# Exit status: 0 when no step was skipped, every loss is finite and every chain's loss fell.
set -euo pipefail
ORION=${ORION:-build/orion}
CONFIG=${1:-stories110m}
OUT=${2:-stability-run}
shift $(( $# >= 2 ? 2 : $# ))
CHAINS=${CHAINS:-5} STEPS=${STEPS:-5} BATCH=${BATCH:-4} SEQ=${SEQ:-64} THREADS=${THREADS:-0} DATA=${DATA:-builtin:2000}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

mkdir -p "$OUT"
for c in $(seq 1 "$CHAINS"); do
  dir="$OUT/chain$c"
  rm -rf "$dir"
  for s in $(seq 1 "$STEPS"); do
    if [ "$s" -eq 1 ]; then
      "$ORION" train --config "$CONFIG" --data "$DATA" --steps "$STEPS" --batch "$BATCH" --seq "$SEQ" --threads "$THREADS" \
        --seed "$c" --eval-every 0 --checkpoint-every 1 --sample 0 --stop-after 1 --out "$dir" --no-progress "$@"
    else
      "$ORION" train --resume "$dir" --threads "$THREADS" --stop-after 1 --sample 0 --no-progress
    fi
    echo "chain $c: step $s/$STEPS done (fresh process)"
  done
done

python3 - "$OUT" "$CHAINS" <<'PY'
import json, math, os, statistics, sys
out, chains = sys.argv[1], int(sys.argv[2])
bad, ok, times = 0, True, []
for c in range(1, chains + 1):
    rows = [json.loads(l) for l in open(os.path.join(out, f"chain{c}", "metrics.jsonl")) if l.strip()]
    losses = [r["loss"] for r in rows]
    nonfinite = sum(1 for r in rows if r["loss"] is None or r.get("skipped") or
                    (isinstance(r["loss"], float) and not math.isfinite(r["loss"])))
    bad += nonfinite
    falling = losses[-1] is not None and losses[0] is not None and losses[-1] < losses[0]
    ok &= falling and nonfinite == 0
    times += [r["ms"] for r in rows[1:]]  # the first step of a chain includes one-time warm-up
    print(f"chain {c}: losses {' '.join(f'{x:.4f}' if x is not None else 'nan' for x in losses)} "
          f"{'falling' if falling else 'NOT falling'}; NaN/Inf {nonfinite}")
if times:
    print(f"step time over {len(times)} resumed steps: median {statistics.median(times):.0f} ms, "
          f"min {min(times):.0f}, max {max(times):.0f}, spread (max-min)/median {(max(times)-min(times))/statistics.median(times):.1%}")
print(f"NaN/Inf steps: {bad}; {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
