"""Training: behaviour-cloning warm start, the group-RL loop, the update, checkpoints, run folders, evaluation.

Entry points (imported lazily: torch is heavy): `scpo.train.run.run_training` (the run's setup: `setup`, the loop:
`rl_loop`, SFT: `sft`), `scpo.train.evaluate.run_evaluation`.
"""
