"""What a run reads besides its config, decided once when the run is planned (`scpo.run.plan`): the tasks it draws
from, the models it starts from and whether they fit the device; and what its provenance records of them, so that
`--resume` can tell when they changed underneath the run:

    "task_pool":   {"env", "split", "count", "sha256"[, "panel"]}   sha256 of the sorted task ids, one per line;
                   with `train.panel_size` the pool is the panel RL draws from, "panel": {"size", "seed"}
    "data":        {"kind", "count", "sha256"[, "built"]}          the prepared data of those tasks (`data_record`):
                   ALFWorld's game files, the WebShop catalogue, or for a generated env the task ids
    "start_model": {"policy": model, "kl_reference": model (only when it is another model than the policy's start)}
        model = {"source": where it was loaded from, "sha256": digest of its files}   a local model folder or file
              | {"source": Hub name, "revision": the cached snapshot's commit}           a Hub model
              | {"source": "<run>/init_model", "built": "in the run folder"}             tiny: part of the run itself

Where a run starts (`start_models`): the SFT warm start `train.init_from` with `train.rl_start: warm_start`, else
the profile's own model (tiny and a Hub model: built once and saved under `<run>/init_model`, so a resumed run finds
the same one; smollm2-135m: its converted folder; a local folder). The KL reference (`train.kl_reference`): the
weights the run starts from, or the profile's model.

A model folder's digest is sha256 over every file's relative path, size and sha256, in path order, so a retrained
warm start (same path, new weights) gets a new digest. `input_differences` compares a saved record with the current
one and names each difference in a few words; the trainer refuses a resume with any (unless forced).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from scpo.config import Config
from scpo.envs.panel import training_pool
from scpo.envs.registry import EnvSettings
from scpo.errors import DataError, ExpectedError
from scpo.policy import resolve_model_dir
from scpo.policy.profiles import check_model_source

__all__ = [
    "ModelSource",
    "task_list",
    "task_pool",
    "task_pool_record",
    "data_record",
    "model_digest",
    "profile_source",
    "start_models",
    "start_model_record",
    "check_memory",
    "critic_lines",
    "check_machine",
    "input_differences",
]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class ModelSource:
    """Where a model of the run comes from: the folder it loads from (`path`, as given), how that folder is made when
    it is not there yet (`build`: None, it is; "tiny": a tiny model and tokenizer trained on demonstrations; "profile":
    the profile's model saved once; "convert": smollm2-135m converted from its packaged GGUF) and its provenance
    record (module docstring)."""

    path: Path
    build: Literal["tiny", "profile", "convert"] | None = None
    record: dict[str, Any] = field(default_factory=dict, compare=False)


def task_list(env: EnvSettings, split: str) -> list[str]:
    """The task ids of `split`; DataError (one line naming the data folder) when there are none or the data is not
    there."""
    try:
        tasks = env.package.list_tasks(split, data_root=env.data_root)
    except ExpectedError:
        raise
    except (FileNotFoundError, OSError, ValueError) as err:
        raise DataError(
            f"{env.name} data for split {split!r} not found under data.root={env.data_root}: "
            f"{str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}"
        ) from None
    if not tasks:
        raise DataError(
            f"no {env.name} tasks in split {split!r} under data.root={env.data_root}; run "
            f"`scpo prepare-data --only {env.name}`"
        )
    return tasks


def task_pool(cfg: Config, env: EnvSettings, stage: str, split: list[str]) -> tuple[list[str], dict[str, Any]]:
    """-> (the tasks the run draws from, their provenance record): the training split's tasks `split`, or for RL
    with `train.panel_size` its task panel (`scpo.envs.panel`); ConfigError in one line."""
    from scpo.config import ConfigError

    tasks = split
    panel = None
    if stage == "rl" and cfg.train.panel_size is not None:
        panel = (cfg.train.panel_size, cfg.train.panel_seed)
        try:
            tasks = training_pool(env, *panel)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    return tasks, task_pool_record(env.name, env.train_split, tasks, panel)


def task_pool_record(env: str, split: str, tasks: list[str], panel: tuple[int, int] | None = None) -> dict[str, Any]:
    """{"env", "split", "count", "sha256"} of the task pool a run draws its tasks from; `panel` (size, seed): the
    pool is that task panel of the split, recorded as "panel"."""
    digest = hashlib.sha256("\n".join(sorted(tasks)).encode()).hexdigest()
    record: dict[str, Any] = {"env": env, "split": split, "count": len(tasks), "sha256": digest}
    if panel is not None:
        record["panel"] = {"size": panel[0], "seed": panel[1]}
    return record


def data_record(env: EnvSettings, tasks: list[str]) -> dict[str, Any]:
    """What the prepared data of `tasks` was, as a digest: {"kind", "count", "sha256"[, "built"]}.

    alfworld: the game files of the tasks (sha256 over each task id and its game file's sha256, in task order sorted);
    webshop: the catalogue `scpo prepare-data` built (every file of `data/webshop/catalogue/`: name and sha256, and its
    meta.json's build settings as "built"), so an evaluation on a catalogue rebuilt under another profile is told
    apart; an environment without prepared data (corridor, sokoban: generated from the task id): "generated", the
    digest of the task ids themselves."""
    h = hashlib.sha256()
    if env.name == "alfworld":
        for task in sorted(tasks):
            h.update(f"{task}\0{_file_digest(Path(env.package.game_file(task, env.data_root)))}\n".encode())
        return {"kind": "alfworld game files", "count": len(tasks), "sha256": h.hexdigest()}
    if env.name == "webshop":
        from scpo.envs.webshop.catalogue import catalogue_dir

        folder = catalogue_dir(env.data_root)
        files = sorted(p for p in folder.iterdir() if p.is_file())
        for file in files:
            h.update(f"{file.name}\0{_file_digest(file)}\n".encode())
        record: dict[str, Any] = {"kind": "webshop catalogue", "count": len(files), "sha256": h.hexdigest()}
        try:
            meta = json.loads((folder / "meta.json").read_text())
            record["built"] = {
                k: meta[k] for k in ("version", "seed", "source", "goals", "n_products", "n_goals") if k in meta
            }
        except (OSError, ValueError, TypeError):
            pass
        return record
    h.update("\n".join(sorted(tasks)).encode())
    return {"kind": "generated (no prepared data)", "count": len(tasks), "sha256": h.hexdigest()}


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


def _folder_source(path: str | Path) -> ModelSource:
    folder = resolve_model_dir(path)
    return ModelSource(folder, None, {"source": str(folder.resolve()), "sha256": model_digest(folder)})


def profile_source(cfg: Config, run_dir: Path, check: bool = True) -> ModelSource:
    """`policy.profile`'s model (module docstring), without loading or building it; with `check`, first
    ModelNotFoundError (one line) when it cannot be loaded (`scpo.policy.profiles.check_model_source`)."""
    profile = cfg.policy.profile
    models = Path(cfg.data.root) / "models"
    if check:
        check_model_source(profile, models)
    init_model = Path(run_dir) / "init_model"
    if profile == "tiny":
        return ModelSource(init_model, "tiny", {"source": str(init_model), "built": "in the run folder"})
    if profile == "smollm2-135m":
        converted = models / "smollm2-135m"
        if (converted / "model.safetensors").exists():
            return ModelSource(
                converted, "convert", {"source": str(converted.resolve()), "sha256": model_digest(converted)}
            )
        from scpo.policy.smollm2 import gguf_path

        gguf = Path(gguf_path())
        return ModelSource(converted, "convert", {"source": str(gguf), "sha256": model_digest(gguf)})
    local = Path(profile).expanduser()
    if local.exists():
        return _folder_source(local)
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(profile, "config.json")
    revision = Path(cached).parent.name if isinstance(cached, str) else None
    return ModelSource(init_model, "profile", {"source": profile, "revision": revision})


def start_models(cfg: Config, run_dir: Path) -> tuple[ModelSource, ModelSource | None]:
    """(where the policy starts, the KL reference or None without KL) of a run into `run_dir` (module docstring);
    ModelNotFoundError (one line) when one of them is not on this machine or the Hub."""
    warm = bool(cfg.train.init_from) and cfg.train.rl_start == "warm_start"
    kl = cfg.train.kl_coef > 0
    start = _folder_source(cfg.train.init_from) if warm else None
    profile = profile_source(cfg, run_dir) if (not warm or (kl and cfg.train.kl_reference == "base")) else None
    start = start or profile
    if not kl:
        return start, None
    return start, start if cfg.train.kl_reference == "start" else profile


def start_model_record(start: ModelSource, reference: ModelSource | None) -> dict[str, Any]:
    """{"policy": the start's record, "kl_reference": the reference's when it is another model than the start}."""
    record = {"policy": start.record}
    if reference is not None and reference is not start:
        record["kl_reference"] = reference.record
    return record


def _model_config(cfg: Config, start: ModelSource):
    """The transformers config of the model the run trains (tiny: the one `build_tiny_model` makes); None when it is
    not on this machine yet (smollm2-135m before its conversion)."""
    from transformers import AutoConfig, LlamaConfig

    p = cfg.policy
    if start.build == "tiny":
        return LlamaConfig(vocab_size=p.tiny_vocab_size, hidden_size=p.tiny_hidden_size,
                           intermediate_size=4 * p.tiny_hidden_size, num_hidden_layers=p.tiny_layers,
                           num_attention_heads=p.tiny_heads, num_key_value_heads=p.tiny_heads,
                           tie_word_embeddings=True)  # fmt: skip
    if start.build == "convert":
        return AutoConfig.from_pretrained(start.path) if (start.path / "config.json").exists() else None
    if start.build == "profile":
        return AutoConfig.from_pretrained(p.profile)  # a Hub name: its config.json (cached with the model)
    return AutoConfig.from_pretrained(start.path)


def check_machine(cfg: Config, device) -> None:
    """MachineError (one line) when this machine cannot run `cfg` as asked, before anything is loaded or written: the
    generation engine (`scpo.policy.placement.check_engine`), and the gpu profile on a machine where `train.device:
    auto` found no GPU, refused with the run's estimated time (`scpo.policy.run_estimate`, on an H200; a CPU takes
    far longer). An explicit `--set train.device=cpu` is the confirmation that runs it here anyway."""
    from scpo.errors import MachineError
    from scpo.policy.placement import check_engine

    if cfg.profile == "gpu" and device.type != "cuda" and cfg.train.device == "auto":
        raise MachineError(
            f"--profile gpu on a machine with no GPU (torch sees none): {cfg.train.iterations} iterations of "
            f"{cfg.rollout.n_tasks} tasks x {cfg.rollout.group_size} episodes with {cfg.policy.profile}, "
            f"{_gpu_estimate(cfg)}; use --profile cpu or smoke, or run it on this CPU anyway with "
            "--set train.device=cpu --set rollout.engine=transformers"
        )
    check_engine(cfg.rollout.engine, device)


def _gpu_estimate(cfg: Config) -> str:
    """'estimated X on an H200 GPU (Y per iteration), far longer on a CPU', from the model's config when it is on this
    machine (or Qwen2.5-1.5B's, which `scpo.policy.qwen2_shapes` holds)."""
    from scpo.policy.memory_plan import model_shape
    from scpo.policy.run_estimate import H200, duration_text, estimate_run

    config = None
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(cfg.policy.profile, local_files_only=True)
    except (OSError, ValueError):  # not on this machine: the known shape below, or no estimate
        if cfg.policy.profile.lower().endswith("qwen2.5-1.5b-instruct"):
            from scpo.policy.qwen2_shapes import qwen2_config

            config = qwen2_config()
    if config is None:
        return "time estimate unavailable (the model's config is not on this machine)"
    est = estimate_run(cfg, model_shape(config, cfg.policy.lora_r if cfg.policy.lora else None))
    return (
        f"estimated {duration_text(est.run_s)} on an {H200.gpu} ({duration_text(est.iteration_s)} per iteration), "
        "far longer on a CPU"
    )


def check_memory(cfg: Config, start: ModelSource, device, capacity: int | None = None) -> str:
    """The memory plan's line for `cfg` starting from `start` on `device` (`capacity` bytes replace the device's);
    MemoryPlanError (one line) when the estimated peak exceeds the device's memory."""
    from scpo.policy.memory_plan import MemoryPlanError, device_capacity, model_shape, plan_memory

    config = _model_config(cfg, start)
    if config is None:
        return "memory plan: skipped (the model's config is not on this machine yet)"
    found, name = device_capacity(device.type)
    plan = plan_memory(cfg, model_shape(config, cfg.policy.lora_r if cfg.policy.lora else None),
                       capacity or found, name)  # fmt: skip
    if not plan.fits:
        raise MemoryPlanError(
            f"{plan.line()}: over the device's memory; lower train.micro_batch_size, set "
            "train.gradient_checkpointing=true, rollout.vllm_sleep_mode=true or policy.lora=true, or use a larger GPU"
        )
    return plan.line()


def estimate_lines(cfg: Config, start: ModelSource) -> list[str]:
    """What the preflight prints beside the memory plan on a GPU: the time per iteration and per run and the disk per
    run (`scpo.policy.run_estimate.preflight_lines`, estimates under stated throughput assumptions), from the same model
    config as the memory plan, so a run prints the same lines before and after its model is converted."""
    from scpo.policy.memory_plan import model_shape
    from scpo.policy.run_estimate import preflight_lines

    config = _model_config(cfg, start)
    if config is None:
        return ["time and disk estimates: skipped (the model's config is not on this machine yet)"]
    return preflight_lines(cfg, model_shape(config, cfg.policy.lora_r if cfg.policy.lora else None))


def critic_lines(cfg: Config, start: ModelSource) -> list[str]:
    """What the preflight prints about a learned critic (`cfg.trains_critic`: PPO) on any device: its extra memory
    (the memory plan's critic terms) and the work it adds per iteration; [] without one. On a GPU the time estimate
    (`estimate_lines`) carries its seconds as the `critic` part; on the CPU benchmarks/critic_cost.py measures them."""
    from scpo.policy.memory_plan import GIB, model_shape, plan_memory

    if not cfg.trains_critic:
        return []
    config = _model_config(cfg, start)
    if config is None:
        return ["critic: memory estimate skipped (the model's config is not on this machine yet)"]
    plan = plan_memory(cfg, model_shape(config, cfg.policy.lora_r if cfg.policy.lora else None))
    c = cfg.train.critic
    micro = sum(plan.critic_update.values())
    return [
        f"critic (credit.method {cfg.credit.method}): a value model from the start model's weights, "
        f"+{plan.critic_held / GIB:.3g} GiB held (float32 weights, grads, AdamW) and +{micro / GIB:.3g} GiB per "
        f"critic micro-batch; per iteration one forward pass over the batch's prompts, then {c.epochs} epoch(s) of "
        f"minibatches of {c.minibatch_size} steps with a backward pass (CPU cost: benchmarks/critic_cost.py)"
    ]


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "none"


def input_differences(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """One phrase per input that differs between a run's saved provenance and this command's record: the task pool
    (count and digest), the prepared data (digest), each start model (digest or Hub revision). Inputs the saved record
    lacks are not compared."""
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
    old_data, new_data = saved.get("data"), now.get("data")
    if old_data and new_data and old_data.get("sha256") != new_data.get("sha256"):
        out.append(
            f"the prepared data ({new_data['kind']}) has sha256 {_short(new_data['sha256'])} now, "
            f"{_short(old_data['sha256'])} in the run (data.root holds other data: rebuilt or replaced)"
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
