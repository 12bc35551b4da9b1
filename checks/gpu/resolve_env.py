"""Does the GPU environment resolve? pip's resolver, run for a CUDA server's platform, on this project's requirements.

    python checks/gpu/resolve_env.py [--out checks/gpu/results/resolve.json]

What is resolved: this package's dependencies and its `suite`, `dev`, `notebook` and `gpu` extras (the set
`requirements/gpu.txt` locks and `environment.yml` installs), for CPython 3.11 on x86-64 Linux with glibc up to
`--glibc` (2.35: Ubuntu 22.04), binary wheels only, from PyPI alone (`pip --isolated`: no local indexes, find-links
or constraints of this machine).
The run is `pip install --dry-run --ignore-installed --report`: nothing is downloaded beyond metadata, nothing
installed.

It checks that the set holds together the way a fresh server needs: the pinned vLLM is chosen, torch is the version
vLLM pins (the CUDA build PyPI serves), transformers satisfies vLLM's range, and environment.yml installs the lock.
It only shows that pip finds a consistent set of wheels; whether they run on a GPU is what `checks/gpu/run.sh` checks.
Three dependencies exist on PyPI only as source (`SDIST_ONLY`: dvc -> hydra-core -> antlr4-python3-runtime 4.9.3;
alfworld -> textworld -> jericho and fast-downward-textworld, which compiles C++ at install, so the server needs a C++
compiler and CMake); they are built into wheels here first (`pip wheel --no-deps`), as pip builds them on the server,
and offered to the resolver with `--find-links`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
EXTRAS = ("suite", "dev", "notebook", "gpu")
SDIST_ONLY = ("antlr4-python3-runtime==4.9.3", "jericho==3.3.1", "fast-downward-textworld==20.6.4")
SHOWN = (
    "vllm",
    "torch",
    "transformers",
    "tokenizers",
    "accelerate",
    "peft",
    "triton",
    "flashinfer-python",
    "xgrammar",
    "nvidia-cuda-runtime",
    "nvidia-cudnn-cu13",
    "numpy",
    "pydantic",
    "alfworld",
    "dvc",
)


def requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The project's dependencies plus those of its dev, notebook and gpu extras, as written in pyproject.toml."""
    project = tomllib.loads(pyproject.read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in EXTRAS:
        reqs += project["optional-dependencies"][extra]
    return reqs


def pinned(reqs: list[str], name: str) -> str | None:
    """The version of `name==X` among `reqs` (None if not pinned exactly)."""
    for r in reqs:
        m = re.fullmatch(rf"\s*{re.escape(name)}\s*==\s*([^\s;,]+)\s*", r)
        if m:
            return m.group(1)
    return None


def platform_args(glibc_minor: int) -> list[str]:
    """--platform for every manylinux tag a glibc 2.<glibc_minor> x86-64 system accepts (pip does not expand them)."""
    tags = [f"manylinux_2_{m}_x86_64" for m in range(glibc_minor, 4, -1)]
    tags += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    return [arg for t in tags for arg in ("--platform", t)]


def resolve(reqs: list[str], python: str, glibc_minor: int, index_url: str) -> dict:
    """pip's dry-run report for `reqs` on the target platform (SDIST_ONLY built to wheels first)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        built = Path(tmp) / "built"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--isolated",
                "wheel",
                "--quiet",
                "--no-deps",
                "--index-url",
                index_url,
                "--wheel-dir",
                str(built),
                *SDIST_ONLY,
            ],
            check=True,
        )
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "--isolated",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            "--index-url",
            index_url,
            "--find-links",
            str(built),
            *platform_args(glibc_minor),
            "--python-version",
            python,
            "--implementation",
            "cp",
            "--abi",
            f"cp{python.replace('.', '')}",
            "--abi",
            "abi3",
            "--abi",
            "none",
            "--only-binary=:all:",
            *reqs,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"pip could not resolve the GPU set (exit {done.returncode}):\n{done.stderr.strip()}")
        return json.loads(report.read_text())


def vllm_requirement(report: dict, name: str) -> str | None:
    """The specifier vLLM's metadata puts on `name` (e.g. 'transformers>=5.5.3')."""
    for item in report["install"]:
        if item["metadata"]["name"].lower() == "vllm":
            for r in item["metadata"].get("requires_dist", []):
                if re.match(rf"{re.escape(name)}\b", r) and "extra ==" not in r:
                    return r
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="write the resolved set and the checks as JSON")
    ap.add_argument("--python", default="3.11")
    ap.add_argument("--glibc", default="2.35", help="the server's glibc (manylinux tags up to it are accepted)")
    ap.add_argument("--index-url", default="https://pypi.org/simple")
    args = ap.parse_args()
    from packaging.requirements import Requirement

    reqs = requirements()
    env_yml = (ROOT / "environment.yml").read_text()
    t0 = time.perf_counter()
    report = resolve(reqs, args.python, int(args.glibc.split(".")[1]), args.index_url)
    versions = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report["install"]}
    want_vllm = pinned(reqs, "vllm")
    torch_req = vllm_requirement(report, "torch")
    tf_req = vllm_requirement(report, "transformers")
    checks = {
        "environment.yml installs requirements/gpu.txt": "-r requirements/gpu.txt" in env_yml,
        f"vllm is the pinned {want_vllm}": want_vllm is not None and versions.get("vllm") == want_vllm,
        f"torch {versions.get('torch')} satisfies vLLM's {torch_req}": bool(
            torch_req and Requirement(torch_req.split(";")[0]).specifier.contains(versions.get("torch", ""))
        ),
        f"transformers {versions.get('transformers')} satisfies vLLM's {tf_req}": bool(
            tf_req and Requirement(tf_req.split(";")[0]).specifier.contains(versions.get("transformers", ""))
        ),
        "a CUDA build of torch (nvidia-cuda-runtime in the set)": any(
            k.startswith("nvidia-cuda-runtime") for k in versions
        ),
    }
    print(
        f"pip resolved {len(versions)} packages for CPython {args.python}, x86-64 Linux, glibc <= {args.glibc}, "
        f"wheels only, from {args.index_url} ({time.perf_counter() - t0:.0f} s):"
    )
    for name in SHOWN:
        print(f"  {name:22s} {versions.get(name, '-')}")
    for what, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAIL'}] {what}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "python": args.python,
                    "glibc": args.glibc,
                    "index_url": args.index_url,
                    "pip": report.get("pip_version"),
                    "requirements": reqs,
                    "checks": checks,
                    "resolved": dict(sorted(versions.items())),
                },
                indent=2,
            )
            + "\n"
        )
    if not all(checks.values()):
        raise SystemExit("the resolved set fails a check above")


if __name__ == "__main__":
    main()
