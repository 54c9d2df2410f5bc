#!/usr/bin/env python3
"""Streams a chat completion from `orion serve` (or any OpenAI-compatible server) with only the
standard library: POST /v1/chat/completions with "stream": true, then read the server-sent events
("data: {...}" lines, ending with "data: [DONE]") and print each piece of text as it arrives.

    python3 docs/examples/stream_chat.py --port 8080 --model base "Tell me a story"
"""
import argparse
import http.client
import json
import sys


def stream_chat(host, port, model, message, max_tokens, api_key=None):
    body = {"model": model, "messages": [{"role": "user", "content": message}],
            "max_tokens": max_tokens, "temperature": 0, "stream": True}
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), headers)
    resp = conn.getresponse()
    if resp.status != 200:
        raise SystemExit(f"HTTP {resp.status}: {resp.read().decode()}")
    for raw in resp:  # one line at a time, as the server flushes them
        line = raw.decode("utf-8").strip()
        if not line.startswith("data: "):
            continue  # blank separators and ": comment" keep-alives
        data = line[len("data: "):]
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        for choice in chunk.get("choices", []):
            yield choice["delta"].get("content", "")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("message")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--model", default="base")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--api-key")
    a = ap.parse_args()
    pieces = 0
    for piece in stream_chat(a.host, a.port, a.model, a.message, a.max_tokens, a.api_key):
        sys.stdout.write(piece)
        sys.stdout.flush()
        pieces += 1
    sys.stdout.write("\n")
    print(f"[{pieces} chunks]", file=sys.stderr)
