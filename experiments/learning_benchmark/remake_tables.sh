#!/usr/bin/env bash
# Re-make the tables and figures of every committed study from its results/<study>/runs.json (and fidelity_auc.json),
# with this checkout's statistics, without the run folders: each study's own settings (those of its command in
# README.md), `--report-only --from-results`. Nothing is trained.
#
#   source .venv/bin/activate && bash experiments/learning_benchmark/remake_tables.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
R=experiments/learning_benchmark/results
remake() {  # remake <results folder> [--set ...]
  local dir=$1
  shift
  python experiments/learning_benchmark/learning_benchmark.py --report-only --from-results --results "$dir" "$@" \
    > /dev/null
  echo "re-made $dir"
}
PAIR=(--set 'learning.methods=[grpo,oracle]' --set 'learning.reference_methods=[grpo]'
      --set 'learning.dynamic_sampling=[]')
OUTCOME='oracle+outcome: {credit.method: oracle, credit.oracle.episode_weight: 1.0}'
TRAJECTORY='oracle-trajectory: {credit.method: oracle, credit.oracle.level: trajectory}'

remake $R
remake $R/oracle_outcome "${PAIR[@]}" --set "learning.variants={$OUTCOME}"
remake $R/oracle_variants --set 'learning.methods=[grpo,oracle]' --set 'learning.reference_methods=[grpo,oracle]' \
  --set 'learning.dynamic_sampling=[]' --set "learning.variants={$OUTCOME,
    oracle-omega0.43: {credit.method: oracle, credit.oracle.omega: 0.43},
    oracle-omega0.2: {credit.method: oracle, credit.oracle.omega: 0.2},
    oracle-centred: {credit.method: oracle, credit.oracle.baseline: group_mean},
    oracle-optimal: {credit.method: oracle, credit.oracle.baseline: optimal}}"
remake $R/policy_advantage --set 'learning.methods=[mc_advantage,grpo]' --set 'learning.reference_methods=[grpo]' \
  --set 'learning.dynamic_sampling=[]'
remake $R/oracle_trajectory "${PAIR[@]}" --set "learning.variants={$TRAJECTORY}"
remake $R/equal_steps --set 'learning.methods=[grpo,oracle,shuffled]' --set 'learning.reference_methods=[grpo]' \
  --set 'learning.dynamic_sampling=[]' --set "learning.variants={$TRAJECTORY}" \
  --set train.minibatch_size=100000 --set train.ppo_epochs=3 --set train.micro_batch_size=64
remake $R/history6 "${PAIR[@]}" --set env.history_length=6
remake $R/history2_weak_start "${PAIR[@]}"
remake $R/history6_strong_start "${PAIR[@]}" --set env.history_length=6
remake $R/horizon50 "${PAIR[@]}" --set env.alfworld.max_steps=50
remake $R/fully_observed "${PAIR[@]}" --set env.alfworld.reveal_goal_objects=true \
  --set 'learning.seeds=[0,1,2,3,4,5,6,7,8,9]' --set "learning.variants={$OUTCOME}"
for start in random weak; do
  remake $R/corridor_control/$start --set env.corridor.max_steps=12 --set env.corridor.train_split=train_long \
    --set 'env.corridor.eval_splits=[valid_long]' --set 'learning.envs=[corridor]' \
    --set 'learning.methods=[grpo,gigpo,scpo,oracle,shuffled]' --set "learning.variants={$OUTCOME}" \
    --set 'learning.reference_methods=[grpo]' --set 'learning.dynamic_sampling=[]' \
    --set 'learning.seeds=[0,1,2,3,4,5,6,7,8,9]' --set 'learning.unseen_split={corridor: valid_long}' \
    --set learning.unseen_n_tasks=null
done
