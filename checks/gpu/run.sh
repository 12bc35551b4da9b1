#!/usr/bin/env bash
# The GPU check, one command on a borrowed GPU machine (from the repository root, after carrying checks/gpu/carry/part*):
#   bash checks/gpu/run.sh [OUT]            # results to OUT (default $OUT or checks/gpu/results/latest)
#   bash checks/gpu/run.sh --dry [--plant FAULT] [OUT]   # on the CPU against the stand-in vllm (checks/gpu/standin),
#                                           small sizes; FAULT (stale_weights | skipped_sync) is planted in the stand-in
#                                           (SCPO_STANDIN_FAULTS) and the check must fail on it
# STAGES="engine_default rl_vllm ..." runs only those stages; ENV=corridor takes prompts from the data-free corridor
# (the dry mode's default when no ALFWorld data is under DATA_ROOT).
# Stages, each its own process under a time limit, all within BUDGET_S (default 470 s, so the whole check stays under
# 8 minutes; a stage that would overrun is skipped and recorded): install the carry if vLLM is missing; SmolLM2 on
# vLLM's default runner (same-weights agreement, log-probs, sync after an update, tokens/s) and on V1; one RL iteration
# pair of the gpu profile with vLLM and with the transformers engine; the paper-shaped random Qwen2 (Qwen2.5-1.5B's
# config) iteration with vLLM. Then summary.json, README.md and verdict.txt (gpu_check.py report); the last line printed
# is the verdict, one line ("GPU check passed: ..." or "GPU check FAILED: <stage>: <reason>; ..."), and the exit status
# is 1 when it failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
DRY=0
PLANT=""
if [ "${1:-}" = "--dry" ]; then DRY=1; shift; fi
if [ "${1:-}" = "--plant" ]; then
  [ $DRY = 1 ] || { echo "--plant is for --dry (it plants a fault in the stand-in vllm)"; exit 2; }
  PLANT=${2:?--plant needs stale_weights or skipped_sync}; shift 2
  case "$PLANT" in stale_weights|skipped_sync) ;; *) echo "--plant $PLANT: not one of stale_weights, skipped_sync"; exit 2;; esac
fi
OUT=${1:-${OUT:-checks/gpu/results/latest}}
PY=${PYTHON:-python}
mkdir -p "$OUT"
: > "$OUT/stages.jsonl"
START=$(date +%s)
if [ $DRY = 1 ]; then
  BUDGET_S=${BUDGET_S:-1500}
  export PYTHONPATH="$PWD/checks/gpu/standin:$PWD${PYTHONPATH:+:$PYTHONPATH}"
  export SCPO_STANDIN_FAULTS="$PLANT"
  # an update large enough to change a random model's greedy answers, so the sync can be judged
  SMALL="--prompts 6 --max-new-tokens 4 --sync-demos 8 --sync-lr 0.01"
  RL="--tasks 2 --group 2 --max-steps 2 --max-new-tokens 8 --iterations 1"
  PAPER=qwen2-small; PAPER_RL="--tasks 2 --group 2 --max-steps 2 --max-new-tokens 8 --iterations 1"
  DATA=${DATA_ROOT:-data}; MODEL=qwen2-small
  if [ -z "${ENV:-}" ] && [ ! -d "$DATA/alfworld" ]; then ENV=corridor; fi
  L_ENGINE=400; L_ENGINE_V1=300; L_RL=300; L_PAPER=300
else
  BUDGET_S=${BUDGET_S:-470}
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  export VLLM_USE_FLASHINFER_SAMPLER=0   # FlashInfer is not carried
  SMALL="--prompts 128 --max-new-tokens 48 --sync-demos 128"
  RL="--tasks 4 --group 4 --max-steps 6 --max-new-tokens 128 --iterations 2"
  PAPER=qwen2.5-1.5b; PAPER_RL="--tasks 2 --group 4 --max-steps 4 --max-new-tokens 512 --iterations 1"
  DATA=${DATA_ROOT:-data}; MODEL=smollm2
  L_ENGINE=90; L_ENGINE_V1=70; L_RL=70; L_PAPER=110
  if ! $PY -c "import vllm" 2>/dev/null; then
    t0=$(date +%s); timeout 60 bash checks/gpu/install_carry.sh > "$OUT/install.log" 2>&1; rc=$?
    echo "{\"stage\": \"install\", \"rc\": $rc, \"seconds\": $(( $(date +%s) - t0 )), \"limit\": 60}" >> "$OUT/stages.jsonl"
    if [ $rc != 0 ]; then tail -5 "$OUT/install.log"; exit $rc; fi
  fi
fi
COMMON="--data-root $DATA --models-dir ${MODELS_DIR:-runs/models} --enforce-eager --env ${ENV:-alfworld}"
STAGES=${STAGES:-engine_default engine_v1 rl_vllm rl_transformers rl_paper_qwen2}

stage() {  # stage NAME LIMIT_S args...: run gpu_check.py under min(LIMIT_S, what is left of BUDGET_S)
  local name=$1 limit=$2; shift 2
  case " $STAGES " in *" $name "*) ;; *) return;; esac
  local left=$(( BUDGET_S - ($(date +%s) - START) ))
  if [ $left -lt 20 ]; then
    echo "{\"stage\": \"$name\", \"rc\": \"skipped\", \"seconds\": 0, \"limit\": $limit}" >> "$OUT/stages.jsonl"; return
  fi
  [ $left -lt $limit ] && limit=$left
  local t0=$(date +%s)
  timeout "$limit" $PY checks/gpu/gpu_check.py "$@" $COMMON --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "{\"stage\": \"$name\", \"rc\": $rc, \"seconds\": $(( $(date +%s) - t0 )), \"limit\": $limit}" >> "$OUT/stages.jsonl"
  echo "$name: exit $rc in $(( $(date +%s) - t0 )) s"
}

stage engine_default $L_ENGINE engine --model $MODEL --runner default --throughput $SMALL
stage engine_v1 $L_ENGINE_V1 engine --model $MODEL --runner v1 $SMALL
stage rl_vllm $L_RL rl --engine vllm --model $MODEL --runner v1 $RL
stage rl_transformers $L_RL rl --engine transformers --model $MODEL $RL
stage rl_paper_qwen2 $L_PAPER rl --engine vllm --model $PAPER --runner v1 $PAPER_RL
$PY checks/gpu/gpu_check.py report --out "$OUT" > /dev/null
rc=$?
sed '$d' "$OUT/README.md"
echo "total $(( $(date +%s) - START )) s"
cat "$OUT/verdict.txt"
exit $rc
