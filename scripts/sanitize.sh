#!/usr/bin/env bash
# Builds the whole test suite with AddressSanitizer + UndefinedBehaviorSanitizer (clang, any report
# is fatal) into build-asan/ and runs it; the same build holds the libFuzzer targets of fuzz/
# (-DORION_FUZZ=ON), so scripts/fuzz.sh reuses it instead of compiling everything a third time.
# Tests too slow under the sanitizers carry the ctest label no_sanitize and are left out here
# (they run in the Release build). The numerics tests run once here, on the default kernel path
# (the Release suite runs them on every path). Usage: scripts/sanitize.sh [ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
gen=()
command -v ninja >/dev/null && [ ! -f build-asan/CMakeCache.txt ] && gen=(-G Ninja)
cmake -S . -B build-asan "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DORION_FUZZ=ON -DORION_BUILD_BENCH=OFF -DORION_TEST_EVERY_ISA=OFF -DORION_ONEDNN=OFF >/dev/null
cmake --build build-asan --parallel "$(nproc)"
cd build-asan
# halt_on_error and exit codes make any report fail its test; leaks are reported at exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The anesim resume chain is 5 × 5 fresh processes in the Release suite; 2 × 2 is enough to check
# the same code under the sanitizers in bounded time.
export ORION_ANESIM_CHAIN=${ORION_ANESIM_CHAIN:-2x2}
ctest -j"$(nproc)" --output-on-failure --timeout 1800 -LE no_sanitize "$@"
