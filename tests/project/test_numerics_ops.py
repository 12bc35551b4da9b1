"""checks/numerics_ops.py: the per-operation record of the policy's CPU path and its comparison. Two runs under the pin
give the same record; a run with MKL's default code path (MKL_CBWR unset) differs, and the comparison names a matrix
product that got the same inputs as the culprit, not the operations after it that only received the difference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from helpers.checks import load_check

REPO = Path(__file__).resolve().parents[2]


def _ops_module():
    return load_check("numerics_ops")


def _record(op: str, inp: str, out: str, shapes=((2, 2),)) -> dict:
    return {"op": op, "shapes": [list(s) for s in shapes], "in": inp, "out": out}


def test_compare_names_the_operation_with_equal_inputs_and_not_the_cascade():
    ops = _ops_module()
    a = {"records": [_record("mm", "i0", "o0"), _record("mm", "i1", "o1"), _record("add", "i2", "o2")]}
    b = {"records": [_record("mm", "i0", "o0"), _record("mm", "i1", "X1"), _record("add", "Y2", "X2")]}
    got = ops.compare(a, b)
    assert got["first_difference"] == 1
    assert [c["index"] for c in got["culprits"]] == [1]
    assert got["misaligned"] is None and got["operations"] == [3, 3]
    assert ops.compare(a, a)["first_difference"] is None and ops.compare(a, a)["culprits"] == []


def test_compare_stops_where_the_runs_ran_different_operations():
    ops = _ops_module()
    a = {"records": [_record("mm", "i0", "o0"), _record("mm", "i1", "o1")]}
    b = {"records": [_record("mm", "i0", "o0"), _record("bmm", "i1", "X1")]}
    assert ops.compare(a, b)["misaligned"] == 1 and ops.compare(a, b)["first_difference"] is None
    shorter = {"records": a["records"][:1]}
    assert ops.compare(a, shorter)["misaligned"] == 1


def test_digest_tells_dtype_shape_and_bytes_apart():
    import torch

    ops = _ops_module()
    x = torch.arange(6, dtype=torch.float32)
    assert ops.digest(x) == ops.digest(x.clone())
    assert ops.digest(x) != ops.digest(x.view(2, 3))
    assert ops.digest(x) != ops.digest(x.to(torch.float64))
    assert ops.digest(x.to(torch.bfloat16)) != ops.digest(x.to(torch.float16))
    y = x.clone()
    y[3] = torch.nextafter(y[3], torch.tensor(10.0))
    assert ops.digest(x) != ops.digest(y)


def _trace(tmp_path: Path, name: str, env: dict[str, str]) -> dict:
    out = tmp_path / f"{name}.json"
    cmd = [sys.executable, str(REPO / "checks" / "numerics_ops.py"), "trace", "--out", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text())


def test_pinned_traces_agree_and_mkl_default_path_is_named_at_a_matrix_product(tmp_path):
    from scpo.numerics import pin

    base = {k: v for k, v in os.environ.items() if k not in pin()}
    envs = {
        "pinned": {**base, **pin()},
        "again": {**base, **pin()},
        "mkl_default": {**base, **{k: v for k, v in pin().items() if k != "MKL_CBWR"}},
    }
    with ThreadPoolExecutor(2) as pool:
        runs = dict(zip(envs, pool.map(lambda kv: _trace(tmp_path, *kv), envs.items())))
    ops = _ops_module()
    assert runs["pinned"]["numerics"]["status"] == "pinned"
    assert set(runs["pinned"]["phases"]) == {"init", "sft", "scoring"}
    assert len(runs["pinned"]["records"]) == runs["pinned"]["phases"]["scoring"] > 1000
    same = ops.compare(runs["pinned"], runs["again"])
    assert same["first_difference"] is None and same["misaligned"] is None
    assert runs["pinned"]["final"] == runs["again"]["final"]
    other = ops.compare(runs["pinned"], runs["mkl_default"])
    assert runs["pinned"]["final"]["weights"] != runs["mkl_default"]["final"]["weights"]
    assert other["misaligned"] is None and other["first_difference"] is not None
    first = other["culprits"][0]
    assert first["index"] == other["first_difference"] and first["op"].startswith("aten.mm")


def test_a_fused_adamw_step_does_not_depend_on_mkls_code_path():
    """AdamW's unfused step takes `aten.sqrt`, which ATen hands to MKL's vector math (the cross-vendor difference of
    docs/reproducibility.md); the fused step computes in ATen's own kernel, the same bytes whichever path MKL takes."""
    rows = _ops_module().sqrt_paths()
    assert [r["run"] for r in rows] == ["pinned", "pinned, MKL_CBWR=AUTO"]
    assert rows[0]["adamw"]["fused"] == rows[1]["adamw"]["fused"]
    assert all(r["elements"] == 2048 * 64 and 0 <= r["sqrt_not_ieee"] <= r["elements"] for r in rows)
