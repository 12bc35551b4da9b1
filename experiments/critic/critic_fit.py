"""Does the critic learn? PPO's critic for the tiny policy, fitted by the clipped value loss on the corridor's
rollouts, iteration after iteration; its value loss and explained variance on each fresh batch, measured before the
critic has seen that batch (CPU, no trainer: experiments/critic/README.md).

Per seed: a freshly initialised tiny policy (its tokenizer trained on the corridor's expert prompts), frozen: it only
plays. The critic: a copy of the policy's trunk (verl-agent's recipe: a critic model from the same base) with a
`ValueHead` at each prompt's last token, both trained (`--trunk frozen`: the policy's own trunk, the head alone).
Per iteration: `tasks` tasks drawn from the corridor's `train` split, `group_size` episodes each (the
admissible-choice sampler at temperature 1); V(s_t) from the critic, the returns G_t by GAE from those values
(`scpo.credit.ppo.gae_advantages`, gamma and lambda as given, the invalid penalty a reward); the metrics on the fresh
batch; then `epochs` passes of Adam on the clipped value loss (`scpo.policy.critic.clipped_value_loss`, weighted by
the answers' token counts: verl's token-mean) in minibatches.

    python experiments/critic/critic_fit.py --quick                       # 2 seeds x 3 iterations
    python experiments/critic/critic_fit.py --seeds 10 --out experiments/critic/results
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy import stats
from tqdm.auto import tqdm

from scpo.batch import RolloutBatch
from scpo.config import PolicyConfig
from scpo.credit import CreditConfig, compute_advantages
from scpo.credit.grouping import invalid_penalty
from scpo.credit.ppo import PPOOptions, answer_token_counts, compute_ppo, explained_variance, gae_advantages
from scpo.envs import corridor
from scpo.envs.demos import expert_demonstrations
from scpo.policy import create_policy
from scpo.policy.critic import ValueHead, clipped_value_loss, prompt_last_hidden
from scpo.rollout import TransformersEngine, collect_rollouts
from scpo.rollout.exact_values import choice_inputs, exact_graph, policy_log_probs, row_nodes, solve
from scpo.testbeds.policy_gradients import cosine, task_gradients, update_gradients

LAMBDA_INVALID = 0.1  # credit.norm.lambda_invalid's default
SUCCESS_REWARD = 10.0  # the corridor's reward of a win


def frozen_policy(seed: int, hidden: int, history_length: int, max_steps: int):
    """A freshly initialised tiny policy whose tokenizer knows the corridor's prompts (never updated here)."""
    tasks = corridor.list_tasks("train")
    demos, _ = expert_demonstrations(
        corridor, tasks, max_steps=max_steps, history_length=history_length, progress=False
    )
    torch.manual_seed(seed)
    cfg = PolicyConfig(tiny_hidden_size=hidden, tiny_layers=1, tiny_heads=2, tiny_vocab_size=400)
    policy = create_policy(cfg, corpus=[d.prompt for d in demos] + [d.response for d in demos], seed=seed)
    policy.model.eval()
    return policy


class Fidelity:
    """The exact gradient of success on the corridor (`scpo.rollout.exact_values`, `scpo.testbeds.policy_gradients`)
    for the frozen policy, and the cosine of each estimator's update on a batch with it (the gradient fidelity of
    docs/algorithms.md, `cos_tasks`: with the exact gradient of the batch's own tasks)."""

    def __init__(self, policy, tasks: list[str], args: argparse.Namespace):
        graph = exact_graph("corridor", tasks, max_steps=args.max_steps, history_length=args.history_length)
        inputs = choice_inputs(policy, graph, 1024, "truncate_left")
        self.table = solve(graph, policy_log_probs(policy.model, inputs, 1.0, False), 1.0)
        self.per_task = task_gradients(policy, self.table, 1024, "truncate_left", False)
        self.index = {t: k for k, t in enumerate(graph.tasks)}
        self.policy = policy

    def cosines(self, batch: RolloutBatch, drawn: list[str], critic_values: np.ndarray, args) -> dict[str, float]:
        opts = PPOOptions(gamma=args.gamma, lam=args.lam)
        exact_v = SUCCESS_REWARD * self.table.v[row_nodes(batch, self.table.graph)[0]]
        advantages = {
            "ppo_critic": compute_ppo(batch, CreditConfig(), values=critic_values, options=opts).advantages,
            "ppo_exact_v": compute_ppo(batch, CreditConfig(), values=exact_v, options=opts).advantages,
            "grpo": compute_advantages("grpo", batch).advantages,
        }
        grads = update_gradients(self.policy.model, batch, advantages, self.policy.tokenizer.pad_token_id, 1.0)
        own = self.per_task[[self.index[t] for t in drawn]].mean(0)
        cos = {m: cosine(g, own) for m, g in grads.items()}
        return {f"cos_{m}": 0.0 if np.isnan(c) else c for m, c in cos.items()}  # no update: cosine 0, as the testbed


def fit_one_seed(seed: int, args: argparse.Namespace, bar: tqdm) -> list[dict]:
    policy = frozen_policy(seed, args.hidden, args.history_length, args.max_steps)
    engine = TransformersEngine(policy, 1024, 32, batch_size=64, action_choice="admissible")
    torch.manual_seed(seed)
    head = ValueHead(args.hidden, hidden=args.head_hidden)
    # the critic's trunk: a copy of the policy's (verl-agent's recipe: a critic model from the same base), trained
    # with the head; or the policy's own frozen trunk, the head alone trained
    trained = args.trunk == "trained"
    trunk = copy.deepcopy(policy.model) if trained else policy.model
    opt = torch.optim.Adam([*head.parameters(), *(trunk.parameters() if trained else ())], lr=args.critic_lr)
    rng = np.random.default_rng(seed)
    tasks = corridor.list_tasks("train")[: args.panel]
    fidelity = Fidelity(policy, tasks, args) if args.fidelity else None
    play = {"env_name": "corridor", "max_steps": args.max_steps, "history_length": args.history_length}
    held_out, _ = collect_rollouts(
        corridor, tasks, args.eval_group, engine, seed=seed * 1000 + 999, progress=False, **play
    )
    held_out = RolloutBatch.from_trajectories(held_out)
    rows = []
    for it in range(args.iterations + 1):
        t0 = time.perf_counter()
        row = {"seed": seed, "iteration": it, **critic_metrics(head, trunk, held_out, args)}
        if it == args.iterations:  # the critic after the last update, measured once more
            rows.append(row)
            break
        drawn = list(rng.choice(tasks, size=args.tasks, replace=False))
        trajs, _ = collect_rollouts(
            corridor, drawn, args.group_size, engine, seed=seed * 1000 + it, progress=False, **play
        )
        batch = RolloutBatch.from_trajectories(trajs)
        prompts = list(batch.prompt_ids)
        with torch.no_grad():
            old = head(prompt_last_hidden(trunk, prompts))
        returns = critic_returns(batch, old.numpy(), args)
        weights = torch.tensor(answer_token_counts(batch))
        target = torch.tensor(returns, dtype=old.dtype)
        row["success"] = float(batch.won[batch.step == 0].mean())
        if fidelity is not None:
            row.update(fidelity.cosines(batch, drawn, old.numpy().astype(np.float64), args))
        clipfracs = []
        for _ in range(args.epochs):
            order = torch.randperm(batch.n_rows, generator=torch.Generator().manual_seed(seed * 7919 + it))
            for idx in order.split(args.minibatch):
                with torch.set_grad_enabled(trained):
                    states = prompt_last_hidden(trunk, [prompts[i] for i in idx.tolist()])
                loss, clipfrac = clipped_value_loss(
                    head(states), target[idx], old[idx], args.cliprange_value, weights[idx]
                )
                opt.zero_grad()
                loss.backward()
                opt.step()
                clipfracs.append(float(clipfrac))
        row["clipfrac"] = float(np.mean(clipfracs))
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        bar.update(1)
    return rows


def critic_returns(batch: RolloutBatch, values: np.ndarray, args: argparse.Namespace) -> np.ndarray:
    """G_t = A_t + V(s_t) by GAE from `values` (the invalid penalty a reward)."""
    reward = batch.reward - invalid_penalty(batch.valid, LAMBDA_INVALID)
    return gae_advantages(reward, values, batch.traj_id, batch.step, batch.done, gamma=args.gamma, lam=args.lam)[1]


def critic_metrics(head, trunk, batch: RolloutBatch, args: argparse.Namespace) -> dict[str, float]:
    """The critic's value loss (1/2 token-weighted mean squared error) and explained variance on `batch`."""
    with torch.no_grad():
        v = head(prompt_last_hidden(trunk, list(batch.prompt_ids))).numpy().astype(np.float64)
    g = critic_returns(batch, v, args)
    w = answer_token_counts(batch)
    return {
        "value_loss": float(0.5 * np.dot(w, (v - g) ** 2) / w.sum()),
        "explained_variance": explained_variance(v, g),
    }


def summarize(per_iter: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per iteration: mean over seeds of each metric with its t-interval (seeds are independent)."""
    out = []
    for it, part in per_iter.groupby("iteration"):
        row = {"iteration": it, "seeds": len(part)}
        for col in [c for c in per_iter.columns if c in ("value_loss", "explained_variance", "success")] + [
            c for c in per_iter.columns if c.startswith("cos_")
        ]:
            x = part[col].dropna().to_numpy()  # the last row (the final critic) has no training batch
            if len(x) == 0:
                continue
            mean = float(x.mean())
            half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * stats.sem(x)) if len(x) > 1 else float("nan")
            row.update({col: mean, f"{col}_lo": mean - half, f"{col}_hi": mean + half})
        out.append(row)
    return pd.DataFrame(out)


def _paired(d: np.ndarray) -> dict:
    res = stats.ttest_1samp(d, 0.0)
    lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    return {"diff": float(d.mean()), "ci": [float(lo), float(hi)], "p_paired_t": float(res.pvalue), "seeds": len(d)}


def paired_comparisons(per_iter: pd.DataFrame) -> dict:
    """Paired over seeds (paired t, 95 % t-interval): the last iteration minus the first for the value loss and the
    explained variance; with cosines, each estimator's cosine (mean over a seed's iterations) minus GRPO's."""
    if per_iter["seed"].nunique() < 2:
        return {}
    first = per_iter[per_iter["iteration"] == per_iter["iteration"].min()].set_index("seed")
    last = per_iter[per_iter["iteration"] == per_iter["iteration"].max()].set_index("seed")
    out = {
        f"{c}_last_minus_first": _paired((last[c] - first[c]).to_numpy()) for c in ("value_loss", "explained_variance")
    }
    by_seed = per_iter.groupby("seed").mean(numeric_only=True)
    for col in [c for c in per_iter.columns if c.startswith("cos_") and c != "cos_grpo"]:
        out[f"{col}_minus_grpo"] = _paired((by_seed[col] - by_seed["cos_grpo"]).to_numpy())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 seeds x 3 iterations (a smoke run)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--tasks", type=int, default=6, help="tasks per iteration")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=8)
    ap.add_argument("--history-length", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=32, help="the tiny trunk's hidden size")
    ap.add_argument(
        "--trunk",
        choices=("trained", "frozen"),
        default="trained",
        help="the critic's trunk: a trained copy of the "
        "policy's (verl-agent's recipe) or the policy's own, frozen (the head alone learns)",
    )
    ap.add_argument("--head-hidden", type=int, default=64, help="the value head's hidden layer (0: linear)")
    ap.add_argument("--gamma", type=float, default=1.0)
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--critic-lr", type=float, default=2e-3)
    ap.add_argument("--cliprange-value", type=float, default=0.5)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--minibatch", type=int, default=32)
    ap.add_argument("--eval-group", type=int, default=4, help="held-out episodes per panel task (fixed per seed)")
    ap.add_argument("--panel", type=int, default=24, help="the first tasks of the train split drawn from (24: all)")
    ap.add_argument(
        "--fidelity", action="store_true", help="also the cosine of PPO's and GRPO's updates with the exact gradient"
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.iterations = 2, 3
    bar = tqdm(total=args.seeds * args.iterations, desc="critic fit", unit="iteration")
    per_iter = pd.DataFrame([r for s in range(args.seeds) for r in fit_one_seed(s, args, bar)])
    bar.close()
    summary = summarize(per_iter)
    paired = paired_comparisons(per_iter)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary.round(3).to_string(index=False))
    print(json.dumps(paired, indent=1))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        per_iter.to_csv(args.out / "per_iteration.csv", index=False)
        summary.to_csv(args.out / "summary.csv", index=False)
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        (args.out / "run.json").write_text(json.dumps({"settings": settings, "paired": paired}, indent=1))


if __name__ == "__main__":
    main()
