"""Why does the cpu profile's critic not separate the states? Replays the batch streams of `record_batches.py` offline:
a critic as the trainer's (`scpo.train.critic.Critic`, params.yaml's `train.critic`, the run's start model, the same
minibatch seeds) trains on each batch in turn, and before each fit it is measured on that batch:

    features  h_t = the trunk's final normed state at the last prompt token (what the value head reads)
      cos     mean cosine between the h_t of two rows (1: every state the same vector)
      spread  sqrt(trace Cov_t(h)) / sqrt(mean_t |h_t|^2): the across-state part of h's size
      probe   cross-validated R^2 of G_t by a ridge regression on h_t standardised per unit (5 folds, whole
              trajectories held out): what a linear read-out of these features could explain of the returns
    critic    ev  1 - var(G - V) / var(G) (verl's vf_explained_var), V the critic's values before the fit
              v_std the std of V over the batch's rows

`--variant` picks the critic: `trainer` (as the trainer), `pool` (the head reads the mean of the trunk's final states
over the prompt's tokens instead of the last one), `standardised` (the head reads h_t standardised per unit with the
first batch's mean and std); `--trunk-lr-scale 0` freezes the trunk. `ev_exact`: the explained variance of the
exact values 10 V^pi(s_t) of the policy that played the batch (a perfect critic; `record_batches.py`).
experiments/critic/README.md, "Why the cpu profile's critic does not separate the states".

    python experiments/critic/feature_probe.py /tmp/critic_streams --variant trainer --out results/probe_trainer.csv
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import GroupKFold, cross_val_predict
from torch.nn.utils.rnn import pad_sequence

from scpo.config import load_config
from scpo.credit.ppo import explained_variance
from scpo.policy import load_policy
from scpo.policy.critic import prompt_last_hidden
from scpo.policy.tiny import build_tiny_model
from scpo.train.critic import Critic
from scpo.train.seeding import iteration_seed


def mean_pooled_hidden(model, prompt_ids) -> torch.Tensor:
    """[B, H]: the mean of the trunk's final normed states over each prompt's own tokens (right padding, causal)."""
    rows = [torch.as_tensor(list(p)) for p in prompt_ids]
    mask = pad_sequence([torch.ones(len(r)) for r in rows], batch_first=True).unsqueeze(-1)
    out = model.model(input_ids=pad_sequence(rows, batch_first=True)).last_hidden_state
    return (out * mask).sum(1) / mask.sum(1)


class PooledCritic(Critic):
    """The trainer's critic whose head reads the prompt's mean state (`mean_pooled_hidden`)."""

    def _values(self, prompts):
        return self.module["head"](mean_pooled_hidden(self.module["trunk"], prompts).float())

    def features(self, prompts):
        return mean_pooled_hidden(self.module["trunk"], prompts)


class LastTokenCritic(Critic):
    def features(self, prompts):
        return prompt_last_hidden(self.module["trunk"], prompts)


class StandardisedCritic(LastTokenCritic):
    """The trainer's critic whose head reads h_t standardised per unit, (h_t - mu) / sd, with mu and sd of the first
    batch's rows (`calibrate`), fixed from then on."""

    shift: torch.Tensor | None = None
    scale: torch.Tensor | None = None

    def calibrate(self, prompts) -> None:
        with torch.no_grad():
            h = torch.cat([self.features(prompts[i : i + 32]) for i in range(0, len(prompts), 32)])
        self.shift, self.scale = h.mean(0), h.std(0) + 1e-6

    def _values(self, prompts):
        h = prompt_last_hidden(self.module["trunk"], prompts)
        return self.module["head"](((h - self.shift) / self.scale).float())


VARIANTS = {"trainer": LastTokenCritic, "pool": PooledCritic, "standardised": StandardisedCritic}


def feature_stats(h: np.ndarray, returns: np.ndarray, groups: np.ndarray) -> dict[str, float]:
    unit = h / np.linalg.norm(h, axis=1, keepdims=True)
    cos = unit @ unit.T
    n = len(h)
    out = {
        "cos": float((cos.sum() - n) / (n * (n - 1))),
        "spread": float(np.sqrt(h.var(axis=0).sum() / (h**2).sum(axis=1).mean())),
    }
    if returns.var() > 0 and len(np.unique(groups)) >= 5:
        z = (h - h.mean(0)) / (h.std(0) + 1e-12)
        pred = cross_val_predict(
            RidgeCV(alphas=np.logspace(-2, 4, 13)), z, returns, groups=groups, cv=GroupKFold(n_splits=5)
        )
        out["probe"] = float(1 - ((returns - pred) ** 2).sum() / ((returns - returns.mean()) ** 2).sum())
    else:
        out["probe"] = float("nan")
    return out


def load_stream(path: Path) -> dict:
    """A `record_batches.py` stream, its per-row columns as numpy arrays (prompt ids stay lists)."""
    stream = json.loads(path.read_text())
    arrays = ("returns", "old_values", "weights", "traj_id", "group_id", "step", "exact_value")
    stream["batches"] = [{k: np.asarray(v) if k in arrays else v for k, v in b.items()} for b in stream["batches"]]
    return stream


def replay(
    stream: dict, variant: str, cfg_options, trunk: str, trunk_lr_scale: float, batches: int | None
) -> list[dict]:
    seed = stream["seed"]
    policy = load_policy(Path(stream["init_model"]), dtype="float32", device="cpu")
    model = policy.model
    if trunk == "small":  # the trainer_small run's size, fresh, on the same tokenizer
        model = build_tiny_model(policy.tokenizer, hidden_size=32, layers=1, heads=2, seed=seed)
    critic = VARIANTS[variant](model, cfg_options, seed=seed)
    if trunk_lr_scale == 0:
        critic.module["trunk"].requires_grad_(False)
    if isinstance(critic, StandardisedCritic):
        b0 = stream["batches"][0]
        critic.calibrate([b0["prompt_ids"][r] for r in np.flatnonzero(b0["weights"] > 0)])
    if trunk_lr_scale != 1.0:  # the trunk's parameters at lr * scale (0: frozen), the head's at lr
        head = list(critic.module["head"].parameters())
        body = [p for p in critic.module["trunk"].parameters() if p.requires_grad]
        groups = [{"params": head}] + (
            [{"params": body, "lr": cfg_options.lr * trunk_lr_scale}] if trunk_lr_scale else []
        )
        critic.optimizer = torch.optim.AdamW(groups, lr=cfg_options.lr, weight_decay=cfg_options.weight_decay)
    rows_out = []
    for b in stream["batches"][:batches]:
        rows = np.flatnonzero(b["weights"] > 0)
        prompts = [b["prompt_ids"][r] for r in rows]
        g = b["returns"][rows]
        with torch.no_grad():
            h = torch.cat([critic.features(prompts[i : i + 32]) for i in range(0, len(prompts), 32)]).numpy()
        values = critic.values([b["prompt_ids"][r] for r in range(len(b["weights"]))])
        rec = {
            "seed": seed,
            "iteration": b["iteration"],
            "rows": len(rows),
            "mixed": bool(g.std() > 1e-9),
            "g_std": float(g.std()),
            "ev": explained_variance(values[rows], g),
            "v_std": float(values[rows].std()),
            "ev_exact": explained_variance(10.0 * b["exact_value"][rows], g) if "exact_value" in b else float("nan"),
            **feature_stats(h.astype(np.float64), g, b["traj_id"][rows]),
        }
        gen = torch.Generator().manual_seed(iteration_seed(seed, b["iteration"]))
        critic.fit(b["prompt_ids"], b["returns"], values, b["weights"], gen)
        rows_out.append(rec)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in rec.items()}, flush=True)
    return rows_out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("streams", type=Path)
    ap.add_argument("--variant", choices=sorted(VARIANTS), default="trainer")
    ap.add_argument("--set", action="append", default=[], help="a train.critic override, e.g. lr=1e-3")
    ap.add_argument(
        "--trunk",
        choices=["start", "small"],
        default="start",
        help="the run's start model or a fresh hidden-32, 1-layer one",
    )
    ap.add_argument("--trunk-lr-scale", type=float, default=1.0, help="the trunk's lr over the head's (0: frozen)")
    ap.add_argument("--seeds", type=int, nargs="*", default=None)
    ap.add_argument("--batches", type=int, default=None, help="replay only each stream's first N batches")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    overrides = {f"train.critic.{kv.split('=')[0]}": kv.split("=", 1)[1] for kv in args.set}
    options = load_config("params.yaml", profile="cpu", overrides=overrides).train.critic
    records = []
    for path in sorted(args.streams.glob("stream_seed*.json")):
        if args.seeds is not None and int(path.stem.removeprefix("stream_seed")) not in args.seeds:
            continue
        records += replay(load_stream(path), args.variant, options, args.trunk, args.trunk_lr_scale, args.batches)
    frame = pd.DataFrame(records).assign(
        variant=args.variant, trunk=args.trunk, trunk_lr_scale=args.trunk_lr_scale, settings=" ".join(args.set)
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out, index=False)
    mixed = frame[frame["mixed"]]
    print(mixed.groupby("seed")[["ev", "v_std", "cos", "spread", "probe"]].mean().round(4).to_string())


if __name__ == "__main__":
    main()
