"""The expert and random WebShop policies on the cpu-profile catalogue (2,000 products, 1,000 goals), and the candidate
searches of the admissible-choice policy."""

from __future__ import annotations

import pytest

from scpo.envs import webshop
from scpo.envs.webshop.catalogue import build_catalogue
from scpo.envs.webshop.env import format_task_id
from scpo.envs.webshop.policies import expert_query
from scpo.envs.webshop.queries import search_candidates


@pytest.fixture(scope="module")
def data_root(webshop_raw_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    build_catalogue(webshop_raw_dir, root / "webshop", n_products=2000, n_goals=1000, seed=0)
    return root


@pytest.fixture(scope="module")
def first_500(data_root):
    cat = webshop.load_catalogue(data_root)
    return cat, [format_task_id(cat.split_of(i), i) for i in range(500)]


def test_expert_query_drops_the_price_clause():
    assert expert_query("I need a Blue Mug, and price lower than 30.00 dollars") == "i need a blue mug"
    assert expert_query("Find me a mug") == "find me a mug"


def test_search_candidates_come_from_the_instruction_alone(first_500):
    cat, _ = first_500
    for g in cat.goals[:200]:
        cands = search_candidates(g)
        assert cands[0] == expert_query(g.instruction) and len(set(cands)) == len(cands) == 5
        words = set(expert_query(g.instruction).split())
        assert all(set(c.split()) <= words for c in cands)  # nothing the agent cannot read
        assert search_candidates(g) == cands  # fixed per goal: every method sees the same menu
        option_text = ", and ".join(f"{k}: {v}" for k, v in g.goal_options.items())
        if option_text:
            assert cands[1] == cands[0][: -len(" with " + option_text)]
    with pytest.raises(ValueError, match="n must be >= 1"):
        search_candidates(cat.goals[0], n=0)


def test_expert_scores_one_on_every_goal(data_root, first_500):
    cat, tasks = first_500
    wins = 0
    for task_id in tasks:
        actions = webshop.expert_actions(task_id, data_root, catalogue=cat)
        env = webshop.make_env(task_id, data_root, catalogue=cat)
        env.reset()
        for action in actions:  # replayed from reset, the actions solve the task
            _, reward, done, info = env.step(action)
        wins += info["won"] and reward == 10.0 and done
    assert wins == len(tasks)


def test_expert_demo_shape(data_root, first_500):
    cat, tasks = first_500
    goal = cat.goals[0]
    actions = webshop.expert_actions(tasks[0], data_root, catalogue=cat)
    assert actions[0] == f"search[{expert_query(goal.instruction)}]"
    assert f"click[{goal.asin.lower()}]" in actions
    assert actions[-len(goal.goal_options) - 1 :] == [f"click[{o}]" for o in goal.option_values] + ["click[buy now]"]


def test_random_policy_stays_near_zero_and_is_seeded(first_500):
    cat, tasks = first_500
    results = [
        webshop.run_episode(webshop.make_env(t, catalogue=cat), webshop.RandomPolicy(seed=k))
        for k, t in enumerate(tasks)
    ]
    success = sum(r["won"] for r in results) / len(results)
    assert success < 0.05
    assert all(r["steps"] <= 15 for r in results)
    again = [
        webshop.run_episode(webshop.make_env(t, catalogue=cat), webshop.RandomPolicy(seed=k))
        for k, t in enumerate(tasks[:20])
    ]
    assert again == results[:20]


def test_expert_demos_are_valid_model_answers(data_root, first_500):
    """Each expert action, wrapped in the answer format, projects to itself and is admissible where it is taken."""
    cat, tasks = first_500
    for task_id in tasks[:50]:
        env = webshop.make_env(task_id, catalogue=cat)
        obs, info = env.reset()
        history = []
        for step, action in enumerate(webshop.expert_actions(task_id, data_root, catalogue=cat)):
            prompt = webshop.build_prompt(info["goal"], obs, info["admissible_commands"], history, step)
            assert "Your admissible actions" in prompt
            projected, valid = webshop.project_action(
                f"<think>plan</think><action>{action}</action>", info["admissible_commands"]
            )
            assert (projected, valid) == (action, True), (task_id, action)
            history.append((obs, action))
            obs, _, _, info = env.step(projected)
            assert info["action_valid"]


def test_the_sampler_chooses_among_candidate_searches_while_the_prompt_keeps_the_placeholder(data_root, first_500):
    """The collector hands an admissible-choice engine the env's `choice_commands`: on the search page, the goal's
    candidate searches instead of the unchoosable "search[<your query>]"; the prompt still shows verl-agent's list."""
    from scpo.rollout import collect_rollouts
    from scpo.rollout.engine import Generation

    cat, tasks = first_500

    class RecordingEngine:
        def __init__(self):
            self.seen = []

        def generate(self, prompts, temperature, top_p=1.0, admissible=None):
            self.seen.append((list(prompts), [list(a) for a in admissible]))
            return [Generation(text=f"<action>{a[0]}</action>") for a in admissible]

        def sync_weights(self, policy):
            pass

    engine = RecordingEngine()
    trajs, _ = collect_rollouts(
        webshop, tasks[:2], 2, engine, env_name="webshop", data_root=str(data_root), max_steps=3, progress=False
    )
    prompts, choices = engine.seen[0]
    for task_id, prompt, choice in zip([t for t in tasks[:2] for _ in range(2)], prompts, choices):
        goal = cat.goals[int(task_id.split(":")[2])]
        assert choice == [f"search[{q}]" for q in search_candidates(goal)]
        assert "'search[<your query>]'" in prompt and "search[" + search_candidates(goal)[1] not in prompt
    # the first choice (the expert's search) was taken and is a valid step
    assert all(
        t.steps[0].action == f"search[{search_candidates(cat.goals[int(t.task_id.split(':')[2])])[0]}]"
        and t.steps[0].valid
        for t in trajs
    )


def test_tiny_tokenizer_folds_case_for_webshop_so_a_shown_asin_is_the_clicked_one():
    from scpo.policy.tiny import TAG_TOKENS, train_tokenizer

    corpus = ["Instruction: [SEP] find a mug [SEP] B09RPRRNVP [SEP] Plain Mug", "<action>click[b09rprrnvp]</action>"]
    folded = train_tokenizer(corpus, vocab_size=300, fixed_phrases=webshop.PROMPT_PHRASES, lowercase=True)
    assert webshop.SPEC.tokenizer_lowercase is True
    assert folded.tokenize("B09RPRRNVP") == folded.tokenize("b09rprrnvp")
    assert folded.tokenize("<action>x</action>") == ["<action>", "x", "</action>"] and "</action>" in TAG_TOKENS
    phrase = next(p for p in webshop.PROMPT_PHRASES if any(c.isupper() for c in p))
    assert len(folded.tokenize(phrase)) == 1  # the template's fixed phrases stay single tokens
    cased = train_tokenizer(corpus, vocab_size=300)  # the default (ALFWorld) keeps case
    assert cased.tokenize("B09RPRRNVP") != cased.tokenize("b09rprrnvp")
