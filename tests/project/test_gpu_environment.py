"""The GPU server's environment is the locked set: environment.yml installs requirements/gpu.txt (every package
pinned, with hashes) and nothing by range, for the Python the lock was made for; the versions it names are the lock's,
the gpu extra's pins are the lock's, and the documented commands install the package without its dependencies."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
import yaml

from scpo.software import lock_entries

REPO = Path(__file__).resolve().parents[2]
GPU_LOCK = REPO / "requirements" / "gpu.txt"


def _environment() -> dict:
    return yaml.safe_load((REPO / "environment.yml").read_text())


def test_environment_yml_installs_the_gpu_lock_and_nothing_else():
    deps = _environment()["dependencies"]
    pip = [d["pip"] for d in deps if isinstance(d, dict)]
    assert pip == [["-r requirements/gpu.txt"]]
    conda = [d for d in deps if isinstance(d, str)]
    python = next(d for d in conda if d.startswith("python="))
    lock_py = (REPO / "requirements" / "lock.py").read_text()
    assert python == "python=" + re.search(r'^PYTHON = "([0-9.]+)"', lock_py, re.M).group(1)
    assert conda == [python, "pip"]


def test_the_versions_environment_yml_names_are_the_locks():
    locked = lock_entries(GPU_LOCK)
    named = re.findall(r"\b(vLLM|torch|transformers) ([0-9][0-9.]*[0-9])", (REPO / "environment.yml").read_text())
    assert {n for n, _ in named} == {"vLLM", "torch", "transformers"}
    for name, version in named:
        assert locked[name.lower()] == version, (name, version)


def test_the_gpu_extras_pins_are_the_locks_and_trl_is_gone():
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    locked = lock_entries(GPU_LOCK)
    pins = dict(re.match(r"^([A-Za-z0-9._-]+)==(\S+)$", r).groups() for r in extra if "==" in r)
    assert pins and all(locked[name.lower()] == version for name, version in pins.items())
    assert not any(r.startswith("trl") for r in extra) and "trl" not in locked  # imported nowhere (docs/gpu.md)


def test_the_documented_gpu_commands_install_the_lock():
    """README and docs/gpu.md: the environment from environment.yml, then the package alone (`--no-deps`), never
    `pip install .[gpu]` (ranges)."""
    for doc in ("README.md", "docs/gpu.md"):
        text = (REPO / doc).read_text()
        assert "conda env create -f environment.yml" in text and "pip install --no-deps -e ." in text, doc
        assert "requirements/gpu.txt" in text and ".[dev,notebook,gpu]" not in text, doc
