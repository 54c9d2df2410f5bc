#!/usr/bin/env bash
# The 5 × 5 stability chain on the ANE path (issue 6): 25 training steps on anesim, each a fresh
# `orion train --resume … --stop-after 1 --backend anesim` process, must equal one straight 25-step
# run bit for bit, without NaN/Inf and with the loss falling. ctest runs the same test as 2 × 2
# (every fresh process compiles its programs and verifies its first update, ~2 s each).
# Usage: scripts/anesim_resume_chain.sh [build-dir]   (default: build)
set -euo pipefail
build="${1:-build}"
test_binary="$build/tests/train_test_anesim_train_cli"
if [[ ! -x "$test_binary" ]]; then
  echo "anesim_resume_chain: $test_binary not found; build it first: cmake --build $build --target train_test_anesim_train_cli" >&2
  exit 2
fi
ORION_ANESIM_CHAIN=5x5 OMP_WAIT_POLICY=passive "$test_binary"
