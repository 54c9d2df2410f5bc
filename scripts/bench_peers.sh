#!/usr/bin/env bash
# Orion beside its peers on this machine, measured side by side in one run: the figures that count
# are the ratios, each taken within one round, since a machine's speed drifts between runs.
#
#   Stories110M decode / prefill: llama2.c run.c (fp32), Orion f16 and q8_0 (`orion bench
#     generate --model`, which also measures the memory-bandwidth bound — all threads reading
#     exactly a token's bytes between its decode steps — and the GEMM bound in the same run), each
#     with its default f32 KV cache and with `--kv-cache f16` (as llama.cpp keeps its cache), and
#     llama.cpp llama-bench F16 and Q8_0 — Orion and llama.cpp reading the same GGUF files, which
#     Orion wrote from run.c's weights.
#   GPT-2 124M decode / prefill (the same shapes): Orion f16 and q8_0 against llama.cpp F16 and Q8_0
#     on the same GGUF files Orion wrote (random weights, GPT-2's tokenizer stored in them; without
#     llama.cpp Orion runs random weights of the config).
#   GPT-2 124M training step (B 4, T 64): llm.c train_gpt2 (fp32) against `orion bench train`
#     --precision fp32 and bf16.
# Every tool gets the same number of threads (THREADS, default 2). Rounds interleave the tools, so
# a burst of other work on the machine hits all of them alike. Not run in CI: the peers are not
# part of this repository. Run it on an idle machine.
#
# Usage:  scripts/bench_peers.sh [ROUNDS]          (default 3)
# Peers (each optional; a missing one is skipped with a note saying how to build it):
#   LLAMA2C_RUN   llama2.c's run.c built with OpenMP:
#                   gcc -Ofast -fopenmp -march=native run.c -lm -o runomp
#   LLAMA_BENCH   llama.cpp's llama-bench:  cmake -B build && cmake --build build --target llama-bench
#   LLMC_DIR      an llm.c checkout with train_gpt2 built in it (CPU):
#                   gcc -Ofast -fopenmp -march=native train_gpt2.c -lm -o train_gpt2
# Other settings:
#   ORION         the orion binary (default: build/orion of this checkout)
#   WORK          folder for the inputs, made once and kept (default: /tmp/orion-bench-peers)
#   THREADS=2  REPEAT=3 (runs per tool and round for decode/prefill; each tool's best counts)
#   LLMC_STEPS=10 (llm.c steps timed after its first; it is stopped once they are printed)
#   TRAIN_STEPS=7 (Orion's timed training steps, after one warm-up step; their median counts, as
#                 llm.c's median does)
#   PYTHON        a python3 with numpy (default: /usr/bin/python3), for make_llama2c_model.py
#   GPT2_TOKENIZER  GPT-2's encoder.json + vocab.bpe folder, to tokenize llm.c's data and to store
#                   in the GPT-2 GGUF files (default: ../shared/tokenizers/gpt2 beside this checkout)
#   REPORT_ONLY=1 prints the tables again from WORK/results.jsonl of the last run, measuring nothing
# An AVX2 machine on an AVX-512 one: ORION_ISA=avx2 DNNL_MAX_CPU_ISA=AVX2 (oneDNN, behind the
# GEMM peaks of the bounds, picks its instruction set from the latter), ORION_VNNI=off where the
# AVX2 machine meant has no AVX-VNNI (the AMD EPYC with AVX2 + F16C only), and the peers built with
# -march=x86-64-v3 instead of -march=native.
# Example:
#   LLAMA2C_RUN=$HOME/llama2.c/runomp LLAMA_BENCH=$HOME/llama.cpp/build/bin/llama-bench \
#   LLMC_DIR=$HOME/llm.c scripts/bench_peers.sh 3 | tee peers.md
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
ORION="${ORION:-$ROOT/build/orion}"
WORK="${WORK:-/tmp/orion-bench-peers}"
THREADS="${THREADS:-2}"
REPEAT="${REPEAT:-3}"
LLMC_STEPS="${LLMC_STEPS:-10}"
TRAIN_STEPS="${TRAIN_STEPS:-7}"
PYTHON="${PYTHON:-/usr/bin/python3}"
export OMP_NUM_THREADS="$THREADS"

note() { echo "bench_peers: $*" >&2; }
die() { note "$*"; exit 1; }

[[ -x "$ORION" ]] || die "no orion binary at $ORION (build it: cmake --build build --target orion, or set ORION)"
[[ -x "$PYTHON" ]] || PYTHON=python3
# A peer is used when its variable names an executable; else a note says how to get it.
peer() {  # peer VAR path-to-check how-to-build
  if [[ -n "${!1:-}" && -x "$2" ]]; then return 0; fi
  note "skipping ${3%%:*}: ${1} is ${!1:-unset}${!1:+ (no executable at $2)}; ${3#*: }"
  return 1
}
# ---- inputs, made once ----------------------------------------------------------------------------
S110="$WORK/stories110m.bin" TOK="$WORK/tokenizer.bin" GPT2_TOK="${GPT2_TOKENIZER:-$ROOT/../shared/tokenizers/gpt2}"
make_inputs() {
  mkdir -p "$WORK/llmc/dev/data/tinyshakespeare"
  if [[ ! -s "$S110" || ! -s "$TOK" ]]; then
    note "making the Stories110M model run.c reads (random weights, llama2.c format)"
    "$PYTHON" "$ROOT/scripts/make_llama2c_model.py" --config stories110m --out "$S110" --tokenizer-out "$TOK" >&2
  fi
  for dt in f16 q8_0; do  # the same weights for llama.cpp, with the tokenizer it needs to load them
    [[ -s "$WORK/stories110m-$dt.gguf" ]] ||
      "$ORION" convert --in "$S110" --tokenizer "$TOK" --out "$WORK/stories110m-$dt.gguf" --dtype "$dt" >&2
  done
  if ((HAVE_LLAMA)); then  # GPT-2 124M for llama.cpp; skipped without GPT-2's tokenizer to store
    if [[ -e "$GPT2_TOK" ]]; then
      for dt in f16 q8_0; do
        [[ -s "$WORK/gpt2-124m-$dt.gguf" ]] ||
          "$ORION" convert --config gpt2-124m --tokenizer "$GPT2_TOK" --out "$WORK/gpt2-124m-$dt.gguf" --dtype "$dt" >&2
      done
    else
      note "skipping llama.cpp's GPT-2 runs: no GPT-2 tokenizer at $GPT2_TOK (set GPT2_TOKENIZER)"
    fi
  fi
  if ((HAVE_LLMC)); then  # llm.c reads these names from its working directory
    L="$WORK/llmc"
    [[ -s "$L/gpt2_124M.bin" ]] || "$ORION" convert --config gpt2-124m --out "$L/gpt2_124M.bin" --to llmc >&2
    if [[ ! -s "$L/data/val_000.bin" ]]; then
      [[ -e "$GPT2_TOK" ]] || die "no GPT-2 tokenizer at $GPT2_TOK (set GPT2_TOKENIZER to a folder with encoder.json + vocab.bpe)"
      "$ORION" data prepare --tokenizer "$GPT2_TOK" --in builtin:2000 --out "$L/data" --format llmc --no-progress >&2
    fi
    ln -sf ../../../data/train_000.bin "$L/dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
    ln -sf ../../../data/val_000.bin "$L/dev/data/tinyshakespeare/tiny_shakespeare_val.bin"
  fi
}

# ---- one round: every tool once, results as JSON lines ----------------------------------------------
RESULTS="$WORK/results.jsonl"
record() { echo "{\"round\":$ROUND,\"tool\":\"$1\",$2}" >>"$RESULTS"; }

run_runc() {  # best tok/s of REPEAT runs of 128 positions (run.c's own "achieved tok/s")
  local best=0 t
  for ((i = 0; i < REPEAT; i++)); do
    t=$("$LLAMA2C_RUN" "$S110" -z "$TOK" -t 0 -n 128 -i "Once upon a time" 2>&1 >/dev/null |
      sed -n 's/^achieved tok\/s: //p')
    best=$(awk -v a="$best" -v b="${t:-0}" 'BEGIN { print (b > a ? b : a) }')
  done
  record runc "\"decode_tok_s\":$best"
}

run_orion_generate() {  # dtype kv-cache (f32 | f16) [config, default stories110m]: the peers' file when made
  local j config="${3:-stories110m}" weights
  weights=(--config "$config" --dtype "$1")
  [[ -s "$WORK/$config-$1.gguf" ]] && weights=(--model "$WORK/$config-$1.gguf")
  j=$("$ORION" bench generate "${weights[@]}" --kv-cache "$2" --prompt-len 256 --decode-len 128 \
    --repeat "$REPEAT" --threads "$THREADS" --json)
  record "orion_$([[ $config == gpt2-124m ]] && echo gpt2_)$1$([[ $2 == f16 ]] && echo _kv16)" "\"bench\":$j"
}

run_llama_bench() {  # model-prefix tool-name: both files in one call; the report takes each test's best sample
  local j
  j=$("$LLAMA_BENCH" -m "$WORK/$1-f16.gguf" -m "$WORK/$1-q8_0.gguf" -p 256 -n 128 \
    -t "$THREADS" -r "$REPEAT" -o json 2>/dev/null | tr -d '\n')
  record "$2" "\"bench\":$j"
}

run_llmc() {  # step times of train_gpt2, stopped once LLMC_STEPS steps after the first are printed
  local log="$WORK/llmc/round$ROUND.log" pid n=0
  (cd "$WORK/llmc" && exec stdbuf -oL "$LLMC_DIR/train_gpt2") >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    n=$(grep -c '^step [0-9]*: train loss' "$log" || true)
    ((n > LLMC_STEPS)) && break
    sleep 1
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  ((n > 1)) || die "llm.c printed no step after its first; see $log"
  local ms
  ms=$(sed -n 's/^step \([0-9]*\): train loss .* (took \([0-9.]*\) ms)$/\2/p' "$log" | tail -n +2 | head -n "$LLMC_STEPS" |
    paste -sd, -)
  record llmc "\"step_ms\":[$ms]"
}

run_orion_train() {  # precision
  local j
  j=$("$ORION" bench train --config gpt2-124m --batch 4 --seq 64 --precision "$1" --steps "$TRAIN_STEPS" \
    --warmup 1 --threads "$THREADS" --json)
  record "train_$1" "\"bench\":$j"
}

# ---- the report (markdown): a table per round, then each ratio's range over the rounds ------------
report() {  # round-to-show (0: the summary)
  local family model
  family="$(lscpu | sed -n 's/^CPU family: *//p' | head -1)" model="$(lscpu | sed -n 's/^Model: *//p' | head -1)"
  CPU_NAME="$(lscpu | sed -n 's/^Model name: *//p' | head -1), family $family model $model" \
    CPU_FLAGS="$(lscpu | sed -n 's/^Flags: *//p')" "$PYTHON" - "$RESULTS" "$1" "$ROUNDS" <<'PY'
import json, os, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
show, rounds = int(sys.argv[2]), int(sys.argv[3])
flags = set(os.environ["CPU_FLAGS"].split())
isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
extras = [n for f, n in [("avx512_bf16", "AVX512-BF16"), ("avx512_vnni", "AVX512-VNNI"), ("avx_vnni", "AVX-VNNI"),
                          ("amx_bf16", "AMX-BF16"), ("f16c", "F16C")] if f in flags]
cpu = f"{os.environ['CPU_NAME']} ({isa}; {', '.join(extras) or 'no BF16/VNNI/AMX'})"
bf16_hw = "avx512_bf16" in flags or "amx_bf16" in flags
threads = next((x["threads"] for x in rows if x["tool"] == "start"), "?")

def figures(r):
    """The figures of round r: name -> number (absent when the tool was skipped)."""
    f = {}
    for x in (x for x in rows if x["round"] == r):
        t = x["tool"]
        if t == "start":
            f["start"], f["repeat"] = x["start"], x["repeat"]
        elif t == "runc":
            f["runc"] = x["decode_tok_s"]
        elif t.startswith("orion_"):
            b, d = x["bench"], t[6:]
            for k in ("decode_tok_s", "prefill_tok_s", "bandwidth_bound_tok_s", "bandwidth_efficiency",
                      "prefill_bound_tok_s", "prefill_efficiency"):
                f[f"{d}.{k}"] = b[k]
            f[f"{d}.weights"] = "the GGUF file llama.cpp reads" if b["config"].endswith(".gguf") else "random weights"
        elif t in ("llama_cpp", "llama_cpp_gpt2"):
            for e in x["bench"]:
                d = ("gpt2_" if t.endswith("gpt2") else "") + ("f16" if e["model_type"].endswith("F16") else "q8_0")
                f[f"llama_{d}.{'prefill' if e['n_prompt'] else 'decode'}"] = max(e["samples_ts"])
        elif t == "llmc":
            f["llmc_ms"] = statistics.median(x["step_ms"])
            f["llmc_n"] = len(x["step_ms"])
        elif t.startswith("train_"):
            f[f"{t}_ms"] = x["bench"].get("median_ms", x["bench"]["ms_per_step"])
            if x["bench"].get("compute_bound_ms"):  # fp32: the step's FLOPs at the fp32 GEMM peak of the run
                f[f"{t}_bound_ms"] = x["bench"]["compute_bound_ms"]
    return f

def num(v, fmt="{:.1f}"):
    return "—" if v is None else fmt.format(v)

def div(f, a, b):
    return f[a] / f[b] if a in f and b in f and f[b] else None

RATIOS = [  # label, value of a round's figures, what issue 18 asks for
    ("Orion f16 ÷ run.c decode", lambda f: div(f, "f16.decode_tok_s", "runc"), "≥ 1.9× (AVX2) / ≥ 2.3× (AVX-512)"),
    ("Orion q8_0 ÷ run.c decode", lambda f: div(f, "q8_0.decode_tok_s", "runc"), "≥ 3.3× (AVX2) / ≥ 5× (AVX-512)"),
    ("Orion f16, f16 KV cache ÷ run.c decode", lambda f: div(f, "f16_kv16.decode_tok_s", "runc"), ""),
    ("Orion q8_0, f16 KV cache ÷ run.c decode", lambda f: div(f, "q8_0_kv16.decode_tok_s", "runc"), ""),
    ("Orion f16 ÷ llama.cpp F16 decode", lambda f: div(f, "f16.decode_tok_s", "llama_f16.decode"), ""),
    ("Orion f16, f16 KV cache ÷ llama.cpp F16 decode", lambda f: div(f, "f16_kv16.decode_tok_s", "llama_f16.decode"), ""),
    ("Orion q8_0 ÷ llama.cpp Q8_0 decode", lambda f: div(f, "q8_0.decode_tok_s", "llama_q8_0.decode"), "> 1×"),
    ("Orion q8_0, f16 KV cache ÷ llama.cpp Q8_0 decode", lambda f: div(f, "q8_0_kv16.decode_tok_s", "llama_q8_0.decode"), ""),
    ("Orion f16 ÷ llama.cpp F16 prefill", lambda f: div(f, "f16.prefill_tok_s", "llama_f16.prefill"), ""),
    ("Orion q8_0 ÷ llama.cpp Q8_0 prefill", lambda f: div(f, "q8_0.prefill_tok_s", "llama_q8_0.prefill"), ""),
    ("Orion f16 decode ÷ bandwidth bound", lambda f: f.get("f16.bandwidth_efficiency"), "≥ 0.9"),
    ("Orion q8_0 decode ÷ bandwidth bound", lambda f: f.get("q8_0.bandwidth_efficiency"), ""),
    ("Orion f16, f16 KV cache decode ÷ bandwidth bound", lambda f: f.get("f16_kv16.bandwidth_efficiency"), ""),
    ("Orion f16 prefill ÷ GEMM bound", lambda f: f.get("f16.prefill_efficiency"), "≥ 0.6"),
    ("Orion q8_0 prefill ÷ GEMM bound", lambda f: f.get("q8_0.prefill_efficiency"), "≥ 0.6"),
    ("GPT-2 124M: Orion f16 ÷ llama.cpp F16 decode", lambda f: div(f, "gpt2_f16.decode_tok_s", "llama_gpt2_f16.decode"), ""),
    ("GPT-2 124M: Orion q8_0 ÷ llama.cpp Q8_0 decode", lambda f: div(f, "gpt2_q8_0.decode_tok_s", "llama_gpt2_q8_0.decode"), ""),
    ("GPT-2 124M: Orion f16 ÷ llama.cpp F16 prefill", lambda f: div(f, "gpt2_f16.prefill_tok_s", "llama_gpt2_f16.prefill"), ""),
    ("GPT-2 124M: Orion q8_0 ÷ llama.cpp Q8_0 prefill", lambda f: div(f, "gpt2_q8_0.prefill_tok_s", "llama_gpt2_q8_0.prefill"), ""),
    ("GPT-2 124M: Orion f16 decode ÷ bandwidth bound", lambda f: f.get("gpt2_f16.bandwidth_efficiency"), ""),
    ("llm.c ms ÷ Orion fp32 ms (training step)", lambda f: div(f, "llmc_ms", "train_fp32_ms"), "≥ 4×"),
    ("Orion fp32 training step ÷ its compute bound (bound ms ÷ step ms)", lambda f: div(f, "train_fp32_bound_ms", "train_fp32_ms"), ""),
    ("llm.c ms ÷ Orion's fp32 compute bound ms (the most fp32 could reach)", lambda f: div(f, "llmc_ms", "train_fp32_bound_ms"), ""),
    ("llm.c ms ÷ Orion bf16 ms (training step)", lambda f: div(f, "llmc_ms", "train_bf16_ms"),
     "≥ 8×" if bf16_hw else "(no AVX512-BF16/AMX here: fp32 counts)"),
]

def round_tables(r):
    f = figures(r)
    reps = f.get("repeat", "?")
    print(f"\n### Round {r} of {rounds} — {cpu}, {threads} threads\n")
    print(f"Started {f.get('start', '?')}.\n")
    print("| Stories110M (256-token prompt, 128 decoded) | decode tok/s | prefill tok/s |")
    print("|---|---|---|")
    print(f"| llama2.c run.c fp32 (OpenMP), best of {reps} | {num(f.get('runc'))} | — |")
    for d in ("f16", "q8_0", "f16_kv16", "q8_0_kv16"):
        if f"{d}.decode_tok_s" not in f:
            continue
        name = d.replace("_kv16", ", f16 KV cache")
        print(f"| Orion {name} (`orion bench generate`, {f[d + '.weights']}, best of {reps}) | {num(f[d + '.decode_tok_s'])} "
              f"(bound {num(f[d + '.bandwidth_bound_tok_s'])}) | {num(f[d + '.prefill_tok_s'])} "
              f"(GEMM bound {num(f[d + '.prefill_bound_tok_s'])}) |")
    for d, name in (("f16", "F16"), ("q8_0", "Q8_0")):
        print(f"| llama.cpp {name} (llama-bench tg128 / pp256, best of {reps}) | "
              f"{num(f.get(f'llama_{d}.decode'))} | {num(f.get(f'llama_{d}.prefill'))} |")
    if any(f.get(k) is not None for k in ("runc", "llama_f16.decode", "llama_q8_0.decode")):
        print("\n(Orion decodes positions 256–383, after the prompt, with an fp32 KV cache unless the row says "
              "f16; run.c (fp32 cache) and llama-bench's tg128 (f16 cache) decode positions 0–127, so they "
              "read less per token.)")
    if "gpt2_f16.decode_tok_s" in f:
        print("\n| GPT-2 124M (256-token prompt, 128 decoded) | decode tok/s | prefill tok/s |")
        print("|---|---|---|")
        for d in ("f16", "q8_0"):
            k = f"gpt2_{d}"
            if f"{k}.decode_tok_s" in f:
                print(f"| Orion {d} ({f[k + '.weights']}, best of {reps}) | {num(f[k + '.decode_tok_s'])} (bound "
                      f"{num(f[k + '.bandwidth_bound_tok_s'])}) | {num(f[k + '.prefill_tok_s'])} |")
        for d, name in (("f16", "F16"), ("q8_0", "Q8_0")):
            print(f"| llama.cpp {name} (best of {reps}) | {num(f.get(f'llama_gpt2_{d}.decode'))} | "
                  f"{num(f.get(f'llama_gpt2_{d}.prefill'))} |")
    print("\n| GPT-2 124M training step (B 4, T 64) | ms |")
    print("|---|---|")
    n = f.get("llmc_n")
    print(f"| llm.c train_gpt2 fp32 (median of {n or '—'} steps after the first) | {num(f.get('llmc_ms'), '{:.0f}')} |")
    for p in ("fp32", "bf16"):
        print(f"| Orion {p} (`orion bench train`, median of its timed steps) | {num(f.get(f'train_{p}_ms'), '{:.0f}')} |")
    print("\n| ratio | this round | issue 18 asks |")
    print("|---|---|---|")
    for label, fn, goal in RATIOS:
        print(f"| {label} | {num(fn(f), '{:.2f}')} | {goal} |")

def summary():
    print(f"\n### Ratios over {rounds} round{'s' if rounds > 1 else ''} — {cpu}, {threads} threads\n")
    print("| ratio | min | median | max | issue 18 asks |")
    print("|---|---|---|---|---|")
    per_round = [figures(r) for r in range(1, rounds + 1)]
    for label, fn, goal in RATIOS:
        v = [x for x in (fn(f) for f in per_round) if x is not None]
        if v:
            print(f"| {label} | {min(v):.2f} | {statistics.median(v):.2f} | {max(v):.2f} | {goal} |")
        else:
            print(f"| {label} | — | — | — | {goal} |")

round_tables(show) if show else summary()
PY
}

if [[ "${REPORT_ONLY:-0}" == 1 ]]; then
  [[ -s "$RESULTS" ]] || die "no $RESULTS to report"
  ROUNDS=$(grep -c '"tool":"start"' "$RESULTS")
  for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do report "$ROUND"; done
  report 0
  exit 0
fi
HAVE_RUNC=0 HAVE_LLAMA=0 HAVE_LLMC=0
peer LLAMA2C_RUN "${LLAMA2C_RUN:-}" "llama2.c: set LLAMA2C_RUN to run.c built with gcc -Ofast -fopenmp -march=native run.c -lm -o runomp" && HAVE_RUNC=1
peer LLAMA_BENCH "${LLAMA_BENCH:-}" "llama.cpp: set LLAMA_BENCH to llama.cpp's build/bin/llama-bench (cmake --build build --target llama-bench)" && HAVE_LLAMA=1
peer LLMC_DIR "${LLMC_DIR:-}/train_gpt2" "llm.c: set LLMC_DIR to an llm.c checkout where gcc -Ofast -fopenmp -march=native train_gpt2.c -lm -o train_gpt2 was run" && HAVE_LLMC=1

make_inputs
: >"$RESULTS"
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
  note "round $ROUND of $ROUNDS"
  # When and how busy: a load average near 0 says the figures are the machine's own.
  record start "\"start\":\"$(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)\",\"threads\":$THREADS,\"repeat\":$REPEAT"
  ((HAVE_RUNC)) && run_runc
  run_orion_generate f16 f32
  run_orion_generate q8_0 f32
  run_orion_generate f16 f16
  run_orion_generate q8_0 f16
  ((HAVE_LLAMA)) && run_llama_bench stories110m llama_cpp
  run_orion_generate f16 f32 gpt2-124m
  run_orion_generate q8_0 f32 gpt2-124m
  ((HAVE_LLAMA)) && [[ -s "$WORK/gpt2-124m-f16.gguf" ]] && run_llama_bench gpt2-124m llama_cpp_gpt2
  ((HAVE_LLMC)) && run_llmc
  run_orion_train fp32
  run_orion_train bf16
  report "$ROUND"
done
report 0
