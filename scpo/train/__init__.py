"""The learning: the behaviour-cloning warm start (`sft`), the group-RL trainer (`trainer`: collect, credit, update,
log, checkpoint), the update and its loss, an iteration's rollouts (`collect`), evaluation, the seeds of a pipeline
stage side by side (`seed_pool`). A run's plan and its folder (checks, lock, provenance, checkpoints, history) live in
`scpo.run`.

Entry points (imported lazily: torch is heavy): `scpo.train.run.run_training`, `scpo.train.evaluate.run_evaluation`.
"""
