#!/usr/bin/python3
"""orion serve under load, over HTTP: starts the server on a model (by default random weights of the
Stories110M config, written by `orion convert --config`), then measures in one run

  1. the load test: --requests greedy completions of --max-tokens tokens from --clients concurrent
     clients — p50 / p95 latency and aggregate tokens/s;
  2. aggregate decode tokens/s of --clients concurrent streams against one stream (--stream-tokens
     tokens a request, the prompt a few tokens) and their ratio: decode is memory-bound, so on the
     CPU 8 rows in one pass over the weights cost little more than one row.

    /usr/bin/python3 scripts/bench_serve.py [--build build] [--config stories110m] [--backend cpu]

Standard library only. A 32000-token model needs a tokenizer that decodes every id: GPT-2's
(../shared/tokenizers/gpt2/encoder.json) is the default. Speed figures on a shared machine are
noise-bound: compare the ratio measured side by side, not absolute numbers across runs."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build folder holding the orion binary")
ap.add_argument("--config", default="stories110m", help="preset for random weights (orion convert --config)")
ap.add_argument("--model", help="a model file instead of --config's random weights")
ap.add_argument("--tokenizer", default=os.path.join(ROOT, "..", "shared", "tokenizers", "gpt2", "encoder.json"))
ap.add_argument("--backend", default="cpu", help="cpu, anesim or ane")
ap.add_argument("--ctx", type=int, default=256, help="tokens per sequence (orion serve --ctx)")
ap.add_argument("--threads", type=int, default=0, help="orion serve --threads (0: its default)")
ap.add_argument("--requests", type=int, default=64, help="load test: requests in all")
ap.add_argument("--clients", type=int, default=8, help="concurrent clients (and --parallel of the server)")
ap.add_argument("--max-tokens", type=int, default=16, help="load test: tokens a request")
ap.add_argument("--stream-tokens", type=int, default=64, help="decode ratio: tokens a request")
ap.add_argument("--prompt", default="Once upon a time")
args = ap.parse_args()


def post(port, body):
    """A completion; returns (seconds, completion tokens) or raises on a non-200 reply."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=3600) as r:
        reply = json.load(r)
    return time.perf_counter() - t, reply["usage"]["completion_tokens"]


def completion(max_tokens):
    # No stop strings; the end-of-text token may still end a request early: tokens are counted.
    return {"model": "base", "prompt": args.prompt, "max_tokens": max_tokens, "temperature": 0}


def concurrent(port, clients, per_client, max_tokens):
    """`clients` threads each send `per_client` requests; returns (wall seconds, latencies, tokens, failed)."""
    latencies, tokens, failed = [], [0], [0]
    lock = threading.Lock()

    def client():
        for _ in range(per_client):
            try:
                s, n = post(port, completion(max_tokens))
                with lock:
                    latencies.append(s)
                    tokens[0] += n
            except Exception as e:  # a failed request is counted and reported, not fatal
                with lock:
                    failed[0] += 1
                print(f"request failed: {e}", file=sys.stderr)

    t = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t, sorted(latencies), tokens[0], failed[0]


def server_stats(port):
    return json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/stats"))


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def start_server(model, log_path):
    cmd = [os.path.join(args.build, "orion"), "serve", "--model", model, "--tokenizer", args.tokenizer, "--port", "0",
           "--backend", args.backend, "--parallel", str(args.clients), "--ctx", str(args.ctx), "--timeout", "3600"]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    log = open(log_path, "w")
    # OpenMP's wait policy: the runtime's own, as a user's `orion serve` runs, unless the environment
    # names one (passive / active).
    env = dict(os.environ)
    if env.get("OMP_WAIT_POLICY") == "default":
        del env["OMP_WAIT_POLICY"]
    proc = subprocess.Popen(cmd, stderr=log, env=env)
    for _ in range(600):
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", open(log_path).read())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    sys.exit(f"orion serve did not start:\n{open(log_path).read()}")


def main():
    with tempfile.TemporaryDirectory(prefix="bench_serve_") as tmp:
        model = args.model
        if not model:
            model = os.path.join(tmp, f"{args.config}.bin")
            subprocess.run([os.path.join(args.build, "orion"), "convert", "--config", args.config, "--out", model],
                           check=True, stdout=subprocess.DEVNULL)
        proc, port = start_server(model, os.path.join(tmp, "serve.log"))
        try:
            name = args.model or f"{args.config} (random weights)"
            print(f"orion serve --backend {args.backend} --parallel {args.clients} --ctx {args.ctx}: {name}")
            concurrent(port, 1, 1, 4)  # warm-up (first-touch of the weights; anesim / ane: compiles)

            wall, lat, tokens, failed = concurrent(port, args.clients, args.requests // args.clients, args.max_tokens)
            print(f"load: {len(lat) + failed} requests of {args.max_tokens} tokens from {args.clients} clients: "
                  f"{failed} failed, p50 {1e3 * percentile(lat, 0.5):.1f} ms, p95 {1e3 * percentile(lat, 0.95):.1f} ms, "
                  f"{tokens / wall:.1f} tok/s aggregate")

            rates, model_rates = {}, {}
            for streams in (1, args.clients):
                before = server_stats(port)
                wall, _, tokens, failed = concurrent(port, streams, 1, args.stream_tokens)
                after = server_stats(port)
                d = {k: after[k] - before[k] for k in ("decode_steps", "decoded_rows", "prompt_tokens", "step_seconds", "prefill_seconds")}
                rates[streams] = tokens / wall
                model_rates[streams] = d["decoded_rows"] / max(1e-9, d["step_seconds"] + d["prefill_seconds"])
                print(f"decode: {streams} stream{'s' if streams > 1 else ''} of {args.stream_tokens} tokens: "
                      f"{rates[streams]:.1f} tok/s aggregate{f', {failed} failed' if failed else ''} over {wall:.2f} s; "
                      f"server: {d['decode_steps']} steps, mean batch {d['decoded_rows'] / max(1, d['decode_steps']):.2f}, "
                      f"{d['prompt_tokens']} prompt tokens, model busy {d['step_seconds'] + d['prefill_seconds']:.2f} s "
                      f"({model_rates[streams]:.1f} tok/s)")
            print(f"ratio: {args.clients} streams / 1 stream = {rates[args.clients] / rates[1]:.2f}x over HTTP, "
                  f"{model_rates[args.clients] / model_rates[1]:.2f}x while the model ran")
            stats = server_stats(port)
            print(f"server: {stats['completed']} completed, mean batch "
                  f"{stats['decoded_rows'] / max(1, stats['decode_steps']):.2f} rows"
                  + (f", {stats['compiles']} programs compiled" if "compiles" in stats else ""))
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
