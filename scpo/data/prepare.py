"""`scpo prepare-data` and the pipeline's first notebook: ALFWorld games and the WebShop catalogue into `data.root`.

A write that fails (a full disk, a data.root that is read-only or a file) is one DataError line naming the path; it is
never reported as corrupt source data. The data already in place stays as it was (each part is prepared in a
temporary folder renamed into place)."""

from __future__ import annotations

import json
from pathlib import Path

from scpo.data.alfworld_data import AFTER_WRITE_FAILURE, prepare_alfworld
from scpo.data.errors import DataError
from scpo.data.webshop_data import prepare_webshop
from scpo.errors import write_problem

__all__ = ["prepare_data", "ONLY"]

ONLY = ("alfworld", "webshop")


def prepare_data(cfg, only: str | None = None) -> dict:
    """Prepare ALFWorld and/or WebShop (`only`), merge the counts into `<data.root>/prepare_summary.json`, return them.
    Raises DataError (one line: where it looked, what to run) when data cannot be found or fetched."""
    if only not in (None, *ONLY):
        raise ValueError(f"only={only!r}; allowed: {', '.join(ONLY)} (or nothing for both)")
    root = Path(cfg.data.root)
    if root.exists() and not root.is_dir():
        raise DataError(f"data.root={root} is a file, not a folder; point data.root at a folder for the data")
    try:
        return _prepare(cfg, root, only)
    except OSError as err:
        problem = write_problem(err, root)
        if problem is None:
            raise
        raise DataError(f"{problem}; {AFTER_WRITE_FAILURE}") from None


def _prepare(cfg, root: Path, only: str | None) -> dict:
    summary: dict = {}
    if only in (None, "alfworld"):
        counts = prepare_alfworld(
            root / "alfworld",
            source=cfg.data.alfworld_source,
            shared_dir=cfg.data.shared_dir,
            require_all=cfg.data.alfworld_require_all,
        )
        summary["alfworld"] = {**counts, "total": sum(counts.values())}
    if only in (None, "webshop"):
        summary["webshop"] = prepare_webshop(cfg)
    path = root / "prepare_summary.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**previous, **summary}, indent=2))
    return summary
