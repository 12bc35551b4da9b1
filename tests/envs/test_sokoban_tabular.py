"""Sokoban's tabular model (`scpo.envs.sokoban.model`, the `scpo.envs.tabular` protocol) against the environment
itself: random episodes of every split, invalid answers among them, replayed in both side by side with both rewards;
the nodes of the exact dynamic programme at history 0 against the solver's state space; and the exact success of a
uniformly random policy against Monte-Carlo episodes of the environment."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from scpo.envs import sokoban
from scpo.envs.registry import env_spec
from scpo.envs.sokoban.room import is_won
from scpo.envs.tabular import TabularModel, check_replay
from scpo.rollout.exact_dp import build_graph, edge_probabilities, success_values
from scpo.rollout.exact_values import exact_graph

ROOMS_PER_SPLIT = 6


def _random_moves(model, rng, n: int) -> list[str]:
    """Half of the moves the planner's (so that episodes of the two-box rooms win too), the others random, invalid
    answers among them."""
    state, out = model.initial(), []
    for _ in range(n):
        choices = [*model.admissible(state), "still", "push the box"]  # invalid answers play the no-op
        best = sokoban.optimal_action(state)
        out.append(best if best is not None and rng.random() < 0.5 else choices[rng.integers(len(choices))])
        state, _, done, _ = model.step(state, out[-1])
        if done:
            break
    return out


@pytest.mark.parametrize("reward", ["success", "verl_agent"])
@pytest.mark.parametrize("split", sokoban.SPLITS)
def test_random_episodes_of_every_split_replay_identically_in_the_model_and_the_env(split, reward):
    rng = np.random.default_rng([len(split), len(reward)])
    tasks = sokoban.list_tasks(split)
    wins = 0
    for task in [tasks[i] for i in rng.choice(len(tasks), ROOMS_PER_SPLIT, replace=False)]:
        model = env_spec("sokoban").tabular_model(task, data_root="data", reward=reward)
        assert isinstance(model, TabularModel)
        for max_steps in (3, 15):
            for _ in range(15):
                moves = _random_moves(model, rng, 20)
                states = check_replay(model, sokoban.make_env(task, max_steps=max_steps, reward=reward), moves)
                wins += is_won(states[-1])
    assert wins > 0  # some random episodes win, so the winning step is compared too


def test_the_expert_plan_wins_in_the_model_and_a_wrong_model_is_named_at_its_first_difference():
    task = "sokoban-6x6-1box-00003"
    model = sokoban.tabular_model(task)
    plan = sokoban.expert_actions(task)
    states = check_replay(model, sokoban.make_env(task), plan)
    assert sokoban.is_deadlock(states[0]) is False and len(states) == len(plan) + 1
    assert model.step(states[-2], plan[-1]) == (states[-1], 10.0, True, True)

    class NoPush(sokoban.SokobanModel):  # the player walks through boxes
        def step(self, state, action):
            nxt, r, done, won = super().step(state, action)
            return nxt._replace(boxes=state.boxes), r, done, won

    with pytest.raises(ValueError, match=r"after \d+ steps the tabular model's observation is"):
        check_replay(NoPush(task), sokoban.make_env(task), plan)


def test_options_are_the_envs_and_a_bad_one_is_named():
    task = "sokoban-6x6-1box-00003"
    assert sokoban.tabular_model(task, max_steps=7, reward="verl_agent").reward == "verl_agent"
    with pytest.raises(TypeError, match="unknown Sokoban env options"):
        sokoban.tabular_model(task, engine="fast")
    with pytest.raises(ValueError, match="unknown Sokoban reward"):
        sokoban.tabular_model(task, reward="shaped")
    with pytest.raises(ValueError, match="not a Sokoban task id"):
        sokoban.tabular_model("sokoban-6x6-1box")


@pytest.mark.parametrize("horizon", [1, 4, 15])
def test_without_history_the_nodes_are_the_steps_and_states_the_solver_reaches(horizon):
    """At history 0 a node is (t, state) and its prompt the grid's alone: the nodes at step t are the states the
    solver's successor arrays reach in exactly t moves without passing a win, and the distinct prompts are the
    distinct states."""
    tasks = sokoban.list_tasks("train")[:5]
    graph = exact_graph("sokoban", tasks, max_steps=horizon, history_length=0)
    for k, task in enumerate(tasks):
        space = sokoban.state_space(sokoban.initial_state(task))
        layer, expected = {0}, {(0, space.states[0])}
        for t in range(1, horizon):
            layer = {int(n) for s in layer for n in space.successor[s] if not space.won[n]}
            expected |= {(t, space.states[n]) for n in layer}
        nodes = {(int(graph.t[n]), graph.state[n]) for n in np.flatnonzero(graph.task == k)}
        assert nodes == expected
    assert len(set(graph.prompt)) == len(set(zip(graph.task.tolist(), graph.state)))


def test_with_history_the_prompt_shows_the_step_and_the_window():
    task = "sokoban-6x6-1box-00003"
    graph = exact_graph("sokoban", [task], max_steps=3, history_length=2)
    later = np.flatnonzero(graph.t == 2)
    assert len(later) > len({graph.state[n] for n in later})  # one state, several windows
    n = later[0]
    assert "You are now at step 3" in graph.prompt[n] and "[Observation 1: '" in graph.prompt[n]
    assert all("Current Step" in p and "step(s)" not in p for p in np.asarray(graph.prompt)[graph.t == 0])


def test_the_exact_success_of_a_random_policy_matches_its_monte_carlo_episodes():
    """A uniformly random policy over the four moves: V_0 from the dynamic programme over the tabular model lies in the
    99% binomial interval of 10,000 episodes played in the environment; with one step less it does not."""
    task = "sokoban-6x6-1box-00003"  # V* = 2: a random policy wins 0.740 within 15 moves, 0.713 within 14
    model = sokoban.tabular_model(task)

    def exact(horizon: int) -> float:
        graph = build_graph([model], [task], horizon, sokoban.build_prompt, 0)
        log_p = np.full((graph.n_nodes, 4), np.log(0.25))
        return float(success_values(graph, edge_probabilities(graph, log_p))[0][graph.roots[0]])

    rng = np.random.default_rng(0)
    env = sokoban.make_env(task, max_steps=15)
    wins, n = 0, 10_000
    for _ in range(n):
        env.reset()
        done, info = False, {}
        while not done:
            _, _, done, info = env.step(sokoban.ACTIONS[rng.integers(4)])
        wins += info["won"]
    lo, hi = stats.binomtest(wins, n).proportion_ci(0.99)
    assert lo <= exact(15) <= hi
    assert not lo <= exact(14) <= hi
