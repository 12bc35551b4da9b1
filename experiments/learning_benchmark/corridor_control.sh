#!/usr/bin/env bash
# The learning benchmark's positive control: the same benchmark, trainer and tiny policy on the data-free corridor's
# long split (5-8 rooms, a key in half of them, 12 steps per episode), where the planner's V* is exact and the state
# is in the observation. Two warm starts, each an SFT of 8 demonstrations for one epoch:
#   random: at lr 1e-6, the initial weights in effect (panel success 0.08)
#   weak:   at the default lr, which learns to walk east (walk tasks solved, key tasks mostly not)
# GRPO, GiGPO, SCPO, the oracle, shuffled credit and oracle+outcome, 10 paired seeds, the learning benchmark's settings.
#
#   source .venv/bin/activate && bash experiments/learning_benchmark/corridor_control.sh [RUNS_DIR]
#
# Runs (warm starts included) go to RUNS_DIR (default /tmp/scpo_corridor_control: outside runs/, which the pipeline's
# stages read); a finished run is not repeated. Tables and figures:
# experiments/learning_benchmark/results/corridor_control/<start>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-/tmp/scpo_corridor_control}
PIN=$(python -m scpo.numerics env)
CORRIDOR=(--set env.corridor.max_steps=12 --set env.corridor.train_split=train_long
          --set 'env.corridor.eval_splits=[valid_long]')
for start in random weak; do
  sft=$RUNS/sft_$start
  lr=(); [ "$start" = random ] && lr=(--set train.sft.lr=1e-6)
  if [ ! -f "$sft/model/model.safetensors" ]; then
    env $PIN scpo train --stage sft --profile cpu --set env.name=corridor "${CORRIDOR[@]}" \
      --set train.sft.n_demos=8 --set train.sft.epochs=1 "${lr[@]}" --out "$sft"
  fi
  env $PIN python experiments/learning_benchmark/learning_benchmark.py "${CORRIDOR[@]}" \
    --set 'learning.envs=[corridor]' --set 'learning.methods=[grpo,gigpo,scpo,oracle,shuffled]' \
    --set 'learning.variants={oracle+outcome: {credit.method: oracle, credit.oracle.episode_weight: 1.0}}' \
    --set 'learning.reference_methods=[grpo]' --set 'learning.dynamic_sampling=[]' \
    --set 'learning.seeds=[0,1,2,3,4,5,6,7,8,9]' \
    --set 'learning.unseen_split={corridor: valid_long}' --set learning.unseen_n_tasks=null \
    --set "learning.out_dir=$RUNS/$start" --warm-start "corridor=$sft" \
    --results "experiments/learning_benchmark/results/corridor_control/$start"
done
