#!/usr/bin/env bash
# The long crash-safety campaign (docs/reliability.md): kills `orion train` with SIGKILL at random
# moments KILLS times (default 60) over a 40-step run that checkpoints every step, with every
# crash-safe write slowed so that many kills land inside one; after every kill each checkpoint on
# disk must read and validate, and the finished run must equal an uninterrupted one bit for bit.
# Then the same for `orion data prepare` and `orion convert`. ctest runs a short version.
#   scripts/kill_test.sh [KILLS] [BUILD_DIR]    (BUILD_DIR default build/, built by scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-60}
build=${2:-build}
cmake --build "$build" --target orion tools_test_cli_crash_safety >/dev/null
ORION_KILL_TEST_KILLS=$kills OMP_WAIT_POLICY=passive "$build/tests/tools_test_cli_crash_safety" 2>&1 |
  grep -E "kill test|kills|OK|FAILED|Failure|error|differ|damaged" 
