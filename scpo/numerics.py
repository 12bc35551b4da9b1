"""The CPU numerics pin: the kernel families every pipeline process uses, so that the CPU profile gives the same bits
on any x86-64 machine with AVX2 (docs/reproducibility.md), and the check that says when a process runs without it.

The pin is the file `scpo/numerics.env` beside this module (one KEY=VALUE a line); `python -m scpo.numerics env` prints
it for the shell (the Makefile's `make repro` prefixes the pipeline with it), or nothing, with one line on stderr, on a
CPU that cannot honour it. What each variable fixes, found by running the project's smoke SFT, RL, evaluation and
bi-encoder similarities under each setting and comparing the outputs byte for byte (checks/numerics_kernels.py sweep;
docs/reproducibility.md has the table):

    SCPO_NUMERICS_PIN          names the pin (`MARKER`): a process started with it checks that the rest is in force.
    ATEN_CPU_CAPABILITY=avx2   PyTorch's own kernels (softmax, norms, reductions, the optimizer's element-wise maths)
                               are compiled once per SIMD family and picked at the first operator call: AVX-512 here,
                               AVX2 on most other x86-64 CPUs. The families round differently: other weights.
    MKL_CBWR=COMPATIBLE        MKL's GEMMs (every float32 nn.Linear): MKL picks its code by CPU vendor and model.
                               COMPATIBLE changes the weights here; the AVX2 and AVX512 branches change nothing on
                               this AMD CPU (MKL honours them on Intel CPUs only), so COMPATIBLE is the branch that
                               runs alike on every vendor's CPU.
    ONEDNN_MAX_CPU_ISA=AVX2    oneDNN's kernels: the sentence encoder's similarities change with it, and so do
                               bfloat16 products under autocast.
    OPENBLAS_CORETYPE=Haswell  numpy's OpenBLAS picks its kernels by CPU model (SkylakeX on this AVX-512 CPU, Haswell
                               on an AVX2 one): other similarity matrices (numpy products).
    OMP_NUM_THREADS=1          the default thread count of processes that set none (the analyses' encoders), which
                               is the machine's core count: PyTorch splits large reductions across its threads (a
                               4M-float sum differs between 1 and 2 threads; the project's smoke outputs did not).
                               The trainer and the evaluation set `train.torch_threads` themselves.

A variable is read by its library once, when the process starts (OpenBLAS) or at the library's first call (PyTorch,
MKL, oneDNN). The pin is therefore in force when the process was started with it, which `state()` reads from the
environment the process started with (/proc/self/environ), and when PyTorch's kernels in use are the pinned family
(`torch.backends.cpu.get_cpu_capability()`). A process started with part of the pin, or whose torch ran before the
pin was set, is "not in force": `check()` says so in one line, and the run's provenance records it.

Where the pin cannot hold: PyTorch runs AVX2 kernels when asked without checking the CPU, so a CPU without AVX2 and
FMA is not given the pin (`unsupported_reason`); its results, and those on ARM, are not bit-identical to the pinned
ones (only statistically comparable).
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "PIN_FILE",
    "pin",
    "cpu_info",
    "unsupported_reason",
    "start_environment",
    "state",
    "check",
    "shell_lines",
]

PIN_FILE = Path(__file__).with_name("numerics.env")
# the x86 feature flags PyTorch's AVX2 kernels need (its own detection asks for both)
REQUIRED_FLAGS = ("avx2", "fma")
MARKER = "SCPO_NUMERICS_PIN"  # the pin's name: a process started with it was meant to run pinned
PINNED = "pinned"
UNPINNED = "unpinned"
NOT_IN_FORCE = "pin not in force"


def pin(path: Path = PIN_FILE) -> dict[str, str]:
    """The pinned variables, in the file's order."""
    out = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"{path}: {line!r} is not KEY=VALUE")
            out[key.strip()] = value.strip()
    return out


def cpu_info() -> dict[str, Any]:
    """{"machine", "vendor", "model", "flags" (sorted), "logical_cpus"} of this machine (vendor, model and flags from
    /proc/cpuinfo on Linux; empty elsewhere)."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU part"):
                fields.setdefault(key, value.strip())
    except OSError:
        pass
    flags = fields.get("flags") or fields.get("Features") or ""
    return {
        "machine": platform.machine(),
        "vendor": fields.get("vendor_id") or fields.get("CPU implementer"),
        "model": fields.get("model name") or fields.get("CPU part") or platform.processor() or None,
        "flags": sorted(set(flags.split())),
        "logical_cpus": os.cpu_count(),
    }


def unsupported_reason(cpu: dict[str, Any] | None = None) -> str | None:
    """Why this CPU cannot run the pinned kernels (None: it can)."""
    cpu = cpu or cpu_info()
    if cpu["machine"] not in ("x86_64", "AMD64"):
        return f"CPU architecture {cpu['machine']}: the pin names x86-64 kernel families"
    missing = [f for f in REQUIRED_FLAGS if f not in cpu["flags"]]
    if missing:
        return f"this x86-64 CPU lacks {' and '.join(missing)}: PyTorch's AVX2 kernels would not run"
    return None


def start_environment() -> dict[str, str]:
    """The environment this process started with (Linux: /proc/self/environ, which later changes to os.environ do not
    touch), else the current one."""
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return dict(os.environ)
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def _library_versions() -> dict[str, str | None]:
    import torch

    shown = torch.__config__.show()
    found = {"mkl": None, "onednn": None}
    for line in shown.splitlines():
        line = line.strip(" -")
        if "Math Kernel Library" in line:
            found["mkl"] = line
        elif "MKL-DNN" in line or "oneDNN" in line:
            found["onednn"] = line
    return found


def _threadpools() -> list[dict[str, Any]]:
    """The BLAS and OpenMP libraries loaded in this process (threadpoolctl): their file's name, API, version, threads
    and, for OpenBLAS, the kernels it picked (not their folders, which name the machine's); by file name, not in the
    order the process happened to load them."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("user_api", "internal_api", "prefix", "version", "num_threads", "threading_layer", "architecture")
    pools = [
        {"file": Path(lib.get("filepath", "")).name, **{k: lib.get(k) for k in keep if k in lib}}
        for lib in threadpool_info()
    ]
    return sorted(pools, key=lambda lib: (lib["file"], lib.get("user_api") or ""))


def state() -> dict[str, Any]:
    """What this process computes with: the pin, the pinned variables at start and now, PyTorch's kernel family in use,
    the BLAS libraries and thread counts, and `status`: "unpinned" (started without the pin's name `MARKER`; the
    variables are recorded all the same), "pinned", or "pin not in force", with one line per `problems` found.
    Imports torch and numpy (their kernel choice is what is read)."""
    import numpy  # noqa: F401  (loads OpenBLAS, so that its kernel choice is listed)
    import torch

    wanted = pin()
    at_start, now = start_environment(), os.environ
    cpu = cpu_info()
    reason = unsupported_reason(cpu)
    capability = torch.backends.cpu.get_cpu_capability()
    pools = _threadpools()
    problems = []
    requested = MARKER in at_start or MARKER in now
    if requested:
        if reason:
            problems.append(f"the pin cannot hold here ({reason})")
        for key, value in wanted.items():
            if at_start.get(key) != value:
                problems.append(f"{key}={at_start.get(key, '<unset>')} at start (pin: {value})")
            elif now.get(key) != value:
                problems.append(f"{key} changed to {now.get(key, '<unset>')} after start (pin: {value})")
        expected = wanted.get("ATEN_CPU_CAPABILITY", "").upper()
        if expected and capability != expected:
            problems.append(f"PyTorch runs its {capability} kernels (pin: {expected})")
        coretype = wanted.get("OPENBLAS_CORETYPE", "").lower()
        for lib in pools:
            arch = (lib.get("architecture") or "").lower()
            if coretype and lib.get("internal_api") == "openblas" and arch and arch != coretype:
                problems.append(f"OpenBLAS ({lib.get('prefix')}) runs its {lib.get('architecture')} kernels")
    status = UNPINNED if not requested else NOT_IN_FORCE if problems else PINNED
    return {
        "status": status,
        "problems": problems,
        "pin": wanted,
        "pin_supported_here": reason is None,
        "at_start": {k: at_start.get(k) for k in wanted},
        "now": {k: now.get(k) for k in wanted},
        "torch_cpu_capability": capability,
        "libraries": _library_versions(),
        "threadpools": pools,
        "threads": {"torch": torch.get_num_threads(), "logical_cpus": os.cpu_count()},
    }


def check(note=None) -> dict[str, Any]:
    """`state()`, and, when the pin was asked for but is not in force, one line saying so (to `note`; default:
    stderr)."""
    st = state()
    if st["status"] == NOT_IN_FORCE:
        line = (
            "numerics: the CPU pin is not in force in this process (" + "; ".join(st["problems"]) + "): its results "
            "may differ bit for bit from pinned runs (docs/reproducibility.md)"
        )
        (note or (lambda s: print(s, file=sys.stderr)))(line)
    return st


def shell_lines() -> tuple[list[str], str | None]:
    """(KEY=VALUE lines of the pin for this machine's shell, why none where the CPU cannot honour it)."""
    reason = unsupported_reason()
    return ([] if reason else [f"{k}={v}" for k, v in pin().items()]), reason


def main(argv: list[str] | None = None) -> int:
    """`python -m scpo.numerics env`: the pin as KEY=VALUE words (nothing on a CPU that cannot honour it, and one line
    on stderr why); `python -m scpo.numerics check`: this process's state in one line (exit 1 when the pin was asked
    for but is not in force)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["env"]:
        lines, reason = shell_lines()
        if reason:
            line = f"numerics: no CPU pin here ({reason}); results are not bit-identical to pinned runs"
            print(line, file=sys.stderr)
        print(" ".join(lines))
        return 0
    if args == ["check"]:
        st = check(note=print)
        if st["status"] != NOT_IN_FORCE:
            print(
                f"numerics: {st['status']}, PyTorch kernels {st['torch_cpu_capability']}, torch threads "
                f"{st['threads']['torch']}"
            )
        return 1 if st["status"] == NOT_IN_FORCE else 0
    print("usage: python -m scpo.numerics env | check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
