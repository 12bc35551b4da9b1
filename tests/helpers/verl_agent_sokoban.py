# ruff: noqa: B007, E713, SIM118  (kept as the original code reads)
"""A transcription of verl-agent's Sokoban, for parity tests only: its room generator
(agent_system/environments/env_package/sokoban/sokoban/room_utils.py: `generate_room`, `room_topology_generation`,
`place_boxes_and_player`, `reverse_playing`, `depth_first_search`, `reverse_move`, `box_displacement_score`,
`add_random_player_movement`), its `SokobanEnv` (sokoban/env.py: `reset` under `set_seed`, `step`, `render` in
`tiny_rgb_array` mode) over gym-sokoban's `SokobanEnv` (`step`, `_push`, `_move`, `_calc_reward`, `_check_if_done`,
`__init__`'s rewards and `num_gen_steps`), and `sokoban_projection` (sokoban/projection.py). Public code (Apache-2.0 /
MIT), kept as close to the original as a standalone module allows: global `random` / `np.random` state, numpy arrays,
`marshal` state keys. No import of scpo."""

from __future__ import annotations

import marshal
import random
from contextlib import contextmanager

import numpy as np

# ------------------------------------------------------------------------------------------------ room_utils.py
CHANGE_COORDINATES = {0: (-1, 0), 1: (1, 0), 2: (0, -1), 3: (0, 1)}
ACTION_LOOKUP_GEN = {0: "push up", 1: "push down", 2: "push left", 3: "push right", 4: "move up", 5: "move down",
                     6: "move left", 7: "move right"}  # fmt: skip


def add_random_player_movement(room_state, room_structure, move_probability=0.5, continue_probability=0.5, max_steps=3):
    if random.random() > move_probability:
        return room_state
    player_pos = np.where(room_state == 5)
    player_pos = np.array([player_pos[0][0], player_pos[1][0]])
    previous_positions = [tuple(player_pos)]
    steps_taken = 0
    while steps_taken < max_steps:
        valid_moves = []
        for action in range(4):
            change = CHANGE_COORDINATES[action]
            next_pos = player_pos + change
            if room_state[next_pos[0], next_pos[1]] in [1, 2] and tuple(next_pos) not in previous_positions:
                valid_moves.append((action, next_pos))
        if not valid_moves:
            break
        chosen_action, next_pos = random.choice(valid_moves)
        room_state[player_pos[0], player_pos[1]] = room_structure[player_pos[0], player_pos[1]]
        room_state[next_pos[0], next_pos[1]] = 5
        player_pos = next_pos
        previous_positions.append(tuple(player_pos))
        steps_taken += 1
        if steps_taken >= max_steps or random.random() > continue_probability:
            break
    return room_state


def generate_room(dim=(13, 13), p_change_directions=0.35, num_steps=25, num_boxes=3, tries=4, search_depth=100):
    room_state = np.zeros(shape=dim)
    room_structure = np.zeros(shape=dim)
    for t in range(tries):
        room = room_topology_generation(dim, p_change_directions, num_steps)
        room = place_boxes_and_player(room, num_boxes=num_boxes)
        room_structure = np.copy(room)
        room_structure[room_structure == 5] = 1
        room_state = room.copy()
        room_state[room_state == 2] = 4
        room_state, box_mapping, action_sequence = reverse_playing(room_state, room_structure, search_depth)
        room_state[room_state == 3] = 4
        if box_displacement_score(box_mapping) > 0:
            break
    if box_displacement_score(box_mapping) == 0:
        raise RuntimeWarning("Generated Model with score == 0")
    if box_displacement_score(box_mapping) == 1:
        move_probability = 0.8
    else:
        move_probability = 0.5
    room_state = add_random_player_movement(
        room_state, room_structure, move_probability=move_probability, continue_probability=0.5, max_steps=3
    )
    return room_structure, room_state, box_mapping, action_sequence


def room_topology_generation(dim=(10, 10), p_change_directions=0.35, num_steps=15):
    dim_x, dim_y = dim
    masks = [
        [[0, 0, 0], [1, 1, 1], [0, 0, 0]],
        [[0, 1, 0], [0, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [1, 1, 0]],
        [[0, 0, 0], [0, 1, 1], [0, 1, 0]],
    ]
    directions = [(1, 0), (0, 1), (-1, 0), (0, -1)]
    direction = random.sample(directions, 1)[0]
    position = np.array([random.randint(1, dim_x - 1), random.randint(1, dim_y - 1)])
    level = np.zeros(dim, dtype=int)
    for s in range(num_steps):
        if random.random() < p_change_directions:
            direction = random.sample(directions, 1)[0]
        position = position + direction
        position[0] = max(min(position[0], dim_x - 2), 1)
        position[1] = max(min(position[1], dim_y - 2), 1)
        mask = random.sample(masks, 1)[0]
        mask_start = position - 1
        level[mask_start[0] : mask_start[0] + 3, mask_start[1] : mask_start[1] + 3] += mask
    level[level > 0] = 1
    level[:, [0, dim_y - 1]] = 0
    level[[0, dim_x - 1], :] = 0
    return level


def place_boxes_and_player(room, num_boxes):
    possible_positions = np.where(room == 1)
    num_possible_positions = possible_positions[0].shape[0]
    num_players = 1
    if num_possible_positions <= num_boxes + num_players:
        raise RuntimeError(f"Not enough free spots (#{num_possible_positions}) to place {num_players} player and "
                           f"{num_boxes} boxes.")  # fmt: skip
    ind = np.random.randint(num_possible_positions)
    player_position = possible_positions[0][ind], possible_positions[1][ind]
    room[player_position] = 5
    for n in range(num_boxes):
        possible_positions = np.where(room == 1)
        num_possible_positions = possible_positions[0].shape[0]
        ind = np.random.randint(num_possible_positions)
        box_position = possible_positions[0][ind], possible_positions[1][ind]
        room[box_position] = 2
    return room


explored_states = set()
num_boxes = 0
best_room_score = -1
best_room = None
best_box_mapping = None
best_action_sequence = []


def reverse_playing(room_state, room_structure, search_depth=100):
    global explored_states, num_boxes, best_room_score, best_room, best_box_mapping, best_action_sequence
    box_mapping = {}
    box_locations = np.where(room_structure == 2)
    num_boxes = len(box_locations[0])
    for l in range(num_boxes):  # noqa: E741
        box = (box_locations[0][l], box_locations[1][l])
        box_mapping[box] = box
    explored_states = set()
    best_room_score = -1
    best_room = None
    best_box_mapping = box_mapping
    best_action_sequence = []
    depth_first_search(room_state, room_structure, box_mapping, box_swaps=0, last_pull=(-1, -1), ttl=search_depth,
                       action_sequence=[])  # fmt: skip
    return best_room, best_box_mapping, best_action_sequence


def depth_first_search(room_state, room_structure, box_mapping, box_swaps=0, last_pull=(-1, -1), ttl=300,
                       action_sequence=[]):  # fmt: skip  # noqa: B006
    global explored_states, num_boxes, best_room_score, best_room, best_box_mapping, best_action_sequence
    ttl -= 1
    if ttl <= 0 or len(explored_states) >= 300000:
        return
    state_tohash = marshal.dumps(room_state)
    if not (state_tohash in explored_states):
        room_score = box_swaps * box_displacement_score(box_mapping)
        if np.where(room_state == 2)[0].shape[0] != num_boxes:
            room_score = 0
        if room_score > best_room_score:
            best_room = room_state.copy()
            best_room_score = room_score
            best_box_mapping = box_mapping.copy()
            best_action_sequence = action_sequence.copy()
        explored_states.add(state_tohash)
        for action in ACTION_LOOKUP_GEN.keys():
            if action >= 4:
                continue
            room_state_next = room_state.copy()
            box_mapping_next = box_mapping.copy()
            room_state_next, box_mapping_next, last_pull_next = reverse_move(
                room_state_next, room_structure, box_mapping_next, last_pull, action
            )
            box_swaps_next = box_swaps
            if last_pull_next != last_pull:
                box_swaps_next += 1
            action_sequence_next = action_sequence + [action]
            depth_first_search(room_state_next, room_structure, box_mapping_next, box_swaps_next, last_pull_next, ttl,
                               action_sequence_next)  # fmt: skip


def reverse_move(room_state, room_structure, box_mapping, last_pull, action):
    player_position = np.where(room_state == 5)
    player_position = np.array([player_position[0][0], player_position[1][0]])
    change = CHANGE_COORDINATES[action % 4]
    next_position = player_position + change
    if room_state[next_position[0], next_position[1]] in [1, 2]:
        room_state[player_position[0], player_position[1]] = room_structure[player_position[0], player_position[1]]
        room_state[next_position[0], next_position[1]] = 5
        if action < 4:
            possible_box_location = change[0] * -1, change[1] * -1
            possible_box_location += player_position
            if room_state[possible_box_location[0], possible_box_location[1]] in [3, 4]:
                room_state[player_position[0], player_position[1]] = 3
                room_state[possible_box_location[0], possible_box_location[1]] = room_structure[
                    possible_box_location[0], possible_box_location[1]
                ]
                for k in box_mapping.keys():
                    if box_mapping[k] == (possible_box_location[0], possible_box_location[1]):
                        box_mapping[k] = (player_position[0], player_position[1])
                        last_pull = k
    return room_state, box_mapping, last_pull


def box_displacement_score(box_mapping):
    score = 0
    for box_target in box_mapping.keys():
        box_location = np.array(box_mapping[box_target])
        box_target = np.array(box_target)
        dist = np.sum(np.abs(box_location - box_target))
        score += dist
    return score


# ------------------------------------------------------------------------------------------------------ utils.py
@contextmanager
def set_seed(seed):
    random_state = random.getstate()
    np_random_state = np.random.get_state()
    try:
        random.seed(seed)
        np.random.seed(seed)
        yield
    finally:
        random.setstate(random_state)
        np.random.set_state(np_random_state)


# ------------------------------------------------------------- env.py over gym-sokoban's SokobanEnv (text mode)
class SokobanEnv:
    GRID_LOOKUP = {0: " # \t", 1: " _ \t", 2: " O \t", 3: " √ \t", 4: " X \t", 5: " P \t", 6: " S \t"}
    INVALID_ACTION = 0

    def __init__(self, dim_room=(6, 6), max_steps=100, num_boxes=1, search_depth=30):
        self.dim_room = dim_room
        self.num_gen_steps = int(1.7 * (dim_room[0] + dim_room[1]))
        self.num_boxes = num_boxes
        self.search_depth = search_depth
        self.penalty_for_step = -0.1
        self.penalty_box_off_target = -1
        self.reward_box_on_target = 1
        self.reward_finished = 10
        self.max_steps = max_steps

    def reset(self, seed):
        """verl-agent's reset; a seed whose room cannot be made raises (verl-agent retries with a salted hash)."""
        with set_seed(seed):
            self.room_fixed, self.room_state, self.box_mapping, _ = generate_room(
                dim=self.dim_room, num_steps=self.num_gen_steps, num_boxes=self.num_boxes,
                search_depth=self.search_depth,
            )  # fmt: skip
        self.player_position = np.argwhere(self.room_state == 5)[0]
        self.num_env_steps = self.reward_last = self.boxes_on_target = 0
        return self.render(), {"won": False}

    def success(self):
        return self.boxes_on_target == self.num_boxes

    def step(self, action: int):
        if action == self.INVALID_ACTION:
            return self.render(), 0, False, {"action_is_effective": False, "won": False}
        prev_player_position = self.player_position
        self.num_env_steps += 1
        if action < 5:
            self._push(action)
        self._calc_reward()
        done = self._check_if_all_boxes_on_target() or self.max_steps == self.num_env_steps
        info = {
            "action_is_effective": not np.array_equal(prev_player_position, self.player_position),
            "won": self.success(),
        }
        return self.render(), self.reward_last, done, info

    def _push(self, action):
        change = CHANGE_COORDINATES[(action - 1) % 4]
        new_position = self.player_position + change
        current_position = self.player_position.copy()
        new_box_position = new_position + change
        if new_box_position[0] >= self.room_state.shape[0] or new_box_position[1] >= self.room_state.shape[1]:
            return False, False
        can_push_box = self.room_state[new_position[0], new_position[1]] in [3, 4]
        can_push_box &= self.room_state[new_box_position[0], new_box_position[1]] in [1, 2]
        if can_push_box:
            self.player_position = new_position
            self.room_state[(new_position[0], new_position[1])] = 5
            self.room_state[current_position[0], current_position[1]] = self.room_fixed[
                current_position[0], current_position[1]
            ]
            box_type = 4
            if self.room_fixed[new_box_position[0], new_box_position[1]] == 2:
                box_type = 3
            self.room_state[new_box_position[0], new_box_position[1]] = box_type
            return True, True
        return self._move(action), False

    def _move(self, action):
        change = CHANGE_COORDINATES[(action - 1) % 4]
        new_position = self.player_position + change
        current_position = self.player_position.copy()
        if self.room_state[new_position[0], new_position[1]] in [1, 2]:
            self.player_position = new_position
            self.room_state[(new_position[0], new_position[1])] = 5
            self.room_state[current_position[0], current_position[1]] = self.room_fixed[
                current_position[0], current_position[1]
            ]
            return True
        return False

    def _calc_reward(self):
        self.reward_last = self.penalty_for_step
        empty_targets = self.room_state == 2
        player_on_target = (self.room_fixed == 2) & (self.room_state == 5)
        total_targets = empty_targets | player_on_target
        current_boxes_on_target = self.num_boxes - np.where(total_targets)[0].shape[0]
        if current_boxes_on_target > self.boxes_on_target:
            self.reward_last += self.reward_box_on_target
        elif current_boxes_on_target < self.boxes_on_target:
            self.reward_last += self.penalty_box_off_target
        if self._check_if_all_boxes_on_target():
            self.reward_last += self.reward_finished
        self.boxes_on_target = current_boxes_on_target

    def _check_if_all_boxes_on_target(self):
        empty_targets = self.room_state == 2
        player_hiding_target = (self.room_fixed == 2) & (self.room_state == 5)
        return np.where(empty_targets | player_hiding_target)[0].shape[0] == 0

    def render(self):
        room_state = np.where((self.room_state == 5) & (self.room_fixed == 2), 6, self.room_state).tolist()
        lookup = lambda cell: self.GRID_LOOKUP.get(cell, "?")  # noqa: E731
        return "\n".join("".join(lookup(cell) for cell in row) for row in room_state)


# ------------------------------------------------------------------------------------------------ projection.py
def sokoban_projection(actions):
    action_pools = {"up": 1, "down": 2, "left": 3, "right": 4, "still": 0}
    valids = [0] * len(actions)
    for i in range(len(actions)):
        original_str = actions[i]
        actions[i] = actions[i].lower()
        start_tag = "<action>"
        end_tag = "</action>"
        start_idx = actions[i].find(start_tag)
        end_idx = actions[i].find(end_tag)
        try:
            if start_idx == -1 or end_idx == -1:
                actions[i] = 0
                continue
            extracted_action = actions[i][start_idx + len(start_tag) : end_idx].strip().lower()
            for act in action_pools.keys():
                if act in extracted_action:
                    actions[i] = action_pools[act]
                    valids[i] = 1
                    break
            if valids[i] == 0:
                actions[i] = 0
        except Exception:
            actions[i] = 0
        think_start_idx = original_str.find("<think>")
        think_end_idx = original_str.find("</think>")
        if think_start_idx == -1 or think_end_idx == -1:
            valids[i] = 0
    return actions, valids


# ----------------------------------------------- prompts/sokoban.py, SimpleMemory.fetch, SokobanEnvironmentManager
SOKOBAN_TEMPLATE_NO_HIS = """
You are an expert agent operating in the Sokoban environment.

# Symbols and Their Meaning
- Walls (`#`): These block movement. You can't move through or push anything into walls.
- Floor (`_`): Open spaces where you can walk and move boxes.
- Targets (`O`): The spots where boxes need to go.
- Boxes (`X`): These are what you need to push onto the targets.
- Player (`P`): That's you! You'll move around the grid to push boxes.
- Box on Target (`√`): A box successfully placed on a target.
- Player on Target (`S`): You standing on a target.

# Your Goal
Your goal is to push all the boxes (`X`) onto the target spots (`O`). Once all boxes are on the targets, you win!

# Rules
You can only push boxes. You can't pull them, so plan ahead to avoid getting stuck.
You can't walk through or push boxes into walls (`#`).
To avoid traps, do not push boxes into corners or against walls where they can't be moved again.

# Current Step
Your current observation is:
{current_observation}
Your admissible actions are ["up", "down", "left", "right"].

Now it's your turn to make a move (choose ONE action only for the current step).
You should first reason step-by-step about the current situation — observe the positions of boxes and targets, plan a path to push a box toward a target, and avoid traps like corners or walls. This reasoning process MUST be enclosed within <think> </think> tags. 
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""  # noqa: E501, W291

SOKOBAN_TEMPLATE = """
You are an expert agent operating in the Sokoban environment.

# Symbols and Their Meaning
- Walls (`#`): These block movement. You can't move through or push anything into walls.
- Floor (`_`): Open spaces where you can walk and move boxes.
- Targets (`O`): The spots where boxes need to go.
- Boxes (`X`): These are what you need to push onto the targets.
- Player (`P`): That's you! You'll move around the grid to push boxes.
- Box on Target (`√`): A box successfully placed on a target.
- Player on Target (`S`): You standing on a target.

# Your Goal
Your goal is to push all the boxes (`X`) onto the target spots (`O`). Once all boxes are on the targets, you win!

# Rules
You can only push boxes. You can't pull them, so plan ahead to avoid getting stuck.
You can't walk through or push boxes into walls (`#`).
To avoid traps, do not push boxes into corners or against walls where they can't be moved again.

# Current Step
Prior to this step, you have already taken {step_count} step(s). Below are the most recent {history_length} observaitons and the corresponding actions you took: {action_history}
You are now at step {current_step} and your current observation is:
{current_observation}
Your admissible actions are ["up", "down", "left", "right"].

Now it's your turn to make a move (choose ONE action only for the current step).
You should first reason step-by-step about the current situation — observe the positions of boxes and targets, plan a path to push a box toward a target, and avoid traps like corners or walls. This reasoning process MUST be enclosed within <think> </think> tags. 
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""  # noqa: E501, W291

MANAGER_ACTION_LOOKUP = {0: "Still", 1: "Up", 2: "Down", 3: "Left", 4: "Right"}


def memory_fetch(records, history_length):
    """SimpleMemory.fetch for one environment: (memory_context, valid_len)."""
    recent = records[-history_length:]
    valid_len = len(recent)
    start_idx = len(records) - valid_len
    lines = []
    for j, rec in enumerate(recent):
        step_num = start_idx + j + 1
        act = rec["action"]
        obs = rec["text_obs"]
        lines.append(f"[Observation {step_num}: '{obs}', Action {step_num}: '{act}']")
    return "\n".join(lines), valid_len


def manager_prompts(env, seed, actions, history_length):
    """The text prompts SokobanEnvironmentManager (text mode) builds for one environment reset with `seed` and stepped
    with the action ids `actions`: one per step, the last after the last action."""
    obs, _ = env.reset(seed)
    pre_text_obs, memory = obs, []

    def build(text_obs, init):
        if init or history_length <= 0:
            return SOKOBAN_TEMPLATE_NO_HIS.format(current_observation=text_obs)
        memory_context, valid_len = memory_fetch(memory, history_length)
        return SOKOBAN_TEMPLATE.format(
            step_count=len(memory),
            history_length=valid_len,
            action_history=memory_context,
            current_step=len(memory) + 1,
            current_observation=text_obs,
        )

    prompts = [build(obs, init=True)]
    for action in actions:
        next_obs, _, _, _ = env.step(action)
        memory.append({"text_obs": pre_text_obs, "action": MANAGER_ACTION_LOOKUP[action]})
        pre_text_obs = next_obs
        prompts.append(build(next_obs, init=False))
    return prompts
