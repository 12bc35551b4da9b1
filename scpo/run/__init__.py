"""A training run decided once, and its folder: the plan (`plan`: every check, nothing written; `inputs`: the task
pool, the start models, the memory), the folder's guards and lock (`guards`, `lock`), its life while a run writes into
it (`folder`: `open_run`), what it records (`provenance`), its checkpoints (`checkpoint`), its history (`history`) and
the stop on a non-finite update (`finite`). The learning itself lives in `scpo.train`.
"""
