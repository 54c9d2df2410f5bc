#!/usr/bin/env bash
# Runs every libFuzzer target of fuzz/ for a bounded time and fails on any crash, leak, hang,
# out-of-memory or sanitizer report (docs/reliability.md).
#
#   scripts/fuzz.sh                     every target, FUZZ_SECONDS (default 20) each, FUZZ_JOBS at once
#   scripts/fuzz.sh --seconds 600 mil   one target for ten minutes
#
# The targets live in the sanitizer build (build-asan, configured with -DORION_FUZZ=ON by
# scripts/test.sh; this script configures and builds it when they are missing). Each target starts
# from its seeds: binary files made by Orion's writers (make_seeds), the text seeds committed in
# fuzz/corpus/<target>/, and matching files of tests/testdata. First the files of
# fuzz/regressions/<target>/ (inputs that once broke a reader) are replayed. New coverage is kept
# in build-asan/fuzz/corpus/, a failing input is saved in build-asan/fuzz/findings/ and its report
# printed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
seconds=${FUZZ_SECONDS:-20}
jobs=${FUZZ_JOBS:-$(nproc)}
build=${FUZZ_BUILD:-build-asan}
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done

if ! grep -qs '^ORION_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  gen=(); command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ] && gen=(-G Ninja)
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DORION_FUZZ=ON >/dev/null
fi
cmake --build "$build" --parallel "$(nproc)" --target make_seeds $(cd fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//') >/dev/null

if [ ${#targets[@]} -eq 0 ]; then
  targets=($(cd fuzz && ls fuzz_*.cpp | sed 's/^fuzz_//; s/\.cpp$//'))
fi

# Seeds: Orion's writers, then the committed text seeds and test data of each reader.
work="$build/fuzz"
rm -rf "$work/seeds" "$work/findings" "$work/logs"
mkdir -p "$work/seeds" "$work/findings" "$work/logs" "$work/corpus"
"$work/make_seeds" "$work/seeds" "$repo"
add_seeds() {  # add_seeds <target> <files or folders...>
  local t=$1; shift
  mkdir -p "$work/seeds/$t"
  for f in "$@"; do cp -r "$f" "$work/seeds/$t/"; done
}
for d in fuzz/corpus/*/; do t=$(basename "$d"); add_seeds "$t" "$d"; done
add_seeds mil tests/testdata/compiler/mil
add_seeds ir_text tests/testdata/compiler/passes
add_seeds tokenizer_llama2c tests/testdata/tokenizer/spm_stories/tokenizer.bin
add_seeds sentencepiece tests/testdata/tokenizer/spm_stories/tokenizer.model
add_seeds tokenizer_json tests/testdata/tokenizer/small_gpt2/tokenizer.json
add_seeds chat_template tests/testdata/chat/templates/*.jinja
for kind in llama3 qwen25 smollm2 mistral llama2; do  # today's models: regex, NFC, Metaspace, byte fallback
  cp tests/testdata/tokenizer/hf_goldens/$kind/tokenizer.json "$work/seeds/tokenizer_json/$kind.json"
done

run_target() {  # run_target <name>: replay regressions, then fuzz; prints one summary line
  local t=$1 bin="$work/fuzz_$1" log="$work/logs/$1.log"
  mkdir -p "$work/seeds/$t" "$work/corpus/$t"
  local options=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1
                 "-artifact_prefix=$work/findings/$t-")
  if [ -d "fuzz/regressions/$t" ] && [ -n "$(ls -A "fuzz/regressions/$t")" ]; then
    if ! "$bin" "${options[@]}" fuzz/regressions/"$t"/* >"$log.replay" 2>&1; then
      echo "FAIL $t: a regression input breaks the reader again"; tail -40 "$log.replay"; return 1
    fi
  fi
  if ! timeout $((seconds + 120)) "$bin" "${options[@]}" -max_total_time="$seconds" \
      "$work/corpus/$t" "$work/seeds/$t" >"$log" 2>&1; then
    echo "FAIL $t (log: $log)"; grep -v '^#[0-9]' "$log" | tail -60; return 1
  fi
  local execs cov
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  printf 'ok   %-20s %4ss %10s runs  coverage %s edges  corpus %s files\n' "$t" "$seconds" "$execs" "$cov" \
    "$(ls "$work/corpus/$t" | wc -l)"
}
export -f run_target
export work seconds

echo "fuzz: ${#targets[@]} targets, ${seconds}s each, $jobs at a time (build: $build)"
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_target {}' || status=1
[ $status -eq 0 ] && echo "fuzz: no findings" || echo "fuzz: FINDINGS (inputs in $work/findings/)"
exit $status
