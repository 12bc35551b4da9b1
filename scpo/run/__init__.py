"""A training run decided once, and its folder: the plan (`plan`: every check, nothing written; `inputs`: the task pool,
the start models, the memory), the folder's guards (`guards`; its lock: `scpo.pipeline.folder_lock`), its life while a
run writes into it (`folder`: `open_run`), what it records (`provenance`), its checkpoints (`checkpoint`), its history
(`history`) and the stop on a non-finite update (`finite`). The learning itself lives in `scpo.train`.
"""
