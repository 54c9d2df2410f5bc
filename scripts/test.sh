#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test (the README's second command, and CI's):
#   1. the Release build (build/) and its test suite;
#   2. every fuzz target for FUZZ_SECONDS (default 20) each, built with ASan + UBSan in build-asan/
#      (docs/reliability.md);
#   3. with ORION_TEST_SANITIZE=1, the whole test suite built with ASan + UBSan (scripts/sanitize.sh).
# ORION_TEST_RELEASE_ONLY=1 stops after step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
(cd build && ctest -j"$(nproc)" --output-on-failure --timeout 900)
[ "${ORION_TEST_RELEASE_ONLY:-0}" = 1 ] && exit 0
scripts/fuzz.sh
[ "${ORION_TEST_SANITIZE:-0}" = 1 ] && scripts/sanitize.sh
exit 0
