"""What every run folder (`provenance.json`) and every checkpoint (`state.json`) records about how it was made, and the
comparison `--resume` makes with it.

    provenance(cfg) = {"config": the fully resolved config (every key, relative paths made absolute),
                       "params": the params file, "profile": the profile, "overrides": the explicit dotted overrides
                       (CLI --set and options, notebook parameters), "scpo_version": ..., "git": {"commit", "dirty"},
                       "command": argv, "python": ..., "packages": {torch, transformers}, "created": UTC time,
                       "environment": scpo.software.record(): every installed package, the lock's digest
                       and whether the installed set matches it, the CPU, the numerics pin's state
                       (docs/reproducibility.md)}

Building the record checks the numerics pin (`scpo.numerics.check`): a run started with the pin's name but not under
the whole pin says so in one line on stderr, and its record says what was not in force.

`--resume` compares the saved resolved config with the new one key by key: any difference outside `RESUME_MAY_CHANGE`
(how long to train and how often to save, where files live, evaluation and report settings) is refused, in one line
listing the keys with their saved and new values, unless forced.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from scpo import software
from scpo.config import Config

__all__ = [
    "provenance",
    "identity",
    "resolved_config",
    "git_state",
    "config_differences",
    "RESUME_MAY_CHANGE",
    "PROVENANCE_FILE",
    "write_json_atomic",
    "read_provenance",
]

PROVENANCE_FILE = "provenance.json"

# dotted keys (or section prefixes) a resumed run may change: they do not change what the finished run computes
RESUME_MAY_CHANGE = (
    "profile",  # the name; the values it sets are compared one by one
    "train.iterations",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.save_rollouts_every",
    "train.device",
    "train.torch_threads",
    "train.out_dir",
    "data.root",
    "data.shared_dir",
    "data.alfworld_source",
    "data.alfworld_require_all",
    "data.webshop_source",
    "eval",
    "report",
)
_PATH_KEYS = (("data", "root"), ("data", "shared_dir"), ("train", "out_dir"), ("train", "init_from"))


def resolved_config(cfg: Config) -> dict[str, Any]:
    """Every key of `cfg` as JSON values, with its relative paths (data.root, data.shared_dir, train.out_dir,
    train.init_from) made absolute against the current folder."""
    out = cfg.model_dump(mode="json")
    for section, key in _PATH_KEYS:
        value = out[section].get(key)
        if value:
            out[section][key] = str(Path(value).expanduser().resolve())
    return out


def git_state(start: Path | None = None) -> dict[str, Any]:
    """{"commit": HEAD's sha, "dirty": whether tracked files differ from it} of the checkout holding the scpo package
    (both None outside a git checkout or without git)."""
    root = Path(start) if start else Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(status.strip())}


def _package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def provenance(cfg: Config) -> dict[str, Any]:
    """See the module docstring."""
    import scpo

    origin = cfg.origin
    return {
        "config": resolved_config(cfg),
        "params": origin.get("params"),
        "profile": cfg.profile,
        "overrides": origin.get("overrides", {}),
        "scpo_version": scpo.__version__,
        "git": git_state(),
        "command": list(sys.argv),
        "cwd": os.getcwd(),
        "python": platform.python_version(),
        "packages": {name: _package_version(name) for name in ("torch", "transformers")},
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "environment": software.record(),
    }


def identity(cfg: Config) -> dict[str, Any]:
    """What a run's summary says about its config: profile, policy, the explicit overrides, version and git commit (the
    whole resolved config is in provenance.json)."""
    import scpo

    return {
        "profile": cfg.profile,
        "policy": cfg.policy.profile,
        "overrides": cfg.origin.get("overrides", {}),
        "scpo_version": scpo.__version__,
        "git": git_state(),
    }


def write_json_atomic(path: Path, data: Any) -> None:
    """Write `data` as JSON to `path` through a temporary file renamed into place (never a half-written file); the
    temporary name is unique to the writer (`.<name>.<pid>.<random>.tmp`), so two writers never share one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=2, default=str))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_provenance(folder: Path) -> dict[str, Any] | None:
    """`folder/provenance.json` (a run folder) or the `provenance` entry of `folder/state.json` (a checkpoint), or
    None when neither exists or parses."""
    folder = Path(folder)
    for name, key in ((PROVENANCE_FILE, None), ("state.json", "provenance")):
        try:
            data = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        data = data.get(key) if key else data
        if isinstance(data, dict) and isinstance(data.get("config"), dict):
            return data
    return None


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict) and tree:
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: tree}


def config_differences(
    saved: dict[str, Any],
    current: dict[str, Any],
    may_change: tuple[str, ...] = RESUME_MAY_CHANGE,
    defaults: dict[str, Any] | None = None,
) -> list[tuple[str, Any, Any]]:
    """(dotted key, saved value, current value) for every key whose value differs between two resolved configs,
    leaving out the keys under `may_change` (a key or a section prefix) and the keys the saved config lacks whose
    current value is the default (`defaults`, flat dotted keys; None: `Config()`'s): an option added to the code after
    the run was saved, left as it was."""
    a, b = _flatten(saved), _flatten(current)
    allowed = tuple(may_change)
    added = _default_values() if defaults is None else defaults
    out = []
    for key in sorted(set(a) | set(b)):
        if any(key == m or key.startswith(m + ".") for m in allowed):
            continue
        if key not in a and key in added and b.get(key) == added[key]:
            continue
        if a.get(key, "<absent>") != b.get(key, "<absent>"):
            out.append((key, a.get(key, "<absent>"), b.get(key, "<absent>")))
    return out


@functools.lru_cache(maxsize=1)
def _default_values() -> dict[str, Any]:
    return _flatten(Config().model_dump(mode="json"))
