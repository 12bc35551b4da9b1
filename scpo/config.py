"""One typed config for the whole project: params.yaml, grouped by stage, validated by pydantic.

    cfg = load_config("params.yaml", profile="smoke", overrides={"credit.scpo.tau": 0.8})

Every default lives here once (each credit method's options beside its function in `scpo/credit/`, each environment's
in its package's options model); params.yaml lists the values the pipeline runs with (tests/project/test_config.py
checks that each agrees with the default here) and the profiles change them.
Environment and credit-method names are checked against their registries (`scpo.envs.registry`, `scpo.credit.registry`).

Resolution order: the stage sections of params.yaml -> the chosen profile's dotted overrides (`profiles:`) -> explicit
overrides (CLI `--set key=value`, Papermill parameters). Everything then goes through the same validation; any unknown
key, wrong type or out-of-range value raises `ConfigError` whose message names the dotted key, the bad value and what is
allowed."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, PrivateAttr, ValidationError, create_model, field_validator, model_validator

from scpo.credit.registry import CreditConfig, check_method, compared_methods, method_spec, methods_and_bounds
from scpo.envs import registry as env_registry
from scpo.errors import ExpectedError
from scpo.strict_model import StrictModel

__all__ = ["Config", "ConfigError", "load_config", "validate_config", "apply_overrides", "parse_overrides", "PROFILES"]

PROFILES = ("smoke", "cpu", "gpu")
PositiveInt = Annotated[int, Field(ge=1)]
Seed = Annotated[int, Field(ge=0, description="a seed (numpy's generators take non-negative ints)")]


class ConfigError(ExpectedError, ValueError):
    """A config problem; the message names the dotted key, the bad value and what is allowed."""


# ----------------------------------------------------------------------------------------------------------- sections
class DataConfig(StrictModel):
    root: str = Field("data", description="where prepared data goes (gitignored, a DVC output)")
    shared_dir: str = Field("../shared/data", description="read-only copies of the public data, if present")
    alfworld_source: Literal["auto", "env", "shared", "download"] = Field(
        "auto", description="auto: $ALFWORLD_DATA, else shared_dir/alfworld/*.tar.gz, else alfworld-download"
    )
    alfworld_require_all: bool = Field(
        True,
        description="true: the official game counts per split are required; false: any non-empty split will do "
        "(small sets such as tests/fixtures)",
    )
    webshop_source: str | None = Field(
        None,
        description="directory with the public WebShop files, or WebShop's own "
        "items_shuffle*.json + items_ins_v2*.json (None: shared_dir/webshop, then the "
        "internet)",
    )
    webshop_n_products: int = Field(
        2000,
        ge=10,
        description="products in the WebShop catalogue (generated, or the first n of WebShop's product file)",
    )
    webshop_n_goals: int | None = Field(
        1000, ge=10, description="goals drawn by weight, as WebShop's limit_goals (None: all)"
    )
    webshop_goals: Literal["synthetic", "human"] = Field(
        "synthetic",
        description="WebShop's goal mode: every option combination's synthetic instruction, or the human instructions",
    )
    seed: Seed = 0


def _trainable_env(name: str) -> str:
    if name not in env_registry.trainable():
        raise ValueError(f"unknown environment {name!r}; registered: {', '.join(env_registry.trainable())}")
    return name


class CreditSection(CreditConfig):
    """params.yaml's `credit:` section: the credit options, with `method` checked against the credit registry."""

    _check_method = field_validator("method")(check_method)


class _EnvCommon(StrictModel):
    name: str = Field("alfworld", description="a trainable environment of scpo.envs.registry")
    history_length: int = Field(2, ge=0, description="past (observation, action) pairs shown in the prompt")

    _check_name = field_validator("name")(_trainable_env)


# env.<name>: one section per trainable environment, its options model from the environment's spec
EnvConfig = create_model(
    "EnvConfig",
    __base__=_EnvCommon,
    **{
        name: (spec.options, spec.options())
        for name, spec in ((n, env_registry.env_spec(n)) for n in env_registry.trainable())
    },
)


class PolicyConfig(StrictModel):
    profile: str = Field("tiny", description="'tiny', 'smollm2-135m', or any Hub name / local path")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32",
        description="compute dtype: generation, evaluation and the frozen reference run in it; the trained "
        "weights stay float32 (optimizer updates of 1e-6 vanish in 16-bit weights) under autocast to this dtype",
    )
    lora: bool = False
    lora_r: int = Field(16, ge=1)
    lora_alpha: int = Field(32, ge=1)
    # tiny profile
    tiny_hidden_size: int = Field(
        64, ge=8, description="tiny: a 2-layer Llama, ~0.2M parameters, word-level BPE tokenizer"
    )
    tiny_layers: int = Field(2, ge=1)
    tiny_heads: int = Field(4, ge=1)
    tiny_vocab_size: int = Field(2048, ge=64)
    max_prompt_tokens: int = Field(
        1024,
        ge=16,
        description="the prompt budget of environments not listed in "
        "max_prompt_tokens_by_env (tiny tokens: ALFWorld prompts ~300, max ~800; WebShop "
        "~630, max ~950)",
    )
    max_prompt_tokens_by_env: dict[str, Annotated[int, Field(ge=16)]] = Field(
        default_factory=dict,
        description="the prompt budget per environment (verl-agent's GiGPO scripts: ALFWorld "
        "2048, WebShop 4096); the config resolves it into max_prompt_tokens for env.name",
    )
    prompt_overflow: Literal["truncate_left", "error"] = Field(
        "truncate_left",
        description="a prompt over the budget: keep its last tokens, or stop with an error naming its "
        "length (verl's data.truncation='error', the reference scripts' setting)",
    )
    max_new_tokens: int = Field(
        32, ge=1, description="tiny answers are action-only: <action>go to desk 1</action> is 6 tokens, a search ~15"
    )

    @field_validator("max_prompt_tokens_by_env", mode="after")
    @classmethod
    def _known_envs(cls, value: dict) -> dict:
        return {_trainable_env(k): v for k, v in value.items()}


class DynamicSamplingConfig(StrictModel):
    """Dynamic sampling (DAPO's, verl-agent's `algorithm.filter_groups`; docs/algorithms.md, "Dynamic sampling"):
    `scpo.train.dynamic_sampling.dynamic_sample`."""

    enable: bool = Field(
        False,
        description="drop groups whose episode returns are all equal and roll out fresh groups until n_tasks groups "
        "are kept, for every estimator",
    )
    max_tries: int = Field(
        10, ge=1, description="rollout tries per iteration, the last one unfiltered (verl-agent's max_num_gen_batches)"
    )


class RolloutConfig(StrictModel):
    engine: Literal["transformers", "vllm"] = "transformers"
    n_tasks: int = Field(4, ge=1, description="tasks (groups) per iteration")
    group_size: int = Field(
        8, ge=2, description="N rollouts per task, same seed (group credit compares them: one alone gets 0 advantage)"
    )
    temperature: float = Field(
        1.0,
        gt=0,
        description="sampling temperature of the RL rollouts (0, greedy, would make a group's rollouts identical: "
        "nothing to compare, as with group_size 1)",
    )
    top_p: float = Field(1.0, gt=0, le=1)
    batch_size: int = Field(64, ge=1, description="prompts per generate call")
    vllm_gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="vLLM's share of the GPU's memory; None: from the memory plan (its weights + the KV cache of one "
        "iteration's sequences + a fixed reserve, scpo.policy.memory_plan)",
    )
    vllm_sleep_mode: bool = Field(
        False,
        description="vLLM's sleep mode (TRL's enable_sleep_mode): vLLM frees its weights and KV cache during each "
        "update and gets them back with the weight sync",
    )
    vllm_enforce_eager: bool = Field(
        False,
        description="vLLM without CUDA graphs / torch.compile: starts in seconds, "
        "decodes slower (debugging, short runs)",
    )
    vllm_model_runner: Literal["v1", "default"] = Field(
        "v1",
        description="v1: vLLM's V1 GPU model runner (VLLM_USE_V2_MODEL_RUNNER=0), the one whose weight sync a "
        "GPU check has to verify first; default: whichever vLLM picks (V2 for most dense models from vLLM 0.24)",
    )
    vllm_sync_path: Literal["auto", "load_weights", "reload_weights"] = Field(
        "auto",
        description="how trainer weights enter vLLM: the model's load_weights (TRL's colocate path), the "
        "worker's reload_weights (re-runs post-load processing), or auto: reload_weights only where vLLM repacked "
        "its weights at load (the CPU backend), else load_weights",
    )
    action_choice: Literal["generate", "admissible"] = Field(
        "admissible",
        description="generate: free-text answers (the papers' setting); admissible: transformers engine "
        "draws the answer among the admissible commands by the model's likelihood (for tiny CPU policies)",
    )
    dynamic_sampling: DynamicSamplingConfig = DynamicSamplingConfig()


class SFTConfig(StrictModel):
    n_demos: int = Field(1000, ge=1, description="expert demonstrations for the warm start (limits how good it gets)")
    epochs: int = Field(4, ge=1)
    lr: float = Field(2e-3, gt=0)
    batch_size: int = Field(8, ge=1)


class CriticConfig(StrictModel):
    """The learned critic a method that reads its values trains beside the policy (PPO: `scpo.train.critic`): a copy
    of the start model's trunk with a value head, its own optimizer and its clipped value loss. Defaults: the tiny
    policy's (experiments/critic); the gpu profile sets verl-agent's PPO recipe (docs/gpu.md)."""

    lr: float = Field(2e-3, gt=0, description="AdamW learning rate of the critic (verl-agent's recipe: 1e-5)")
    cliprange_value: float = Field(
        0.5, gt=0, description="c of the clipped value loss: V held within c of the values the returns came from (verl)"
    )
    epochs: int = Field(3, ge=1, description="passes of the critic over each batch (verl: the actor's ppo_epochs)")
    minibatch_size: int = Field(32, ge=1, description="steps per critic optimizer step")
    micro_batch_size: int | None = Field(
        None, ge=1, description="steps per critic forward / backward pass (None: the whole minibatch)"
    )
    head_hidden: int = Field(
        64, ge=0, description="the value head's tanh hidden layer (0: one linear layer, as verl's critic)"
    )
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay of the critic (verl's default 0.01)")
    max_grad_norm: float | None = Field(
        None, gt=0, description="the critic's gradient norm clip (verl's critic.grad_clip 1.0); None: no clipping"
    )


class TrainConfig(StrictModel):
    seed: Seed = 0
    iterations: int = Field(6, ge=0, description="RL iterations (0: the run's model/ is the model RL starts from)")
    lr: float = Field(
        1e-3,
        gt=0,
        description="learning rate of the RL updates (the tiny policy's; the gpu profile sets 1e-6 for 1.5B+ models)",
    )
    clip_ratio: float = Field(0.2, gt=0, lt=1)
    kl_coef: float = Field(0.01, ge=0, description="low-variance KL to the reference policy")
    entropy_coef: float = Field(0.001, ge=0)
    ppo_epochs: int = Field(1, ge=1)
    minibatch_size: int = Field(
        64, ge=1, description="steps per optimizer step (environments not listed in minibatch_size_by_env)"
    )
    minibatch_size_by_env: dict[str, PositiveInt] = Field(
        default_factory=dict,
        description="steps per optimizer step per environment (verl-agent's GiGPO scripts: "
        "ALFWorld 256, WebShop 64); the config resolves it into minibatch_size for env.name",
    )
    minibatch_order: Literal["length_buckets", "collected"] = Field(
        "length_buckets",
        description="length_buckets: shuffled minibatches of similar-length steps (less padding); "
        "collected: consecutive steps in the order they were collected (verl's split of the batch, one GPU)",
    )
    micro_batch_size: int | None = Field(
        None,
        ge=1,
        description="steps per forward / backward pass; the minibatch's "
        "gradient is accumulated over them (None: the whole minibatch at once)",
    )
    sequence_layout: Literal["padded", "packed"] = Field(
        "padded",
        description="how the update's forward passes lay out generated answers: padded (a row per step, left-padded "
        "prompts and right-padded answers) or packed (a micro-batch's steps in one row with no padding, position ids "
        "restarting per step: scpo.policy.packed; the same log-probs)",
    )
    max_grad_norm: float = Field(1.0, gt=0)
    gradient_checkpointing: bool = Field(
        False,
        description="recompute each decoder layer's activations in the backward pass instead of keeping them "
        "(transformers' gradient checkpointing; verl-agent: enable_gradient_checkpointing=True)",
    )
    rollout_correction: Literal["none", "tis"] = Field(
        "none",
        description="none: the PPO ratio against the trainer's own recomputed old log-probs (verl-agent's GiGPO "
        "recipe); tis: each token's policy-gradient loss also weighted by min(exp(old - sampler log-prob), cap), "
        "the sampler's log-probs from vLLM (docs/algorithms.md)",
    )
    rollout_correction_cap: float = Field(2.0, gt=0, description="the truncation C of the tis weight")
    dual_clip_c: float | None = Field(
        None,
        gt=1,
        description="dual-clip PPO bound: a negative-advantage token's loss "
        "is at most -c A (verl's clip_ratio_c = 3); None: plain clipping",
    )
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay of the RL updates (verl's default 0.01)")
    skip_zero_advantage: bool = Field(
        True,
        description="leave steps with advantage exactly 0 (e.g. every step of a group "
        "whose rollouts all got the same reward) out of the update",
    )
    old_logprobs: Literal["sampler", "recompute"] = Field(
        "sampler",
        description="the PPO ratio's old log-prob of an admissible-choice step: the sampler's own log pi(k | x) of the "
        "answer it drew (the batch's choice_logprob: the same function and weights, no second pass), or recomputed "
        "before the update; freely generated answers are always recomputed",
    )
    ratio_over: Literal["admissible", "tokens"] = Field(
        "admissible",
        description="steps whose answer was chosen among admissible commands: ratio, KL and entropy over "
        "that choice (the sampling distribution) or over the answer's tokens",
    )
    panel_size: int | None = Field(
        None,
        ge=1,
        description="RL draws its tasks from a fixed panel of this many training tasks, stratified over task types "
        "(scpo.envs.panel); None: from the whole training split",
    )
    panel_seed: int = Field(0, description="which tasks make the panel (train.panel_size)")
    checkpoint_every: int = Field(5, ge=1)
    keep_checkpoints: int | None = Field(
        3, ge=1, description="keep the newest k checkpoints of a run (None: all); the run's final model/ is always kept"
    )
    out_dir: str = "runs"
    init_from: str | None = Field(None, description="RL start: an SFT run dir or model dir (None: fresh profile model)")
    rl_start: Literal["warm_start", "base"] = Field(
        "warm_start",
        description="warm_start: RL starts from train.init_from (the pipeline passes the SFT warm start); "
        "base: from the profile's model itself, init_from unused and the SFT stage skipped (verl-agent: the raw "
        "Instruct model)",
    )
    kl_reference: Literal["start", "base"] = Field(
        "start", description="the KL reference: the weights RL starts from, or the profile's base model"
    )
    save_rollouts_every: int = Field(
        1, ge=0, description="write rollouts/iter_XXXX.parquet every k iterations (0: never)"
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="where the policy trains and generates: auto = cuda when torch sees a GPU, else cpu"
    )
    torch_threads: int | None = Field(
        1,
        ge=1,
        description="torch CPU threads (None: torch's default); 1 is fastest for the tiny model on a shared machine",
    )
    sft: SFTConfig = SFTConfig()
    critic: CriticConfig = Field(
        CriticConfig(), description="the learned critic, trained when credit.method reads its values (ppo)"
    )

    @field_validator("minibatch_size_by_env", mode="after")
    @classmethod
    def _known_envs(cls, value: dict) -> dict:
        return {_trainable_env(k): v for k, v in value.items()}


class EvalConfig(StrictModel):
    temperature: float = Field(0.4, ge=0)
    n_episodes: int | None = Field(
        40, ge=1, description="games per split (None: all); the splits: env.<name>.eval_splits"
    )
    episodes_per_task: int = Field(
        1,
        ge=1,
        description="independent episodes per game at `temperature` (repeats shrink "
        "the sampling noise of the success rate; 1 = one episode per game)",
    )


class ReportConfig(StrictModel):
    methods: tuple[str, ...] = Field(
        default_factory=compared_methods,
        description="the estimators the pipeline trains and compares (default: every registered one that is not a "
        "bound; scpo.credit.registry)",
    )
    envs: tuple[str, ...] = ("alfworld", "webshop")
    seeds: tuple[Seed, ...] = (0, 1, 2)
    parallel_runs: Annotated[int, Field(ge=1)] | Literal["per_gpu"] = Field(
        3,
        description="seeds a DVC train / evaluate stage runs side by side, one process "
        "each with train.torch_threads threads (scpo.train.seed_pool); 1: one after another; per_gpu: one per "
        "visible GPU, each on its own (on a GPU machine a number above the visible GPUs is refused)",
    )
    workers: int = Field(
        2, ge=1, description="processes counting the semantic-inconsistency stage's saved iterations side by side"
    )
    similarity_thresh: float = Field(
        0.9,
        gt=0,
        le=1,
        description="semantic variant of the inconsistency metric: `action -> next observation` texts scoring >= this",
    )
    similarity_scorer: Literal["lexical", "bi_encoder", "cross_encoder"] = Field(
        "bi_encoder", description="scorer of the semantic variant (scpo.scorers); exact same-step pairs need none"
    )
    scpo_match_scorers: tuple[Literal["lexical", "bi_encoder", "cross_encoder"], ...] = Field(
        ("lexical", "bi_encoder"), description="scorers whose SCPO matches are checked for pairing different actions"
    )
    hard_task_types: tuple[str, ...] = Field(
        ("pick_two", "heat", "cool", "clean"), description="substrings of the task types reported as hard multi-step"
    )
    credit_map_method: str = Field("scpo", description="credit maps draw the saved rollouts of this method's run")
    credit_map_seed: Seed = Field(0, description="... and of this seed")

    @field_validator("methods", "envs", mode="after")
    @classmethod
    def _registered(cls, names: tuple[str, ...], info) -> tuple[str, ...]:
        check = check_method if info.field_name == "methods" else _trainable_env
        return tuple(check(n) for n in names)

    _check_credit_map_method = field_validator("credit_map_method")(check_method)


class FidelityConfig(StrictModel):
    """Credit fidelity against the planner's oracle progress (ALFWorld, notebook 07 / `scpo fidelity`)."""

    split: Literal["train", "valid_seen", "valid_unseen", "valid_train"] = "valid_unseen"
    n_tasks: int | None = Field(None, ge=1, description="first N games of the split (None: all)")
    seeds: tuple[Seed, ...] = Field((0, 1, 2), min_length=1, description="task seeds: one group per task and seed")
    eps: tuple[float, ...] = Field(
        (0.2, 0.4, 0.6), min_length=1, description="noise levels of the noisy-optimal policy"
    )
    group_size: int = Field(8, ge=2)
    max_steps: int = Field(
        15,
        ge=1,
        description="episode limit of the noisy-optimal rollouts (15, the cpu profile's: "
        "at 50 nearly every episode wins and mixed groups vanish)",
    )
    methods: tuple[str, ...] = Field(
        default_factory=methods_and_bounds,
        description="estimators scored (default: every registered one whose needs saved rollouts meet, the bounds "
        "among them)",
    )
    hindsight_policy: str | None = Field(
        None,
        description="policy whose hindsight scores HCAPO uses (None: the warm "
        "start <train.out_dir>/alfworld/sft/seed<train.seed>)",
    )
    workers: int = Field(2, ge=1, description="processes scoring HCAPO's hindsight log-probs (the stage's main cost)")
    sweep_tau: tuple[float, ...] = Field((0.7, 0.8, 0.9, 1.0), description="SCPO defaults sweep: tau values")
    sweep_step_text: tuple[Literal["action_next_obs", "action", "obs_action"], ...] = ("action_next_obs", "action")
    sweep_scorer: tuple[Literal["lexical", "bi_encoder", "cross_encoder"], ...] = Field(
        ("lexical",),
        description="scorers swept (bi_encoder: no better than lexical at tau 0.9 and far slower on the "
        "CPU; add it here to re-check)",
    )
    sweep_match: tuple[Literal["argmax", "first"], ...] = ("argmax", "first")

    @field_validator("eps")
    @classmethod
    def _eps_in_unit_interval(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if any(not 0.0 <= e <= 1.0 for e in v):
            raise ValueError(f"every eps must be in [0, 1], got {list(v)}")
        return v

    @field_validator("methods", mode="after")
    @classmethod
    def _registered(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_method(n) for n in names)


DYNAMIC_SAMPLING_SUFFIX = "+ds"  # the learning benchmark's label of a method run with dynamic sampling: <method>+ds

# the settings that pair a learning benchmark's runs (scpo.testbeds.learning.pairing_settings sets exactly these): no
# variant may change them
LEARNING_RUN_SETTINGS = (
    "env.name",
    "train.seed",
    "train.iterations",
    "train.panel_size",
    "train.panel_seed",
    "rollout.n_tasks",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.save_rollouts_every",
    "train.init_from",
    "train.rl_start",
)


def _check_variant(label: str, overrides: Mapping[str, Any], methods: tuple[str, ...]) -> None:
    """A learning.variants entry: a new label (not a method, not <method>+ds) whose overrides name a registered
    credit.method and leave the benchmark's pairing settings alone."""
    where = f"learning.variants[{label!r}]"
    if label in methods or label.endswith(DYNAMIC_SAMPLING_SUFFIX) or not label or "/" in label:
        raise ValueError(f"{where}: the label must be new (not a method of learning.methods, not <method>+ds, no '/')")
    if "credit.method" not in overrides:
        raise ValueError(f"{where} names no credit.method (the estimator its runs train with)")
    check_method(overrides["credit.method"])
    fixed = sorted(set(overrides) & set(LEARNING_RUN_SETTINGS))
    if fixed:
        raise ValueError(f"{where} overrides {fixed}, which the benchmark sets the same for every run (pairing)")


class LearningConfig(StrictModel):
    """The learning benchmark (notebook 08, `scpo.testbeds.learning`): how fast each estimator makes the agent learn
    on a fixed task panel, with paired seeds (every method sees the same task draws and evaluation episodes)."""

    envs: tuple[str, ...] = Field(("alfworld",), min_length=1)
    methods: tuple[str, ...] = Field(
        default_factory=methods_and_bounds,
        min_length=1,
        description="estimators compared, the bounds among them (default: every registered one whose needs saved "
        "rollouts meet: the oracle's ground-truth credit on environments with a planner, shuffled credit)",
    )
    reference_methods: tuple[str, ...] = Field(
        ("grpo", "gigpo"), min_length=1, description="every method's AULC difference from each of these"
    )
    dynamic_sampling: tuple[str, ...] = Field(
        (),
        description="methods also run with dynamic sampling (rollout.dynamic_sampling.enable), labelled <method>+ds",
    )
    variants: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="more runs, each a label and the dotted overrides its runs get, credit.method among them: e.g. "
        "{'oracle+outcome': {'credit.method': 'oracle', 'credit.oracle.episode_weight': 1.0}}; the settings that make "
        "the runs paired (seed, panel, iterations, warm start) are the benchmark's and cannot be overridden",
    )
    seeds: tuple[int, ...] = Field((0, 1, 2, 3, 4), min_length=2, description="paired seeds (train.seed of the runs)")
    iterations: int = Field(10, ge=1, description="RL iterations of every run")
    eval_every: int = Field(2, ge=1, description="the panel is evaluated every k iterations (and at 0 and the end)")
    n_tasks: int = Field(4, ge=1, description="panel tasks drawn per iteration (rollout.n_tasks of the runs)")
    panel_size: int = Field(12, ge=1, description="training tasks in the panel, stratified over task types")
    panel_seed: int = Field(0, description="which tasks make the panel")
    eval_episodes_per_task: int = Field(4, ge=1, description="episodes per panel task in each evaluation")
    unseen_split: dict[str, str] = Field(
        default_factory=lambda: {"alfworld": "valid_unseen", "webshop": "test"},
        description="per environment, the split the final policy is evaluated on (whether it generalises)",
    )
    unseen_n_tasks: int | None = Field(None, ge=1, description="tasks of the unseen split (None: all)")
    threshold: float = Field(0.5, gt=0, le=1, description="panel success whose first reach is reported")
    fidelity_runs_iteration: int = Field(
        -1, description="which saved iteration of the runs the fidelity-on-own-rollouts check reads (-1: the last)"
    )
    permutations: int = Field(
        100_000,
        ge=1000,
        description="sign patterns (2^seeds) and method pairings (k!) enumerated exactly up to this many; beyond it "
        "this many are drawn (the sign-flip and rank-correlation p of scpo.analysis.learning_stats)",
    )
    parallel_runs: int = Field(2, ge=1, description="runs trained side by side")
    out_dir: str = Field("runs/learning", description="the runs: <out_dir>/<env>/<method>/seed<k>")

    _check_methods = field_validator("methods", "reference_methods", "dynamic_sampling", mode="after")(
        lambda names: tuple(check_method(n) for n in names)
    )
    _check_envs = field_validator("envs", mode="after")(lambda names: tuple(_trainable_env(n) for n in names))

    @model_validator(mode="after")
    def _references_are_compared(self):
        missing = [m for m in self.reference_methods if m not in self.methods]
        if missing:
            raise ValueError(f"learning.reference_methods {missing} are not in learning.methods {list(self.methods)}")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"learning.seeds {list(self.seeds)} names a seed twice")
        for label, overrides in self.variants.items():
            _check_variant(label, overrides, self.methods)
        return self


SOKOBAN_STARTS = ("random", "imitation")  # the Sokoban benchmark's starting policies (scpo.testbeds.sokoban_benchmark)


class SokobanConfig(StrictModel):
    """The Sokoban learning benchmark (notebook 09, `scpo.testbeds.sokoban_benchmark`; experiments/sokoban_learning):
    a small MLP policy trained by each estimator on a panel of 6x6 one-box rooms, its sampled success computed exactly
    by dynamic programming, paired seeds; gradient fidelity of every estimator on the same policy. These defaults are
    the full study (the experiment's committed results); the cpu profile sizes it for `make repro`."""

    seeds: tuple[Seed, ...] = Field(
        tuple(range(20)), min_length=2, description="paired seeds: every estimator starts from the same weights"
    )
    starts: tuple[Literal["random", "imitation"], ...] = Field(
        SOKOBAN_STARTS,
        min_length=1,
        description="random: the MLP's initialisation; imitation: then behaviour cloning on expert plans",
    )
    methods: tuple[str, ...] = Field(
        (
            *("exact_advantage", "oracle", "grpo", "gigpo", "scpo", "rloo", "shuffled", "mc_advantage"),
            *("progpo_c", "progpo_r", "g2po", "hgpo", "graphgpo", "ppo"),
        ),
        min_length=2,
        description="estimators trained: every registered one but HCAPO (it needs a language model's hindsight "
        "scores); PPO with a learned critic",
    )
    reference_methods: tuple[str, ...] = Field(
        ("grpo", "exact_advantage"), min_length=1, description="every estimator's AULC difference from each of these"
    )
    cold_iterations: PositiveInt = Field(200, description="RL iterations from the random start")
    warm_iterations: PositiveInt = Field(120, description="RL iterations from the imitation start")
    cold_lr: float = Field(3e-3, gt=0, description="Adam lr from the random start")
    warm_lr: float = Field(1e-3, gt=0, description="Adam lr (a fresh Adam) from the imitation start")
    eval_every: PositiveInt = Field(10, description="exact panel success every k iterations (and at 0, the end)")
    fidelity_batches: PositiveInt = Field(64, description="batches of seed 0's policy scored per start")
    panel_size: PositiveInt = Field(16, description="train rooms in the panel")
    panel_seed: Seed = Field(0, description="which rooms make the panel")
    min_v_star: float = Field(4, ge=0, description="panel rooms need an optimal plan of at least this many moves")
    n_tasks: PositiveInt = Field(2, description="panel rooms drawn per iteration")
    group_size: int = Field(8, ge=2, description="episodes per drawn room (temperature 1)")
    demo_rooms: PositiveInt = Field(300, description="train rooms outside the panel whose expert plans are imitated")
    imitation_epochs: PositiveInt = Field(110, description="full-batch Adam steps of behaviour cloning (lr 1e-3)")
    hidden: PositiveInt = Field(64, description="the MLP's hidden width (252-h-h-4, tanh)")
    critic_lr_ratio: float = Field(10.0, gt=0, description="PPO critic's Adam lr / the policy's (verl-agent's 10x)")
    critic_epochs: PositiveInt = Field(1, description="PPO critic's Adam steps per iteration")
    permutations: int = Field(100_000, ge=1000, description="sign patterns enumerated exactly up to this many")
    workers: PositiveInt = Field(2, description="processes running learning runs side by side")
    out_dir: str = Field("runs/sokoban", description="one CSV per (start, seed, estimator), kept and not repeated")

    _check_methods = field_validator("methods", "reference_methods", mode="after")(
        lambda names: tuple(check_method(n) for n in names)
    )

    @model_validator(mode="after")
    def _references_are_trained(self):
        missing = [m for m in self.reference_methods if m not in self.methods]
        if missing:
            raise ValueError(f"sokoban.reference_methods {missing} are not in sokoban.methods {list(self.methods)}")
        if "hcapo" in self.methods:
            raise ValueError("sokoban.methods: hcapo needs a language model's hindsight scores, which the MLP lacks")
        for name, values in (("seeds", self.seeds), ("starts", self.starts), ("methods", self.methods)):
            if len(set(values)) != len(values):
                raise ValueError(f"sokoban.{name} {list(values)} names one twice")
        return self


class Config(StrictModel):
    profile: Literal["smoke", "cpu", "gpu"] = "cpu"
    data: DataConfig = DataConfig()
    env: EnvConfig = EnvConfig()  # type: ignore[valid-type]
    policy: PolicyConfig = PolicyConfig()
    rollout: RolloutConfig = RolloutConfig()
    credit: CreditSection = CreditSection()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()
    report: ReportConfig = ReportConfig()
    fidelity: FidelityConfig = FidelityConfig()
    learning: LearningConfig = LearningConfig()
    sokoban: SokobanConfig = SokobanConfig()
    _origin: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def trains_critic(self) -> bool:
        """Whether a run of this config trains a learned critic: its credit method reads the critic's values (the
        method's spec: `MethodSpec.critic`; PPO)."""
        return method_spec(self.credit.method).critic

    @property
    def origin(self) -> dict[str, Any]:
        """Where this config came from: {"params": file, "profile": name, "overrides": {dotted key: value}} (the
        explicit overrides: CLI --set and options, notebook parameters); empty for a config built by hand."""
        return copy.deepcopy(self._origin)

    @model_validator(mode="after")
    def _resolve_per_env(self) -> Config:
        """`*_by_env[env.name]` replaces the plain key (as credit.norm.scale_by_env does for the credit scale)."""
        name = self.env.name
        if name in self.policy.max_prompt_tokens_by_env:
            self.policy.max_prompt_tokens = self.policy.max_prompt_tokens_by_env[name]
        if name in self.train.minibatch_size_by_env:
            self.train.minibatch_size = self.train.minibatch_size_by_env[name]
        return self

    @model_validator(mode="after")
    def _check_combinations(self) -> Config:
        if self.rollout.engine == "vllm" and self.policy.profile == "tiny":
            raise ValueError("rollout.engine='vllm' needs a Hub/local model, not policy.profile='tiny'")
        if self.rollout.engine == "vllm" and self.rollout.action_choice != "generate":
            raise ValueError("rollout.action_choice='admissible' is a transformers-engine option; vLLM generates")
        if self.train.rollout_correction != "none" and self.rollout.engine != "vllm":
            raise ValueError(
                f"train.rollout_correction={self.train.rollout_correction!r} weights by the sampler's log-probs, "
                "which only rollout.engine='vllm' gives"
            )
        if self.credit.hcapo.clip_low > self.credit.hcapo.clip_high:
            raise ValueError("credit.hcapo.clip_low must be <= credit.hcapo.clip_high")
        if method_spec(self.credit.method).oracle and env_registry.env_spec(self.env.name).oracle_progress is None:
            planners = [n for n in env_registry.trainable() if env_registry.env_spec(n).oracle_progress]
            raise ValueError(
                f"credit.method={self.credit.method!r} reads the planner's oracle progress, which env.name="
                f"{self.env.name!r} does not provide (environments with a planner: {', '.join(planners)})"
            )
        return self


# -------------------------------------------------------------------------------------------------------- loading
def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """['a.b=1', 'c=[1,2]'] -> {'a.b': 1, 'c': [1, 2]} (values parsed as YAML, the grammar of params.yaml and of
    `dvc exp run -S`; OmegaConf's dotlist grammar differs: `1e-3` is a float there, a string in YAML 1.1, and `${...}`
    an interpolation)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not of the form dotted.key=value")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ConfigError(
                f"override {item!r}: the value {value!r} is not valid YAML ({_yaml_problem(err, 'column')}); "
                "quote a string, e.g. key='text'"
            ) from None
    return out


def _yaml_problem(err: yaml.YAMLError, where: str = "line") -> str:
    """'line L, column C: <problem>' (1-based) of a YAML parse error; `where="column"` gives the column only (a
    one-line value)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).strip().splitlines()[0]
    if mark is None:
        return problem
    at = f"column {mark.column + 1}" if where == "column" else f"line {mark.line + 1}, column {mark.column + 1}"
    return f"{at}: {problem}"


def _read_params(path: Path) -> dict[str, Any]:
    """The params file as a mapping; ConfigError naming the file (and the line of a YAML syntax error)."""
    if not path.exists():
        raise ConfigError(f"no config file at {path.resolve()}")
    if path.is_dir():
        raise ConfigError(f"--params {path} is a folder; give a params file such as {path / 'params.yaml'}")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read the config file {path}: {getattr(err, 'strerror', None) or err}") from None
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: YAML syntax error at {_yaml_problem(err)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(raw).__name__}")
    return raw


def apply_overrides(raw: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return a copy of `raw` with each dotted key set (intermediate mappings are created)."""
    out = copy.deepcopy(dict(raw))
    for dotted, value in (overrides or {}).items():
        node = out
        parts = dotted.split(".")
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(f"cannot set {dotted!r}: {'.'.join(parts[: i + 1])!r} is a value, not a section")
            node = nxt
        node[parts[-1]] = value
    return out


def _allowed_at(loc: tuple) -> str:
    """The keys the model accepts at `loc`'s parent, for the error message."""
    model: Any = Config
    for part in loc[:-1]:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return ""
        model = field.annotation
    fields = getattr(model, "model_fields", None)
    return ", ".join(fields) if fields else ""


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(str(p) for p in e["loc"])
        key = ".".join(loc) or "<root>"
        if e["type"] == "extra_forbidden":
            lines.append(f"{source}: unknown key {key!r} (value {e['input']!r}); allowed here: {_allowed_at(loc)}")
        elif not loc:  # a check across sections (`Config._check_combinations`): its message names the keys
            lines.append(f"{source}: {e['msg'].removeprefix('Value error, ')}")
        else:
            lines.append(f"{source}: {key} = {e.get('input')!r} is invalid: {e['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


def validate_config(raw: Mapping[str, Any], source: str = "config", origin: Mapping[str, Any] | None = None) -> Config:
    """`raw` validated into a Config (ConfigError naming each bad key); `origin` becomes its `Config.origin`."""
    try:
        cfg = Config.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None
    cfg._origin = copy.deepcopy(dict(origin or {}))
    return cfg


def load_config(
    path: str | Path | None = "params.yaml", profile: str | None = None, overrides: Mapping[str, Any] | None = None
) -> Config:
    """Load params.yaml (or defaults when path is None), apply the profile, then `overrides`, and validate."""
    raw: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        path = Path(path)
        raw = _read_params(path)
        source = str(path)
    profiles = raw.pop("profiles", {}) or {}
    chosen = profile or raw.get("profile", "cpu")
    if chosen not in PROFILES:
        raise ConfigError(f"{source}: profile = {chosen!r} is invalid; allowed: {', '.join(PROFILES)}")
    unknown_profiles = set(profiles) - set(PROFILES)
    if unknown_profiles:
        raise ConfigError(
            f"{source}: unknown key 'profiles.{sorted(unknown_profiles)[0]}'; allowed: {', '.join(PROFILES)}"
        )
    raw["profile"] = chosen
    raw = apply_overrides(raw, profiles.get(chosen) or {})
    raw = apply_overrides(raw, overrides)
    return validate_config(
        raw,
        source,
        origin={
            "params": str(Path(path).resolve()) if path is not None else None,
            "profile": chosen,
            "overrides": dict(overrides or {}),
        },
    )
