#!/usr/bin/env python3
"""Best of several Google Benchmark repetitions, for a machine shared with other work.

    bench_kernels --benchmark_repetitions=5 --benchmark_format=json > out.json
    bench/best_of.py out.json [more.json ...]

For each benchmark prints the best repetition (highest rate counter, else lowest real time) over
all the files given, and for decode the percentage of the best STREAM triad seen in the same files.
"""
import json
import sys

best = {}  # name -> (rate or -time, row)
for path in sys.argv[1:]:
    for row in json.load(open(path))["benchmarks"]:
        if row.get("run_type") == "aggregate":
            continue
        name = row["run_name"]
        rate = row.get("bytes_per_second") or row.get("GFLOPS") or row.get("GB_per_s")
        score = rate if rate else -row["real_time"]
        if name not in best or score > best[name][0]:
            best[name] = (score, row)

triad = max((r["GB_per_s"] for _, r in best.values() if "GB_per_s" in r), default=None)
if triad:
    print(f"STREAM triad (best): {triad:.2f} GB/s")
for name, (_, r) in best.items():
    label = r.get("label", "")
    if "bytes_per_second" in r:
        gbs = r["bytes_per_second"] / 1e9
        pct = f"  {100 * gbs / triad:5.1f}% of triad" if triad and "Decode" in name else ""
        print(f"{name:44s} {label:12s} {gbs:7.2f} GB/s  {r['real_time']:9.1f} {r['time_unit']}{pct}")
    elif "GFLOPS" in r:
        print(f"{name:44s} {label:12s} {r['GFLOPS']:7.1f} GFLOPS {r['real_time']:9.2f} {r['time_unit']}")
    elif "GB_per_s" not in r:
        print(f"{name:44s} {label:12s} {r['real_time']:9.1f} {r['time_unit']}")
