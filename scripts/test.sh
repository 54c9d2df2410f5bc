#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test (the README's second command, and CI's):
#   1. the Release build (build/) and its test suite;
#   2. the whole test suite built with ASan + UBSan (clang) in build-asan/ (scripts/sanitize.sh);
#   3. every fuzz target of that same build for FUZZ_SECONDS (default 20) each (scripts/fuzz.sh,
#      docs/reliability.md).
# ORION_TEST_RELEASE_ONLY=1 stops after step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
(cd build && ctest -j"$(nproc)" --output-on-failure --timeout 900)
[ "${ORION_TEST_RELEASE_ONLY:-0}" = 1 ] && exit 0
scripts/sanitize.sh
scripts/fuzz.sh
