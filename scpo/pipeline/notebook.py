"""What every notebook does first: resolve the repository root and build its Config through `load_config`, so Papermill
parameters get the same validation as params.yaml and the CLI.

Notebook parameters are scalars only; dotted config overrides travel as one string, `"key=value; key=value"` (values are
YAML, so `report.methods=[grpo, scpo]` works).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scpo.config import Config, ConfigError, load_config, parse_overrides
from scpo.pipeline.layout import find_repo_root

__all__ = ["split_overrides", "notebook_config", "resolve"]


def split_overrides(overrides: str | None) -> dict[str, Any]:
    """'a.b=1; c=[x, y]' -> {'a.b': 1, 'c': ['x', 'y']}. Empty or None gives {}."""
    items = [item.strip() for item in (overrides or "").split(";") if item.strip()]
    return parse_overrides(items)


def resolve(path: str | Path, root: Path) -> Path:
    """`path` if absolute, else relative to the repository root `root`."""
    path = Path(path)
    return path if path.is_absolute() else root / path


def notebook_config(
    params: str = "params.yaml", profile: str | None = None, overrides: str | None = "", **fixed: Any
) -> tuple[Config, Path]:
    """(cfg, repo_root) for a notebook. `fixed` are dotted keys the notebook sets from its own parameters
    (e.g. `**{"env.name": env}`); `overrides` win over them. Relative paths (data.root, data.shared_dir, train.out_dir,
    train.init_from) are made absolute against the repository root, so a notebook runs the same from the root
    (Papermill, DVC) or from notebooks/ (JupyterLab)."""
    root = find_repo_root(Path(params).parent if Path(params).is_absolute() else None)
    extra = {k: v for k, v in fixed.items() if v is not None and v != ""}
    try:
        extra.update(split_overrides(overrides))
    except ConfigError as err:
        raise ConfigError(f"notebook parameter overrides={overrides!r}: {err}") from None
    cfg = load_config(resolve(params, root), profile=profile or None, overrides=extra)
    cfg.data.root = str(resolve(cfg.data.root, root))
    cfg.data.shared_dir = str(resolve(cfg.data.shared_dir, root))
    cfg.train.out_dir = str(resolve(cfg.train.out_dir, root))
    if cfg.train.init_from:
        cfg.train.init_from = str(resolve(cfg.train.init_from, root))
    return cfg, root
