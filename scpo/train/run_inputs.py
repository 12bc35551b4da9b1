"""What a run reads besides its config, recorded in its provenance (separate keys beside `scpo.train.provenance`'s) so
that `--resume` can tell when it changed underneath the run:

    "task_pool":   {"env", "split", "count", "sha256"[, "panel"]}   sha256 of the sorted task ids, one per line;
                   with `train.panel_size` the pool is the panel RL draws from, "panel": {"size", "seed"}
    "start_model": {"policy": model, "kl_reference": model (only when it is another model than the policy's start)}
        model = {"source": where it was loaded from, "sha256": digest of its files}   a local model folder or file
              | {"source": Hub name, "revision": the cached snapshot's commit}           a Hub model
              | {"source": "<run>/init_model", "built": "in the run folder"}             tiny: part of the run itself

A model folder's digest is sha256 over every file's relative path, size and sha256, in path order, so a retrained
warm start (same path, new weights) gets a new digest. `input_differences` compares a saved record with the current
one and names each difference in a few words; the trainer refuses a resume with any (unless forced).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from scpo.config import Config
from scpo.policy import resolve_model_dir

__all__ = ["task_pool_record", "model_digest", "start_model_record", "input_differences"]

_CHUNK = 1 << 20


def task_pool_record(env: str, split: str, tasks: list[str], panel: tuple[int, int] | None = None) -> dict[str, Any]:
    """{"env", "split", "count", "sha256"} of the task pool a run draws its tasks from; `panel` (size, seed): the
    pool is that task panel of the split (`scpo.train.panel`), recorded as "panel"."""
    digest = hashlib.sha256("\n".join(sorted(tasks)).encode()).hexdigest()
    record: dict[str, Any] = {"env": env, "split": split, "count": len(tasks), "sha256": digest}
    if panel is not None:
        record["panel"] = {"size": panel[0], "seed": panel[1]}
    return record


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def model_digest(path: str | Path) -> str:
    """sha256 of a model file, or of a model folder: every file's relative path, size and sha256, in path order."""
    path = Path(path)
    if path.is_file():
        return _file_digest(path)
    h = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{file.relative_to(path).as_posix()}\0{file.stat().st_size}\0{_file_digest(file)}\n".encode())
    return h.hexdigest()


def _profile_model(cfg: Config, run_dir: Path) -> dict[str, Any]:
    """The record of `policy.profile`'s model (module docstring), without loading or building it."""
    profile = cfg.policy.profile
    if profile == "tiny":
        return {"source": str(Path(run_dir) / "init_model"), "built": "in the run folder"}
    if profile == "smollm2-135m":
        converted = Path(cfg.data.root) / "models" / "smollm2-135m"
        if (converted / "model.safetensors").exists():
            return {"source": str(converted.resolve()), "sha256": model_digest(converted)}
        from scpo.policy.smollm2 import gguf_path

        gguf = Path(gguf_path())
        return {"source": str(gguf), "sha256": model_digest(gguf)}
    local = Path(profile).expanduser()
    if local.exists():
        folder = resolve_model_dir(local)
        return {"source": str(folder.resolve()), "sha256": model_digest(folder)}
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(profile, "config.json")
    revision = Path(cached).parent.name if isinstance(cached, str) else None
    return {"source": profile, "revision": revision}


def start_model_record(cfg: Config, run_dir: Path) -> dict[str, Any]:
    """{"policy": the model RL (or SFT) starts from, "kl_reference": the KL reference when it is another model}."""
    warm = bool(cfg.train.init_from) and cfg.train.rl_start == "warm_start"
    if warm:
        folder = resolve_model_dir(cfg.train.init_from)
        start = {"source": str(folder.resolve()), "sha256": model_digest(folder)}
    else:
        start = _profile_model(cfg, run_dir)
    record = {"policy": start}
    if warm and cfg.train.kl_coef > 0 and cfg.train.kl_reference == "base":
        record["kl_reference"] = _profile_model(cfg, run_dir)
    return record


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "none"


def input_differences(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """One phrase per input that differs between a run's saved provenance and this command's record: the task pool
    (count and digest), each start model (digest or Hub revision). Inputs the saved record lacks (runs started before
    they were recorded) are not compared."""
    out = []
    old_pool, new_pool = saved.get("task_pool"), now.get("task_pool")
    if old_pool and new_pool and old_pool.get("sha256") != new_pool.get("sha256"):
        panel = new_pool.get("panel")
        where = f"split {new_pool['split']!r}" + (f", its panel of {panel['size']}" if panel else "")
        out.append(
            f"the task pool ({new_pool['env']} {where}) is {new_pool['count']} tasks, sha256 "
            f"{_short(new_pool['sha256'])} now, {old_pool['count']} tasks, sha256 {_short(old_pool['sha256'])} in "
            "the run (data.root holds other data)"
        )
    old_models, new_models = saved.get("start_model") or {}, now.get("start_model") or {}
    for role, label in (("policy", "the start model"), ("kl_reference", "the KL reference")):
        old, new = old_models.get(role), new_models.get(role)
        if not old or not new:
            continue
        for key in ("sha256", "revision"):
            if key in old and old.get(key) != new.get(key):
                out.append(
                    f"{label} {new['source']} has {key} {_short(new.get(key))} now, {_short(old.get(key))} when the "
                    f"run started from {old['source']} (retrained or replaced)"
                )
                break
    return out
