"""`scpo prepare-data` and the pipeline's first notebook: ALFWorld games and the WebShop catalogue into `data.root`."""

from __future__ import annotations

import json
from pathlib import Path

from scpo.data.alfworld_data import prepare_alfworld
from scpo.data.webshop_data import prepare_webshop

__all__ = ["prepare_data", "ONLY"]

ONLY = ("alfworld", "webshop")


def prepare_data(cfg, only: str | None = None) -> dict:
    """Prepare ALFWorld and/or WebShop (`only`), merge the counts into `<data.root>/prepare_summary.json`, return them.
    Raises DataError (one line: where it looked, what to run) when data cannot be found or fetched."""
    if only not in (None, *ONLY):
        raise ValueError(f"only={only!r}; allowed: {', '.join(ONLY)} (or nothing for both)")
    root = Path(cfg.data.root)
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
