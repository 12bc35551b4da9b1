"""What a user sees: progress bars that end at their true totals (rollouts, updates, evaluation), no third-party
progress bars, and a last line naming what was written."""

from __future__ import annotations

import re

from helpers.runs import cli, train_cli


def _final_states(stderr: str, label: str) -> list[tuple[int, int, str]]:
    """(n, total, postfix) of the last rendering of every bar whose description starts with `label`."""
    states: dict[str, tuple[int, int, str]] = {}
    for chunk in re.split(r"[\r\n]", stderr):
        m = re.search(rf"({re.escape(label)}[^:]*):\s+\d+%\|[^|]*\|\s*(\d+)/(\d+) \[([^\]]*)\]", chunk)
        if m:
            postfix = re.search(r"\d+/\d+ episodes done", m.group(4))
            states[m.group(1)] = (int(m.group(2)), int(m.group(3)), postfix.group(0) if postfix else "")
    return list(states.values())


def test_collector_bar_counts_steps_and_ends_at_its_total(capsys):
    from scpo.envs import corridor
    from scpo.rollout import collect_rollouts
    from scpo.rollout.generation import Generation

    class GoEast:  # wins walk-2 in 2 steps; the key task needs the key, so those episodes run to the 5-step limit
        def generate(self, prompts, temperature, top_p=1.0, admissible=None):
            def answer(prompt):
                obs = prompt.split("Current observation: ")[1].split("\n")[0]
                return "<action>open door</action>" if "door is to the east" in obs else "<action>go east</action>"

            return [Generation(text=answer(p), prompt_ids=[1], response_ids=[2]) for p in prompts]

    trajs, _ = collect_rollouts(
        corridor,
        ["corridor-walk-2-0-4", "corridor-key-3-1-1"],
        3,
        GoEast(),
        env_name="corridor",
        max_steps=5,
        desc="test rollouts",
    )
    assert sorted(len(t) for t in trajs) == [2, 2, 2, 5, 5, 5]
    (state,) = _final_states(capsys.readouterr().err, "test rollouts")
    # 6 episodes x 5 turns: one unit per (episode, turn), so the bar ends at its total when episodes end together
    assert state == (30, 30, "6/6 episodes done")


def test_train_shows_update_bars_no_model_io_bars_and_a_final_line(tmp_path):
    run = tmp_path / "run"
    result = train_cli(run, iterations=2)
    assert result.exit_code == 0, result.output
    err = result.stderr
    assert "Loading weights" not in err and "Writing model shards" not in err  # transformers' own bars
    assert _final_states(err, "iter 1 rollouts") == [(24, 24, "6/6 episodes done")]
    updates = _final_states(err, "update")
    assert updates and all(n == total > 0 for n, total, _ in updates)
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("gigpo on corridor (seed 0): 2 iterations") and f"wrote {run}/model" in last

    out = tmp_path / "eval"
    result = cli("eval", "--profile", "smoke", "--checkpoint", run, "--out", out)
    assert result.exit_code == 0, result.output
    assert "Loading weights" not in result.stderr
    for split in ("valid_seen", "valid_unseen"):
        ((n, total, _),) = _final_states(result.stderr, f"eval {split}")
        assert n == total > 0
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith(f"evaluated {run} on corridor: success valid_seen ") and f"wrote {out}/eval.json" in last
