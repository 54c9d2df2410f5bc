"""The ANE compiler from Python: the programs `orion compile` writes (MIL text, blobs, manifest),
and `orion mil check`'s findings."""
import json
import os

import pytest

import orion
from conftest import run_cli


def test_compile_returns_the_cli_programs(tmp_path):
    progs = orion.compile(config="stories260k", chip="m4", seq=16)
    assert len(progs) > 0 and progs.summary["chip"] == "m4"
    first = progs[0]
    assert first["mil"].startswith("program(1.3)") and progs[first["name"]] is first
    assert first["manifest"]["inputs"] and sum(first["blobs"].values()) > 0
    out = str(tmp_path / "cli")
    run_cli("compile", "--config", "stories260k", "--chip", "m4", "--seq", "16", "--out", out)
    with open(os.path.join(out, "manifest.json")) as f:
        names = [p["name"] for p in json.load(f)["programs"]]
    assert [p["name"] for p in progs] == names
    for p in progs:
        with open(os.path.join(out, p["name"], "model.mil")) as f:
            assert f.read() == p["mil"], p["name"]


def test_mil_check_passes_a_compiled_program_and_names_a_broken_rule():
    progs = orion.compile(config="stories260k", chip="m4", seq=16)  # its folder lives as long as progs
    p = progs[0]
    weights = {}
    for name in p["blobs"]:
        with open(os.path.join(p["dir"], "weights", name), "rb") as f:
            weights[name] = f.read()
    ok = orion.mil_check(p["mil"], chip="m4", weights=weights)
    assert ok["ok"] and ok["nodes"] > 0
    # rsqrt instead of pow(x, -0.5): valid on M4, rule C17 on M1 (the node named).
    assert "pow(x = add, y = neg_half)" in p["mil"]
    bad = p["mil"].replace("pow(x = add, y = neg_half)", "rsqrt(x = add)")
    assert orion.mil_check(bad, chip="m4", weights=weights)["ok"]
    r = orion.mil_check(bad, chip="m1", weights=weights)
    errors = [d for d in r["diagnostics"] if d["level"] == "error"]
    assert not r["ok"] and [(d["rule"], d["node"]) for d in errors] == [("C17", "attn_norm_rrms")]
    with pytest.raises(orion.InputError):
        orion.mil_check("program(1.3) { this is not MIL", chip="m4")


def test_unknown_chip_is_a_usage_error():
    with pytest.raises(orion.UsageError, match="m9"):
        orion.compile(config="stories260k", chip="m9")
