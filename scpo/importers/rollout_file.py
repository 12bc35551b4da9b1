"""Write a `RolloutBatch` as a rollout file with pyarrow alone (no pandas), and read back what an importer added.

The file is the one `RolloutBatch.to_parquet` writes and `RolloutBatch.read` reads (`rollouts/iter_XXXX.parquet`:
one row per step, one column per batch column), so the explorer, `scpo credit-map` and every analysis read it as a
run of ours. An importer may add columns the batch does not hold (`verl_copies`: how many padding copies of the row
verl-agent trained on) and a JSON record under the schema's metadata key `scpo.import` (where the rollouts came from);
`RolloutBatch.read` ignores both, `extra_column` and `import_record` read them.

Written to `<name>.tmp` and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from scpo.batch import RolloutBatch

__all__ = ["write_rollout_file", "extra_column", "import_record", "iteration_file", "iteration_name", "RECORD_KEY"]

RECORD_KEY = b"scpo.import"
# the ragged columns of the policy's view: pyarrow types of their values
_LIST_TYPES = {
    "prompt_ids": "ints",
    "response_ids": "ints",
    "candidate_ids": "int_lists",
    "sampler_logprobs": "floats",
}


def iteration_name(iteration: int) -> str:
    """`iter_XXXX.parquet` (four digits at least), the name every reader of runs expects."""
    if iteration < 0:
        raise ValueError(f"iteration {iteration} is negative")
    return f"iter_{iteration:04d}.parquet"


def iteration_file(folder: str | Path, iteration: int) -> Path:
    """`<folder>/rollouts/iter_XXXX.parquet`."""
    return Path(folder) / "rollouts" / iteration_name(iteration)


def _arrow_column(name: str, values: np.ndarray):
    import pyarrow as pa

    if values.dtype == object:
        if name in _LIST_TYPES:
            kind = _LIST_TYPES[name]
            typ = {
                "ints": pa.list_(pa.int64()),
                "floats": pa.list_(pa.float64()),
                "int_lists": pa.list_(pa.list_(pa.int64())),
            }[kind]
            return pa.array(values.tolist(), type=typ)
        if name == "choice_logprob":
            return pa.array(values.tolist(), type=pa.float64())
        return pa.array(values.tolist(), type=pa.string())
    return pa.array(values)


def write_rollout_file(
    batch: RolloutBatch,
    path: str | Path,
    *,
    extra: Mapping[str, np.ndarray] | None = None,
    record: Mapping[str, Any] | None = None,
) -> Path:
    """Write `batch` to `path` (parquet, zstd), with `extra` columns (one value per row, numeric or str) and `record`
    (JSON) in the schema's metadata; returns the path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {k: _arrow_column(k, v) for k, v in batch.columns().items()}
    for name, values in (extra or {}).items():
        if name in columns:
            raise ValueError(f"extra column {name!r} is a RolloutBatch column")
        values = np.asarray(values)
        if len(values) != batch.n_rows:
            raise ValueError(f"extra column {name!r} has {len(values)} rows, the batch {batch.n_rows}")
        columns[name] = _arrow_column(name, values)
    table = pa.table(columns)
    if record is not None:
        table = table.replace_schema_metadata({RECORD_KEY: json.dumps(dict(record), sort_keys=True).encode()})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)
    return path


def extra_column(path: str | Path, name: str) -> np.ndarray | None:
    """The column `name` of a rollout file (e.g. `verl_copies`), None when the file has no such column."""
    import pyarrow.parquet as pq

    if name not in pq.read_schema(path).names:
        return None
    return pq.read_table(path, columns=[name]).column(name).to_numpy()


def import_record(path: str | Path) -> dict[str, Any] | None:
    """The JSON record an importer wrote into a rollout file's metadata, None when there is none."""
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta[RECORD_KEY]) if RECORD_KEY in meta else None
