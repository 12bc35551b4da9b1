"""Rollouts of other trainers as rollout files of ours, so that the explorer, `scpo credit-map`, the inconsistency
analysis and `scpo.credit.estimate` read them as runs of ours (docs/import.md).

- `scpo.importers.verl_agent`: `mark_rows` + `write_rollouts`, two calls in verl-agent's trainer;
- `scpo.importers.jsonl`: a plain JSONL of steps, its schema and its one-line errors;
- `scpo.importers.run_import`: `import_run(source, out)`, what `scpo import` runs (streamed, with progress);
- `scpo.importers.rollout_file`: the rollout file written with pyarrow alone.

This package and what it imports (scpo.batch, scpo.errors) need the light core alone: numpy and pyarrow to write,
pandas to read rollout files back, tqdm for `import_run`'s bar. It installs into a trainer's environment without the
suite (`pip install scpo`; tests/project/test_light_install.py).
"""
