"""Environments' state descriptions (`info["state_description"]`): ALFWorld's tracked string worked by hand and on a
real game, WebShop's page without its instruction, and the collector and RolloutBatch carrying them to the parquet."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.batch import RolloutBatch, Step, Trajectory
from scpo.envs.alfworld.state_description import AlfworldStateTracker
from scpo.envs.base import STATE_DESCRIPTION
from scpo.envs.webshop.pages import without_instruction


def test_alfworld_description_follows_the_agent_by_hand():
    t = AlfworldStateTracker()
    assert t.describe("obs", ["look", "go to desk 1"]) == (
        "obs Location: middle of a room. Items in hand (status): nothing.  go to desk 1,look"
    )
    script = [
        ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a mug 1."),
        ("take mug 1 from countertop 1", "You pick up the mug 1 from the countertop 1."),
    ]
    for action, obs in script:
        t.update(action, obs)
    assert t.describe("o", []) == "o Location: countertop 1. Items in hand (status): mug 1(unprocessed).  "
    t.update("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed.")
    t.update("heat mug 1 with microwave 1", "You heat the mug 1 using the microwave 1.")
    assert t.describe("o", ["b", "a"]) == "o Location: microwave 1. Items in hand (status): mug 1(heated).  a,b"
    t.update("go to coffeemachine 1", "You arrive at coffeemachine 1.")
    t.update("move mug 1 to coffeemachine 1", "You move the mug 1 to the coffeemachine 1.")
    assert t.describe("o", []) == (
        "o Location: coffeemachine 1. Items in hand (status): nothing. History moving list by you: "
        "mug 1(heated) from countertop 1 move to coffeemachine 1; "
    )
    # picking it up again resets its last place to its first (the recipe's rule); a held item is not listed
    t.update("take mug 1 from coffeemachine 1", "You pick up the mug 1 from the coffeemachine 1.")
    assert t.describe("o", []) == "o Location: coffeemachine 1. Items in hand (status): mug 1(heated).  "
    t.update("put mug 1 on sinkbasin 1", "You put the mug 1 on the sinkbasin 1.")  # the older "put" wording
    assert t.holding == "nothing" and t.places["mug 1"]["new_location"] == "coffeemachine 1"
    # "Nothing happens" changes nothing; slicing records "sliced" next to the recipe's unused "slice" flag
    t.update("go to fridge 1", "Nothing happens.")
    t.update("slice apple 1 with knife 1", "You slice the apple 1 with the knife 1.")
    assert t.location == "coffeemachine 1"
    assert t.changes["apple 1"] == {"heated": False, "cooled": False, "cleaned": False, "slice": False, "sliced": True}
    t.update("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1.")
    assert "Items in hand (status): apple 1(sliced)." in t.describe("o", [])
    t.reset()
    assert t.describe("x", []) == "x Location: middle of a room. Items in hand (status): nothing.  "


def test_alfworld_held_status_gathers_every_record_whose_name_is_in_the_held_name():
    t = AlfworldStateTracker()
    t.update("cool pan 1 with fridge 1", "You cool the pan 1 using the fridge 1.")
    t.update("take pan 10 from stoveburner 1", "You pick up the pan 10 from the stoveburner 1.")
    assert "Items in hand (status): pan 10(cooled)." in t.describe("o", [])  # "pan 1" occurs in "pan 10"
    t.update("clean cloth 1 with sinkbasin 1", "Nothing happens.")
    t.update("clean cloth 1 with sinkbasin 1", "You wash the cloth 1.")  # the verb must appear in the observation
    assert "cloth 1" not in t.changes


def test_alfworld_env_gives_the_description_on_a_real_game(alfworld_games_root):
    import scpo.envs.alfworld as alfworld

    root = alfworld_games_root.parent
    task = next(t for t in alfworld.list_tasks("train", data_root=root) if "heat" in t)
    env = alfworld.make_env(task, root)
    obs, info = env.reset()
    hand = "Location: middle of a room. Items in hand (status): nothing."
    assert info[STATE_DESCRIPTION] == f"{obs} {hand}  {','.join(sorted(info['admissible_commands']))}"
    for action in alfworld.expert_actions(task, root)[:4]:
        obs, _, _, info = env.step(action)
    assert action.startswith("heat mug 2")
    hand = "Location: microwave 1. Items in hand (status): mug 2(heated)."
    assert info[STATE_DESCRIPTION] == f"{obs} {hand}  {','.join(sorted(info['admissible_commands']))}"
    env.reset()
    env.step(alfworld.expert_actions(task, root)[0])
    obs, _, _, info = env.step("teleport")  # not a command: nothing happens, nothing changes
    assert (
        obs == "Nothing happens."
        and "Location: coffeemachine 1. Items in hand (status): nothing." in info[STATE_DESCRIPTION]
    )


def test_webshop_description_is_the_page_after_its_instruction():
    page = "Instruction: [SEP] find a mug [SEP] Back to Search [SEP] Page 1 (Total results: 2) [SEP] Next >"
    assert (
        without_instruction(page, "find a mug") == "'Back to Search' [SEP] 'Page 1 (Total results: 2)' [SEP] 'Next >'"
    )
    assert without_instruction("WebShop [SEP] Instruction: [SEP] find a mug [SEP] Search", "find a mug") == "'Search'"
    done = "Thank you for shopping with us! [SEP] Your code: [SEP] None"
    assert without_instruction(done, "find a mug") == done


def test_webshop_env_gives_the_description(webshop_handmade_dir, tmp_path):
    from scpo.envs import webshop
    from scpo.envs.webshop.catalogue import build_catalogue
    from scpo.envs.webshop.env import WebShopEnv

    build_catalogue(webshop_handmade_dir, tmp_path / "webshop", n_products=10, n_goals=None, seed=0)
    cat = webshop.load_catalogue(tmp_path)
    env = WebShopEnv(cat, goal_index=0)
    obs, info = env.reset()
    goal = obs.split(" [SEP] ")[2]
    assert info[STATE_DESCRIPTION] == "'Search'"
    obs, _, _, info = env.step("search[shorts]")
    assert info[STATE_DESCRIPTION] == without_instruction(obs, goal) and info[STATE_DESCRIPTION].startswith("'Back")


def test_collector_records_descriptions_and_the_batch_keeps_them(alfworld_games_root, tmp_path):
    import scpo.envs.alfworld as alfworld
    from scpo.rollout import collect_rollouts
    from scpo.rollout.generation import Generation

    class First:
        def generate(self, prompts, temperature=1.0, top_p=1.0, admissible=None):
            return [Generation(text=f"<action>{adm[0]}</action>") for adm in admissible]

    root = alfworld_games_root.parent
    task = alfworld.list_tasks("valid_seen", data_root=root)[0]
    trajs, _ = collect_rollouts(
        alfworld, [task], 2, First(), env_name="alfworld", data_root=str(root), max_steps=3, progress=False
    )
    steps = trajs[0].steps
    assert all(s.state_description.startswith(s.observation) for s in steps)
    assert [s.next_state_description for s in steps[:-1]] == [s.state_description for s in steps[1:]]
    b = RolloutBatch.from_trajectories(trajs)
    back = RolloutBatch.read(b.to_parquet(tmp_path / "r.parquet"))
    np.testing.assert_array_equal(back.state_description, b.state_description)
    np.testing.assert_array_equal(
        back.next_state_description, [s.next_state_description for t in trajs for s in t.steps]
    )
    assert back.select(back.step == 0).state_description.tolist() == [t.steps[0].state_description for t in trajs]
    assert back.to_trajectories()[0].steps[1].state_description == steps[1].state_description


def test_a_batch_with_descriptions_on_some_steps_only_is_refused():
    def traj(desc):
        return Trajectory("t", 0, 0, [Step("o", "a", 0.0, "n", state_description=d) for d in desc])

    with pytest.raises(ValueError, match="1 of 2 steps lack state_description; label all or none"):
        RolloutBatch.from_trajectories([traj(["x", None])])
    assert RolloutBatch.from_trajectories([traj([None, None])]).state_description is None


def test_alfworld_moves_list_by_hand():
    t = AlfworldStateTracker()
    steps = [
        ("go to desk 1", "You arrive at desk 1."),
        ("take pen 1 from desk 1", "You pick up the pen 1 from the desk 1."),
        ("go to shelf 1", "You arrive at shelf 1."),
        ("move pen 1 to shelf 1", "You move the pen 1 to the shelf 1."),  # moved, never changed
        ("take book 2 from shelf 1", "You pick up the book 2 from the shelf 1."),
        ("drop book 2", "You drop the book 2."),  # put back where it was found: not listed
        ("take cup 3 from shelf 1", "You pick up the cup 3 from the shelf 1."),
        ("go to fridge 1", "You arrive at fridge 1."),
        ("cool cup 3 with fridge 1", "You cool the cup 3 using the fridge 1."),
        ("go to microwave 1", "You arrive at microwave 1."),
        ("heat cup 3 with microwave 1", "You heat the cup 3 using the microwave 1."),
    ]
    for action, obs in steps:
        t.update(action, obs)
    assert t.describe("o", []) == (
        "o Location: microwave 1. Items in hand (status): cup 3(heated cooled). History moving list by you: "
        "pen 1(unprocessed) from desk 1 move to shelf 1; "
    )
    t.update("drop cup 3", "You drop the cup 3.")  # changed and not in hand: listed, though not moved
    assert t.describe("o", []).endswith(
        "History moving list by you: pen 1(unprocessed) from desk 1 move to shelf 1;"
        "cup 3(heated cooled) from shelf 1 move to microwave 1; "
    )
