"""Manifests: one small JSON per pipeline output folder (prepared data, a run), whose values change exactly when the
folder's content does. DVC stages depend on them as params files instead of on the folders themselves:

    params:
      - runs/alfworld/sft/seed0/manifest.json:      # a run: <run>/manifest.json
      - data/alfworld.manifest.json:                # prepared data: beside its folder

In a fresh clone those folders do not exist yet. DVC 3.67 hashes every file dependency of a stage before a dry
run (`dvc repro --dry`, `dvc exp run --dry`: its run cache's `_can_hash`), and fails on a folder that an earlier stage
has not built yet; a params file that does not exist reads as empty, so the dry run lists the stage instead. A real run
compares the manifest's values like any params, so a stage re-runs when the folder it reads changed.

    {"files": 21, "bytes": 4321, "sha256": "<sha256 over the sorted (path, sha256 of the file) pairs>"}   per part
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "MANIFEST_FILE",
    "folder_digest",
    "write_manifest",
    "write_run_manifest",
    "write_seeds_manifest",
    "write_data_manifest",
    "data_manifest_path",
]

MANIFEST_FILE = "manifest.json"
# what later stages read of a run (evaluation: the model; credit maps: the rollouts); both are deterministic for a
# given config and seed, so re-running a stage that changed nothing leaves the manifest, and the stages after it,
# unchanged (history.csv holds timings: the tables' stages depend on the runs folder itself)
RUN_PARTS = ("model", "rollouts")


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def folder_digest(paths: Iterable[Path], root: Path) -> dict[str, object]:
    """{"files", "bytes", "sha256"} of every file in `paths` (files or folders, recursively), named relative to `root`
    (so a moved folder keeps its digest)."""
    files = sorted(
        {f for p in paths for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file() and f != root / MANIFEST_FILE}
    )  # a folder's own manifest is not its content
    h = hashlib.sha256()
    size = 0
    for f in files:
        h.update(f"{f.relative_to(root).as_posix()}\0{_file_sha256(f)}\n".encode())
        size += f.stat().st_size
    return {"files": len(files), "bytes": size, "sha256": h.hexdigest()}


def write_manifest(folder: Path, parts: dict[str, list[Path]], out: Path | None = None) -> Path:
    """Write `{part: folder_digest(paths)}` to `out` (default `folder/manifest.json`) atomically; return its path."""
    folder = Path(folder)
    out = Path(out) if out is not None else folder / MANIFEST_FILE
    data = {name: folder_digest([p for p in paths if p.exists()], folder) for name, paths in parts.items()}
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(out)
    return out


def write_run_manifest(run_dir: Path) -> Path:
    """The manifest of a finished run: its model and saved rollouts (`RUN_PARTS`)."""
    run_dir = Path(run_dir)
    return write_manifest(run_dir, {part: [run_dir / part] for part in RUN_PARTS})


def write_seeds_manifest(method_dir: Path, seeds) -> Path:
    """The manifest of one method's runs, `<train.out_dir>/<env>/<method>/manifest.json`: each seed's model and
    rollouts (`seed<k>/model`, ...), what the evaluate stage of that method reads."""
    method_dir = Path(method_dir)
    return write_manifest(
        method_dir, {f"seed{s}/{part}": [method_dir / f"seed{s}" / part] for s in sorted(seeds) for part in RUN_PARTS}
    )


def data_manifest_path(folder: Path) -> Path:
    """Where the manifest of a prepared dataset folder lives: beside it, `<data.root>/<name>.manifest.json` (never
    inside: the folder may be a link to data that is not ours to write, e.g. the committed test games)."""
    folder = Path(folder)
    return folder.with_name(f"{folder.name}.manifest.json")


def write_data_manifest(folder: Path) -> Path:
    """The manifest of a prepared dataset folder (`data/alfworld`, `data/webshop`): every file in it."""
    folder = Path(folder)
    return write_manifest(folder, {"data": [folder]}, out=data_manifest_path(folder))
