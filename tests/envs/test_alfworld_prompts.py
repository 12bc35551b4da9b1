"""verl-agent style prompts and the text -> action projection (pure, never raises)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scpo.envs.alfworld import build_prompt, project_action
from scpo.envs.alfworld.prompts import MAX_ACTION_CHARS

ADMISSIBLE = ["go to desk 1", "help", "inventory", "look"]


def test_first_step_prompt_has_task_observation_actions_and_format():
    p = build_prompt("put a mug in desk.", "You are in the middle of a room.", ADMISSIBLE, [], step=0)
    assert "Your task is to: put a mug in desk." in p and "Your current observation is: You are in the middle" in p
    assert "['go to desk 1', 'inventory', 'look']" in p  # 'help' is hidden, as in verl-agent
    assert "<think> </think>" in p and "<action> </action>" in p and "Prior to this step" not in p


def test_history_prompt_shows_the_last_two_pairs_numbered_by_step():
    history = [("o1", "a1"), ("o2", "a2"), ("o3", "a3")]
    p = build_prompt("g", "o4", ADMISSIBLE, history, step=3, history_length=2)
    assert "already taken 3 step(s)" in p and "most recent 2 observations" in p
    assert "[Observation 2: 'o2', Action 2: 'a2']\n[Observation 3: 'o3', Action 3: 'a3']" in p
    assert "o1" not in p and "You are now at step 4 and your current observation is: o4" in p


def test_projection_valid_invalid_and_malformed():
    assert project_action("<think>x</think><action>go to desk 1</action>", ADMISSIBLE) == ("go to desk 1", True)
    assert project_action("<action>  Go   to DESK 1 </action>", ADMISSIBLE) == ("go to desk 1", True)
    assert project_action("<action>look</action> then <action>inventory</action>", ADMISSIBLE) == ("inventory", True)
    assert project_action("<action>go to sofa 1</action>", ADMISSIBLE) == ("go to sofa 1", False)
    assert project_action("go to desk 1", ADMISSIBLE) == ("", False)
    assert project_action("<action>go to desk 1", ADMISSIBLE) == ("", False)
    assert project_action(None, ADMISSIBLE) == ("", False)
    assert project_action("<action>" + "x" * 10_000 + "</action>", ADMISSIBLE) == ("x" * MAX_ACTION_CHARS, False)


@settings(max_examples=200, deadline=None)
@given(st.text(), st.lists(st.text(max_size=20), max_size=5))
def test_projection_never_raises(text, admissible):
    action, valid = project_action(text, admissible)
    assert isinstance(action, str) and len(action) <= MAX_ACTION_CHARS and isinstance(valid, bool)
    assert not valid or action in admissible


def test_template_phrases_are_the_fixed_text_between_fields():
    from scpo.envs.prompting import template_phrases

    got = template_phrases(
        "You are an agent. Your task is to: {goal}\nSee {obs} and act. <action> </action> ok then go",
        keep_apart=("<action>", "</action>"),
    )
    assert got == (" ok then go", "You are an agent. Your task is to: ")
