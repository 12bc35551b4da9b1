"""The adapter for an installed original WebShop, tested against a small fake of WebAgentTextEnv's interface."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

import scpo.envs
from scpo.envs.webshop.original import ORIGINAL_MISSING_MESSAGE, make_original_webshop, original_split_ranges


class FakeOriginal:
    """The parts of web_agent_site's WebAgentTextEnv the adapter uses: one product, scored 1.0 only with option
    'red'."""

    def __init__(self, n_goals=2000):
        self.server = SimpleNamespace(goals=[{"instruction_text": f"goal {i}"} for i in range(n_goals)])
        self.calls = []

    def reset(self, session=None):
        self.session, self.page, self.options = session, "search", []
        return f"WebShop [SEP] Instruction: [SEP] goal {session} [SEP] Search", None

    def get_instruction_text(self):
        return f"goal {self.session}"

    def get_available_actions(self):
        return {
            "search": {"has_search_bar": True, "clickables": ["search"]},
            "results": {"has_search_bar": False, "clickables": ["back to search", "b0001"]},
            "item": {"has_search_bar": False, "clickables": ["back to search", "< prev", "red", "blue", "buy now"]},
        }[self.page]

    def step(self, action):
        self.calls.append(action)
        if action.startswith("search[") and self.page == "search":
            self.page = "results"
        elif action.lower() == "click[b0001]" and self.page == "results":
            self.page = "item"
        elif action in ("click[red]", "click[blue]") and self.page == "item":
            self.options.append(action[6:-1])
        elif action == "click[buy now]" and self.page == "item":
            return "Thank you", (1.0 if self.options == ["red"] else 0.5), True, None
        return f"page {self.page}", 0.0, False, None


def test_split_ranges_are_webshops():
    assert original_split_ranges(12087) == {"test": (0, 500), "valid": (500, 1500), "train": (1500, 12087)}


def test_adapter_plays_an_episode_with_our_interface():
    fake = FakeOriginal()
    env = scpo.envs.make("webshop-original", task_id="webshop:test:00007", original=fake)
    obs, info = env.reset()
    assert fake.session == 7 and obs.endswith("Search")
    assert info["admissible_commands"] == ["search[<your query>]"]  # the bare "search" button is dropped
    assert (info["goal"], info["task_id"], info["won"], info["task_score"]) == (
        "goal 7",
        "webshop:test:00007",
        False,
        0.0,
    )
    _, reward, done, info = env.step("search[red mug]")
    assert (reward, done, info["action_valid"]) == (0.0, False, True)
    assert info["admissible_commands"] == ["click[back to search]", "click[b0001]"]
    _, _, _, info = env.step("click[green]")
    assert not info["action_valid"]
    env.step("click[B0001]")
    env.step("click[red]")
    _, reward, done, info = env.step("click[buy now]")
    assert (reward, done, info["won"], info["task_score"]) == (10.0, True, True, 1.0)
    with pytest.raises(RuntimeError):
        env.step("click[buy now]")


def test_partial_score_is_kept_and_max_steps_enforced():
    fake = FakeOriginal()
    env = make_original_webshop("webshop:train:01600", original=fake, max_steps=4)
    env.reset()
    for a in ["search[x]", "click[B0001]", "click[blue]"]:
        env.step(a)
    _, reward, done, info = env.step("click[buy now]")
    assert (reward, done, info["won"], info["task_score"]) == (0.0, True, False, 0.5)
    env.reset()
    for _ in range(3):
        assert not env.step("click[nothing]")[2]
    _, _, done, info = env.step("click[nothing]")
    assert done and info["task_score"] == 0.0


def test_task_outside_the_split_is_rejected():
    with pytest.raises(ValueError, match="not in the original's test split"):
        make_original_webshop("webshop:test:00600", original=FakeOriginal())


def test_env_factory_receives_the_options():
    built = {}

    def factory(**kwargs):
        built.update(kwargs)
        return FakeOriginal()

    make_original_webshop("webshop:valid:00500", env_factory=factory, num_products=1000)
    assert built == {"num_products": 1000}


def test_missing_original_gives_a_clear_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "web_agent_site", None)  # import fails as when it is not installed
    monkeypatch.setitem(sys.modules, "web_agent_site.envs", None)
    monkeypatch.setitem(sys.modules, "web_agent_site.envs.web_agent_text_env", None)
    with pytest.raises(ImportError, match="original WebShop is not installed") as err:
        scpo.envs.make("webshop-original", task_id="webshop:test:00000")
    assert str(err.value) == ORIGINAL_MISSING_MESSAGE
