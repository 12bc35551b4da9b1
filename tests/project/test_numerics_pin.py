"""The CPU numerics pin (scpo/numerics.py): runs started as on machines with different default kernels give the same
bytes with it and other bytes without it; a process that is not under the whole pin says so; `python -m scpo.numerics
env` gives the Makefile the pin where the CPU can honour it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.checks import load_check

REPO = Path(__file__).resolve().parents[2]


def _checks_module():
    return load_check("numerics_kernels")


def _has_avx512() -> bool:
    from scpo.numerics import cpu_info

    return "avx512f" in cpu_info()["flags"]


@pytest.mark.skipif(not _has_avx512(), reason="emulating an AVX-512 machine needs a CPU with AVX-512")
def test_pinned_runs_agree_across_machine_kernels_and_unpinned_runs_do_not(tmp_path):
    """SFT + RL + evaluation + bi-encoder similarities of a small policy, started as on an AVX-512 and on an AVX2
    machine (checks/numerics_kernels.py smoke --size test): byte-identical under the pin; without it the weights differ,
    which shows the comparison can fail."""
    nk = _checks_module()
    result = nk.smoke(tmp_path, size="test")
    runs = result["runs"]
    assert result["differ_with_pin"] == []
    assert {"sft weights", "rl weights"} <= set(result["differ_without_pin"])
    assert runs["avx512+pin"]["capability"] == runs["avx2+pin"]["capability"] == "AVX2"
    assert runs["avx512+pin"]["numerics"] == runs["avx2+pin"]["numerics"] == "pinned"
    assert runs["avx512"]["capability"] == "AVX512" and runs["avx512"]["numerics"] == "unpinned"


def _state(env: dict[str, str], code: str = "") -> tuple[dict, str]:
    """scpo.numerics.check() in a new process started with `env` after running `code`: (state, its stderr)."""
    script = f"{code}\nimport json\nfrom scpo import numerics\nprint(json.dumps(numerics.check()))"
    done = subprocess.run(
        [sys.executable, "-c", script], env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def _bare_env() -> dict[str, str]:
    from scpo.numerics import pin

    nk = _checks_module()
    return {k: v for k, v in os.environ.items() if k not in nk.KNOBS and k not in pin()}


def test_a_process_started_under_the_pin_is_pinned_and_quiet():
    from scpo.numerics import pin

    state, err = _state({**_bare_env(), **pin()})
    assert state["status"] == "pinned" and state["problems"] == [] and err == ""
    assert state["torch_cpu_capability"] == "AVX2" and state["threads"]["torch"] == 1
    openblas = [p for p in state["threadpools"] if p.get("internal_api") == "openblas"]
    assert openblas and all(p["architecture"] == "Haswell" for p in openblas)


def test_a_process_without_the_pin_is_recorded_as_unpinned_without_a_warning():
    state, err = _state(_bare_env())
    assert state["status"] == "unpinned" and err == ""
    assert state["at_start"]["ATEN_CPU_CAPABILITY"] is None


def test_part_of_the_pin_missing_is_named_in_one_line():
    from scpo.numerics import pin

    env = {**_bare_env(), **pin(), "OMP_NUM_THREADS": "3"}
    state, err = _state(env)
    assert state["status"] == "pin not in force"
    assert state["problems"] == ["OMP_NUM_THREADS=3 at start (pin: 1)"]
    assert len(err.strip().splitlines()) == 1 and "OMP_NUM_THREADS=3" in err


def test_torch_run_before_the_pin_was_set_is_caught():
    """The pin set from Python after torch's first operator: the variables look right, the kernels are not."""
    from scpo.numerics import pin

    code = f"import os, torch\ntorch.ones(3).sum()\nos.environ.update({pin()!r})\n"
    state, err = _state({**_bare_env(), "SCPO_NUMERICS_PIN": pin()["SCPO_NUMERICS_PIN"]}, code)
    assert state["status"] == "pin not in force"
    kernels = [p for p in state["problems"] if p.startswith("PyTorch runs its")]
    if _has_avx512():
        assert kernels == ["PyTorch runs its AVX512 kernels (pin: AVX2)"]
    assert any(p.startswith("ATEN_CPU_CAPABILITY=<unset> at start") for p in state["problems"])
    assert len(err.strip().splitlines()) == 1


def test_shell_lines_give_the_pin_or_nothing_with_the_reason():
    from scpo import numerics

    arm = numerics.unsupported_reason({"machine": "aarch64", "flags": ["asimd"]})
    assert arm.startswith("CPU architecture aarch64")
    no_avx2 = numerics.unsupported_reason({"machine": "x86_64", "flags": ["sse4_2", "avx"]})
    assert "lacks avx2 and fma" in no_avx2
    assert numerics.unsupported_reason({"machine": "x86_64", "flags": ["avx2", "fma"]}) is None
    done = subprocess.run(
        [sys.executable, "-m", "scpo.numerics", "env"], capture_output=True, text=True, cwd=REPO, check=True
    )
    if numerics.unsupported_reason() is None:
        assert done.stdout.split() == [f"{k}={v}" for k, v in numerics.pin().items()]
    else:
        assert done.stdout.strip() == "" and done.stderr.startswith("numerics: no CPU pin")


def test_pin_file_rejects_a_line_that_is_not_key_value(tmp_path):
    from scpo.numerics import pin

    bad = tmp_path / "numerics.env"
    bad.write_text("# comment\nATEN_CPU_CAPABILITY=avx2\nMKL_CBWR\n")
    with pytest.raises(ValueError, match="'MKL_CBWR' is not KEY=VALUE"):
        pin(bad)
    bad.write_text("# comment\n\nA=1\n B = 2 \n")
    assert pin(bad) == {"A": "1", "B": "2"}


def test_thread_pools_are_listed_by_file_whatever_order_they_were_loaded_in(monkeypatch):
    """Two processes that imported the same libraries in another order record the same list."""
    import threadpoolctl

    from scpo.numerics import _threadpools

    loaded = [
        {"filepath": "/x/libscipy_openblas64_.so", "user_api": "blas", "internal_api": "openblas", "num_threads": 1},
        {"filepath": "/y/libgomp.so.1", "user_api": "openmp", "internal_api": "openmp", "num_threads": 1},
        {"filepath": "/z/libiomp5.so", "user_api": "openmp", "internal_api": "openmp", "num_threads": 2},
    ]
    lists = []
    for order in (loaded, loaded[::-1]):
        monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda order=order: [dict(lib) for lib in order])
        lists.append(_threadpools())
    assert lists[0] == lists[1]
    assert [lib["file"] for lib in lists[0]] == ["libgomp.so.1", "libiomp5.so", "libscipy_openblas64_.so"]
