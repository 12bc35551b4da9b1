"""Record what the trainer's critic sees: `ppo` runs of `scpo train` (the cpu profile's tiny policy on the corridor,
as trainer_curve.py), and per iteration, before the critic trains on the batch, the batch's rows (prompt ids, returns
G_t, answer token counts, trajectory and task ids, the observation, and unless --no-exact the exact success value
V^pi(s_t) of the policy that played the batch: a perfect critic's value over the success reward) and the critic's
start model (the run's `init_model`). `feature_probe.py` replays these streams offline. experiments/critic/README.md,
"Why the cpu profile's critic does not separate the states".

    python experiments/critic/record_batches.py --seeds 5 --iterations 12 --out /tmp/critic_streams
    python experiments/critic/record_batches.py --seeds 5 --iterations 12 --set policy.tiny_hidden_size=32 ...
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
from trainer_curve import run_config  # this folder's: the same runs as the trainer curve

from scpo.train import trainer as trainer_module
from scpo.train.run import run_training


def _plain(value):
    """numpy arrays and scalars as JSON lists and numbers."""
    return value.tolist() if isinstance(value, np.ndarray | np.generic) else str(value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--iterations", type=int, default=12)
    ap.add_argument("--set", action="append", default=[], help="a dotted override (repeatable)")
    ap.add_argument("--no-exact", action="store_true", help="skip the exact values (the slow part)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    original, original_update = trainer_module.Trainer.fit_critic, trainer_module.Trainer.update
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        stream: list[dict] = []
        exact: dict[int, np.ndarray] = {}

        def recording_update(self, batch, credit, it, _exact=exact):
            # V^pi(s_t) of the policy that played the batch (before its update): a perfect critic's values / 10
            if not args.no_exact:
                _exact[it] = np.asarray(self.exact_values(batch, it)[0].exact_value, dtype=np.float64)
            return original_update(self, batch, credit, it)

        def recording_fit(self, batch, credit, it, _stream=stream, _exact=exact):
            weights = np.array([len(r) for r in batch.response_ids], dtype=np.float64)
            _stream.append(
                {
                    "iteration": it,
                    "prompt_ids": [list(p) for p in batch.prompt_ids],
                    "returns": np.asarray(credit.returns, dtype=np.float64),
                    "old_values": np.asarray(batch.critic_value, dtype=np.float64),
                    "weights": weights,
                    "traj_id": np.asarray(batch.traj_id),
                    "group_id": np.asarray(batch.group_id),
                    "step": np.asarray(batch.step),
                    "observation": list(batch.observation),
                    **({} if args.no_exact else {"exact_value": _exact[it]}),
                }
            )
            return original(self, batch, credit, it)

        trainer_module.Trainer.fit_critic = recording_fit
        trainer_module.Trainer.update = recording_update
        overrides, cfg = run_config(seed, args)
        run_dir = args.out / f"run_seed{seed}"
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_training(cfg, stage="rl", out_dir=run_dir)
        record = {"seed": seed, "overrides": overrides, "init_model": str(run_dir / "init_model"), "batches": stream}
        (args.out / f"stream_seed{seed}.json").write_text(json.dumps(record, default=_plain))
        trainer_module.Trainer.fit_critic, trainer_module.Trainer.update = original, original_update
        print(f"seed {seed}: {len(stream)} batches recorded")


if __name__ == "__main__":
    main()
