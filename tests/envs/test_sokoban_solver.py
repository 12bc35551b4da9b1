"""Sokoban's exact solver: V* on rooms counted by hand, deadlocks in hand-made corner cases, expert plans that replay to
a win with V* falling by one per move, the state space's transitions against the rules, and the planner's q through
the registry and the oracle estimator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.envs import sokoban
from scpo.envs.registry import env_spec
from scpo.rollout import collect_rollouts

from helpers.engines import ScriptedEngine

# rooms drawn with verl-agent's symbols; V* counted by hand in the comments
ONE_PUSH = """
#####
#PXO#
#####
"""  # right: the box onto the target. V* = 1
WALK_THEN_PUSH = """
######
#P_XO#
######
"""  # right (walk), right (push). V* = 2
AROUND_THE_BOX = """
#####
#O__#
#_X_#
#__P#
#####
"""  # two pushes (up and left, either order), two moves to change sides between them, one to reach the first: V* = 5
TWO_BOXES = """
#######
#OX_XO#
#__P__#
#######
"""  # up; left (box 1 onto its target); right; right (box 2 onto its target). V* = 4
FROZEN_PAIR = """
######
#OXXO#
#_P__#
######
"""  # each box needs the other's cell to stand in before it can be pushed along the wall: a deadlock from the start


@pytest.mark.parametrize(
    ("room", "v_star", "plan"),
    [
        (ONE_PUSH, 1, ["right"]),
        (WALK_THEN_PUSH, 2, ["right", "right"]),
        # the first optimal action in the listing order (up, down, left, right): up, then push left, around, push up
        (AROUND_THE_BOX, 5, ["up", "left", "down", "left", "up"]),
        (TWO_BOXES, 4, ["up", "left", "right", "right"]),
    ],
)
def test_v_star_and_the_expert_plan_on_rooms_counted_by_hand(room, v_star, plan):
    state = sokoban.room_from_text(room)
    assert sokoban.optimal_cost(state) == v_star
    assert sokoban.expert_plan(state) == plan
    values = [v_star]
    for move in plan:
        state, _, done, won = sokoban.step(state, move)
        values.append(sokoban.optimal_cost(state))
    assert won and done and values == list(range(v_star, -1, -1))


def test_a_move_into_a_wall_is_a_step_that_changes_nothing():
    state = sokoban.room_from_text(WALK_THEN_PUSH)
    assert sokoban.step(state, "up") == (state, 0.0, False, False)
    assert sokoban.step(state, "left") == (state, 0.0, False, False)
    space = sokoban.state_space(state)
    assert space.successor[0].tolist()[:3] == [0, 0, 0] and space.v_star[0] == 2


def test_a_box_against_another_box_does_not_move():
    state = sokoban.room_from_text("#######\n#PXXOO#\n#######")
    assert sokoban.step(state, "right")[0] == state
    assert sokoban.is_deadlock(state)


@pytest.mark.parametrize(
    ("room", "why"),
    [
        ("#####\n#X__#\n#_P_#\n#__O#\n#####", "a box in a corner off its target"),
        ("######\n#_X__#\n#_P__#\n#__O_#\n######", "a box against a wall with no target along it"),
        (FROZEN_PAIR, "two boxes side by side against a wall"),
        ("#####\n#OX_#\n#__P#\n#___#\n#O_X#\n#####", "one box in a corner, the other free to reach its target"),
    ],
)
def test_deadlocks_have_no_plan(room, why):
    state = sokoban.room_from_text(room)
    assert sokoban.is_deadlock(state), why
    assert sokoban.optimal_cost(state) == math.inf
    with pytest.raises(ValueError, match="deadlocked"):
        sokoban.expert_plan(state)


def test_pushing_a_box_between_two_corners_is_a_step_into_a_deadlock():
    """The box pushed east stands against the east wall between two corners: it can only go into one of them."""
    west = sokoban.room_from_text("#####\n#O__#\n#PX_#\n#___#\n#####")
    # down, right, push up, right, up, push left
    assert sokoban.optimal_cost(west) == 6
    pushed, _, _, _ = sokoban.step(west, "right")
    assert sokoban.is_deadlock(pushed)
    assert sokoban.oracle_progress(6.0, math.inf) == -math.inf
    assert sokoban.oracle_progress(math.inf, math.inf) == 0.0
    assert sokoban.oracle_progress(6.0, 7.0) == -1.0


def test_every_room_of_every_split_is_solvable_and_its_expert_plan_replays_to_a_win():
    """Rooms are solvable by construction (reverse play); the solver checks each one, and the expert's moves win in
    the environment itself with V* falling by one per move."""
    for split in sokoban.SPLITS:
        for task in sokoban.list_tasks(split):
            plan = sokoban.expert_actions(task)
            start = sokoban.initial_state(task)
            assert len(plan) == sokoban.optimal_cost(start) < math.inf, task
            env = sokoban.make_env(task, max_steps=len(plan))
            env.reset()
            space = sokoban.state_space(start)
            values = []
            for move in plan:
                values.append(space.value(env.state))
                _, _, done, info = env.step(move)
            assert info["won"] and done, task
            assert values == list(range(len(plan), 0, -1)), task


def test_the_state_space_is_every_reachable_state_with_the_rules_transitions():
    for task in sokoban.list_tasks("valid_unseen", limit=4) + sokoban.list_tasks("valid_hard", limit=2):
        space = sokoban.state_space(sokoban.initial_state(task))
        assert space.states[0] == sokoban.initial_state(task) and len(set(space.states)) == len(space.states)
        for i, state in enumerate(space.states):
            assert space.index[state] == i
            assert space.won[i] == all(b in state.room.targets for b in state.boxes)
            if space.won[i]:
                assert space.v_star[i] == 0 and (space.successor[i] == -1).all()
                continue
            nexts = [sokoban.step(state, a)[0] for a in sokoban.admissible_actions(state)]
            assert space.successor[i].tolist() == [space.index[s] for s in nexts]
            best = min(space.v_star[space.index[s]] for s in nexts)
            assert space.v_star[i] == 1 + best  # Bellman's equation, inf + 1 = inf in a deadlock
        assert np.isinf(space.v_star).any(), f"{task}: no deadlock reachable"


def _expert_policy(prompt: str) -> str:
    """The expert as a function of the state: the grid of a history-free prompt -> its first optimal move."""
    grid = prompt.split("Your current observation is:\n")[1].split("\nYour admissible actions")[0]
    state = sokoban.room_from_text(grid)
    return f"<action>{sokoban.expert_plan(state)[0]}</action>"


def _play(task: str, answers, max_steps: int = 15) -> RolloutBatch:
    trajs, _ = collect_rollouts(
        sokoban,
        [task],
        1,
        ScriptedEngine(answers),
        env_name="sokoban",
        max_steps=max_steps,
        history_length=0,
        progress=False,
    )
    return RolloutBatch.from_trajectories(trajs)


def test_q_is_one_along_the_expert_path_and_the_oracle_estimator_reads_it_through_the_registry():
    from scpo.credit import estimate
    from scpo.envs.registry import with_oracle_progress

    task = sokoban.list_tasks("valid_unseen")[0]
    batch = _play(task, _expert_policy)
    assert batch.won.all() and batch.n_rows == sokoban.optimal_cost(sokoban.initial_state(task))
    labelled = with_oracle_progress(batch, "data")
    assert labelled.oracle_progress.tolist() == [1.0] * batch.n_rows
    assert estimate(labelled, ["oracle"])["oracle"].advantages.tolist() == [1.0] * batch.n_rows


def _scripted(*answers: str):
    """The given answers, then the expert's moves."""
    queue = list(answers)
    return lambda prompt: queue.pop(0) if queue else _expert_policy(prompt)


# the first training room: the player at (2,4), the box at (3,3), its target at (2,2); V* = 7 (down, down, left, up,
# right, up, left)
FIRST_TASK = "sokoban-6x6-1box-00000"


def test_q_of_a_wall_bump_an_invalid_answer_a_step_away_and_back():
    assert sokoban.optimal_cost(sokoban.initial_state(FIRST_TASK)) == 7
    batch = _play(
        FIRST_TASK, _scripted("<action>right</action>", "no tags", "<action>up</action>", "<action>down</action>")
    )
    q = env_spec("sokoban").label_progress(batch, data_root="data").oracle_progress
    assert batch.valid.tolist()[:2] == [True, False] and batch.won.all()
    assert q.tolist() == [0.0, 0.0, -1.0, 1.0] + [1.0] * 7  # wall, NO_OP, away, back, then the expert's 7 moves


def test_q_of_a_step_into_a_deadlock_and_the_oracles_dead_end_credit():
    """left (the box must now be walked round: V* 8), down (the box into the corner at (4,3)), then moves between dead
    states."""
    from scpo.credit import estimate

    moves = ["<action>left</action>", "<action>down</action>"] + ["<action>up</action>"] * 3
    batch = _play(FIRST_TASK, _scripted(*moves), max_steps=5)
    labelled = sokoban.label_progress(batch)
    assert labelled.oracle_progress.tolist() == [-1.0, -math.inf, 0.0, 0.0, 0.0] and not batch.won.any()
    assert estimate(labelled, ["oracle"])["oracle"].advantages.tolist() == [-1.0, -10.0, 0.0, 0.0, 0.0]


def test_a_rollout_that_does_not_replay_is_refused():
    task = sokoban.list_tasks("train")[0]
    batch = _play(task, _expert_policy)
    cols = batch.columns()
    cols["next_observation"] = np.array([batch.observation[0]] * batch.n_rows, dtype=object)
    with pytest.raises(ValueError, match=f"replay of {task}"):
        sokoban.label_progress(RolloutBatch(**cols))
