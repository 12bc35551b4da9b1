"""Free-text generation (the gpu profile) sees verl-agent's prompts and validity rules exactly: the same observations
rendered with `style="verl_agent"` and with a transcription of verl-agent's templates and code
(agent_system/environments/prompts/alfworld.py, webshop.py; env_manager.py's `build_text_obs`, `format_obs`,
`format_avail_actions`; memory.py's `SimpleMemory.fetch`; env_package/*/projection.py) are the same text, and answers
project to the same (action, valid). The admissible-choice path (the tiny CPU policy) keeps this package's prompts,
which differ from verl-agent's exactly where docs/gpu.md's recipe table says."""

from __future__ import annotations

import re

import pytest

from scpo.envs import alfworld, webshop
from scpo.rollout.collector import prompt_style

# ------------------------------------------------------------------ transcription of verl-agent (the reference)
ALFWORLD_TEMPLATE_NO_HIS = """
You are an expert agent operating in the ALFRED Embodied Environment.
Your current observation is: {current_observation}
Your admissible actions of the current situation are: [{admissible_actions}].

Now it's your turn to take an action.
You should first reason step-by-step about the current situation. This reasoning process MUST be enclosed within <think> </think> tags. 
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""  # noqa: W291, E501

ALFWORLD_TEMPLATE = """
You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: {task_description}
Prior to this step, you have already taken {step_count} step(s). Below are the most recent {history_length} observations and the corresponding actions you took: {action_history}
You are now at step {current_step} and your current observation is: {current_observation}
Your admissible actions of the current situation are: [{admissible_actions}].

Now it's your turn to take an action.
You should first reason step-by-step about the current situation. This reasoning process MUST be enclosed within <think> </think> tags. 
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""  # noqa: W291, E501

WEBSHOP_TEMPLATE_NO_HIS = """
You are an expert autonomous agent operating in the WebShop e\u2011commerce environment. 
Your task is to: {task_description}.
Your current observation is: {current_observation}.
Your admissible actions of the current situation are: 
[
{available_actions}
].

Now it's your turn to take one action for the current step.
You should first reason step-by-step about the current situation, then think carefully which admissible action best advances the shopping goal. This reasoning process MUST be enclosed within <think> </think> tags. 
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""  # noqa: W291, E501

WEBSHOP_TEMPLATE = """
You are an expert autonomous agent operating in the WebShop e\u2011commerce environment.
Your task is to: {task_description}.
Prior to this step, you have already taken {step_count} step(s). Below are the most recent {history_length} observations and the corresponding actions you took: {action_history}
You are now at step {current_step} and your current observation is: {current_observation}.
Your admissible actions of the current situation are: 
[
{available_actions}
].

Now it's your turn to take one action for the current step.
You should first reason step-by-step about the current situation, then think carefully which admissible action best advances the shopping goal. This reasoning process MUST be enclosed within <think> </think> tags. 
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""  # noqa: W291, E501


def fetch(memory: list[dict], history_length: int) -> tuple[str, int]:
    """SimpleMemory.fetch for one environment."""
    recent = memory[-history_length:]
    start = len(memory) - len(recent)
    lines = [
        f"[Observation {start + j + 1}: '{rec['text_obs']}', Action {start + j + 1}: '{rec['action']}']"
        for j, rec in enumerate(recent)
    ]
    return "\n".join(lines), len(recent)


def alfworld_text_obs(text_obs, admissible, memory, task, init, history_length=2):
    """AlfWorldEnvironmentManager.build_text_obs for one environment."""
    adm = "\n ".join(f"'{s}'" for s in admissible if s != "help")
    if init or history_length <= 0:
        return ALFWORLD_TEMPLATE_NO_HIS.format(current_observation=text_obs, admissible_actions=adm)
    history, n = fetch(memory, history_length)
    return ALFWORLD_TEMPLATE.format(task_description=task, step_count=len(memory), history_length=n,
                                    action_history=history, current_step=len(memory) + 1,
                                    current_observation=text_obs, admissible_actions=adm)  # fmt: skip


def alfworld_projection(action: str) -> tuple[str, int]:
    original = action
    action = action.lower()
    start, end = action.find("<action>"), action.find("</action>")
    if start == -1 or end == -1:
        return action[-30:], 0
    action, valid = action[start + len("<action>") : end].strip().lower(), 1
    if original.find("<think>") == -1 or original.find("</think>") == -1:
        valid = 0
    if re.search(r"[\u4e00-\u9fff]", original):
        valid = 0
    return action, valid


def webshop_format_obs(text_obs: str, task: str) -> str:
    parts = text_obs.split(" [SEP] ")
    try:
        index = parts.index(task)
        return " [SEP] ".join(f"'{p}'" for p in parts[index + 1 :])
    except ValueError:
        return text_obs


def webshop_text_obs(text_obs, available, memory, task, init, history_length=2):
    """WebshopEnvironmentManager.build_text_obs for one environment (`text_obs` and memory already formatted)."""
    avail = "\n".join(f"'{s}'," for s in available)
    if init or history_length <= 0:
        return WEBSHOP_TEMPLATE_NO_HIS.format(task_description=task, current_observation=text_obs,
                                              available_actions=avail)  # fmt: skip
    history, n = fetch(memory, history_length)
    obs = WEBSHOP_TEMPLATE.format(task_description=task, step_count=len(memory), history_length=n,
                                  action_history=history, current_step=len(memory) + 1, current_observation=text_obs,
                                  available_actions=avail)  # fmt: skip
    if len(obs) > 13000:
        obs = WEBSHOP_TEMPLATE_NO_HIS.format(task_description=task, current_observation=text_obs,
                                             available_actions=avail)  # fmt: skip
    return obs


def webshop_projection(action: str) -> tuple[str, int]:
    original = action
    action = action.lower()
    start, end = action.find("<action>"), action.find("</action>")
    if start == -1 or end == -1:
        return action[-20:], 0
    action, valid = action[start + len("<action>") : end].strip().lower(), 1
    if original.find("<think>") == -1 or original.find("</think>") == -1:
        valid = 0
    return action, valid


# ---------------------------------------------------------------------------------------------- one episode each
GOAL = "look at alarmclock under the desklamp."
OBS0 = ("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see a "
        "bed 1, a desk 1, a drawer 1, and a shelf 1.\n\nYour task is to: " + GOAL)  # fmt: skip
OBS = [OBS0, "You arrive at desk 1. On the desk 1, you see a alarmclock 1, and a desklamp 1.", "Nothing happens.",
       "You pick up the alarmclock 1 from the desk 1."]  # fmt: skip
ADM = ["go to bed 1", "go to desk 1", "help", "inventory", "look", "take alarmclock 1 from desk 1"]
ANSWERS = [
    "<think>The clock is on the desk.</think><action>go to desk 1</action>",
    "I will just look around without any tags at all, sorry",  # invalid: the last 30 characters go on
    "<think>Take it.</think> <action>Take Alarmclock 1 from desk 1</action> <action>look</action>",
]


def test_alfworld_episode_renders_as_verl_agent_does():
    memory, history = [], []
    for step, answer in enumerate(ANSWERS + [None]):
        ours = alfworld.build_prompt(GOAL, OBS[step], ADM, history, step, history_length=2, style="verl_agent")
        theirs = alfworld_text_obs(OBS[step], ADM, memory, GOAL, init=step == 0)
        assert ours == theirs, (step, ours, theirs)
        if answer is None:
            break
        action, valid = alfworld.project_action(answer, ADM, style="verl_agent")
        assert (action, int(valid)) == alfworld_projection(answer)
        memory.append({"text_obs": OBS[step], "action": action})
        history.append((OBS[step], action))
    assert f"Action 2: '{ANSWERS[1].lower()[-30:]}']" in ours  # an invalid answer's tail, as verl-agent keeps it


@pytest.mark.parametrize(
    "answer",
    [
        "<think>a</think><action>go to desk 1</action>",
        "<action>go to desk 1</action>",  # no reasoning: invalid in verl-agent
        "<think>让我想想</think><action>go to desk 1</action>",  # CJK: invalid
        "<think>a</think><action>fly to the moon</action>",  # inadmissible, well formed: valid in verl-agent
        "</action> then <action>look",
        "",
        "<THINK>a</THINK><ACTION>look</ACTION>",
    ],
)
def test_alfworld_projection_is_verl_agents(answer):
    action, valid = alfworld.project_action(answer, ADM, style="verl_agent")
    assert (action, int(valid)) == alfworld_projection(answer)


WS_GOAL = "Find me space saving end tables with color: cherry, and price lower than 40.00 dollars"
WS_OBS = [
    f"WebShop [SEP] Instruction: [SEP] {WS_GOAL} [SEP] Search",
    f"Instruction: [SEP] {WS_GOAL} [SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] "
    "B01N775QMD [SEP] Sokosa End Table [SEP] $10.99",
    f"Instruction: [SEP] {WS_GOAL} [SEP] Back to Search [SEP] < Prev [SEP] color [SEP] cherry [SEP] Buy Now",
]
WS_ADM = [["search[<your query>]"], ["click[back to search]", "click[next >]", "click[b01n775qmd]"],
          ["click[back to search]", "click[< prev]", "click[cherry]", "click[buy now]"]]  # fmt: skip
WS_ANSWERS = ["<think>search</think><action>search[cherry end table]</action>", "<action>click[b01n775qmd]</action>"]


@pytest.mark.parametrize("long_page", [False, True], ids=["page", "page_over_13000_characters"])
def test_webshop_episode_renders_as_verl_agent_does(long_page):
    obs = list(WS_OBS)
    if long_page:
        obs[2] = obs[2] + " [SEP] " + "x" * 13_000
    memory, history = [], []
    for step in range(3):
        ours = webshop.build_prompt(WS_GOAL, obs[step], WS_ADM[step], history, step, history_length=2,
                                    style="verl_agent")  # fmt: skip
        theirs = webshop_text_obs(webshop_format_obs(obs[step], WS_GOAL), WS_ADM[step], memory, WS_GOAL, step == 0)
        assert ours == theirs, (step, ours, theirs)
        if step < 2:
            action, valid = webshop.project_action(WS_ANSWERS[step], WS_ADM[step], style="verl_agent")
            assert (action, int(valid)) == webshop_projection(WS_ANSWERS[step])
            memory.append({"text_obs": webshop_format_obs(obs[step], WS_GOAL), "action": action})
            history.append((obs[step], action))
    assert ("Prior to this step" in ours) is not long_page


def test_this_packages_prompts_differ_where_the_recipe_table_says():
    """The admissible-choice path's prompts (every CPU profile): the task line before the first step too (its
    observation already ends with it), the commands comma-separated, history items each after a line break, no
    leading line break; and its validity: the last action tag, admissible, no <think> needed."""
    ours = alfworld.build_prompt(GOAL, OBS0, ADM, [], 0)
    theirs = alfworld_text_obs(OBS0, ADM, [], GOAL, init=True)
    assert ours.count("Your task is to: " + GOAL) == 2 and theirs.count("Your task is to: " + GOAL) == 1
    assert "'go to bed 1', 'go to desk 1'" in ours and "'go to bed 1'\n 'go to desk 1'" in theirs
    assert not ours.startswith("\n") and theirs.startswith("\n")
    assert alfworld.project_action("<action>go to desk 1</action>", ADM) == ("go to desk 1", True)
    assert alfworld.project_action("<think>a</think><action>fly</action>", ADM) == ("fly", False)
    assert alfworld.project_action("no tags at all", ADM) == ("", False)


def test_free_text_engines_take_verl_agents_prompts_and_the_admissible_choice_keeps_ours():
    from scpo.envs import corridor
    from scpo.rollout.engine import TransformersEngine

    free = TransformersEngine(None, 16, 4, action_choice="generate")
    choice = TransformersEngine(None, 16, 4, action_choice="admissible")
    assert prompt_style(alfworld, free) == "verl_agent" and prompt_style(webshop, free) == "verl_agent"
    assert prompt_style(alfworld, choice) == "scpo"
    assert prompt_style(alfworld, object()) == "scpo"  # an engine that says nothing
    assert prompt_style(corridor, free) == "scpo"  # an environment without verl-agent's prompts
