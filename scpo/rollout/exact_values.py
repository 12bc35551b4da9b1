"""The policy's exact success values where an environment's states can be enumerated (its `EnvSpec.tabular` model:
the corridor): the nodes a task can reach within the step budget (`scpo.rollout.exact_dp`), the policy's action
probabilities at every one of them, and the dynamic programme over them (docs/algorithms.md, "Exact on-policy ground
truth").

    table = exact_table(policy, "corridor", tasks, max_steps=12, history_length=2)   # V, Q, d over every node
    v = exact_values(batch, policy, "corridor", max_steps=12, history_length=2)   # the batch's `exact_value` column

The policy is the admissible-choice sampler (`rollout.action_choice: admissible`, `scpo.rollout.engine`): at a node,
candidate k is the answer `<action>a_k</action>` + EOS, scored by its sequence log-likelihood s_k under the prompt the
collector builds there (`build_prompt` of the environment, the last H (observation, action) pairs, the step number),
encoded as the engine encodes it (`Policy.encode_prompts` with the prompt budget and overflow rule), and

    pi(a_k | n) = softmax_k(s / T)       (T the rollout temperature; T = 0: the engine's greedy choice, one-hot)

(`scpo.policy.scoring`; the sampler does not apply top_p). Every distinct prompt is scored once, in chunks, without
gradients. A freely generated answer (`rollout.action_choice: generate`) has no distribution over the admissible
commands that could be enumerated (and invalid answers are possible): its rollouts are refused.

History: the DP's nodes carry the window of the last H (observation, action) pairs the prompt shows, so the values
are exact for every `env.history_length` (with H = 0 a node is the step and the state). The step number is in the
prompt, so the policy is a function of the node, not of the state alone. Rewards are not read: the objective is
success (reward shaping, where an environment has it, is ignored).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from scpo.batch import RolloutBatch
from scpo.envs.prompting import action_answer
from scpo.envs.registry import env_package, env_spec
from scpo.policy.interface import PolicyLike
from scpo.policy.scoring import candidate_scores, choice_log_distribution
from scpo.rollout.exact_dp import (
    PolicyGraph,
    build_graph,
    edge_probabilities,
    node_distribution,
    success_values,
)

__all__ = [
    "ChoiceInputs",
    "ExactTable",
    "choice_inputs",
    "choice_log_probs",
    "policy_log_probs",
    "exact_graph",
    "exact_table",
    "solve",
    "row_nodes",
    "exact_values",
]

SCORE_CHUNK = 512  # distinct prompts per scoring call (one progress-bar unit each)


@dataclass
class ChoiceInputs:
    """The policy's view of a graph's nodes, as the engine encodes it: per distinct prompt (a row) its token ids and
    its candidates' (answer + EOS), and per node the row it reads (`node_row`)."""

    prompt_ids: list[list[int]]
    candidates: list[list[list[int]]]
    node_row: np.ndarray
    pad_id: int

    @property
    def width(self) -> int:
        """The most candidates of a row (the columns of the log-probabilities)."""
        return max(len(c) for c in self.candidates)


def choice_inputs(
    policy: PolicyLike, graph: PolicyGraph, max_prompt_tokens: int = 1024, prompt_overflow: str = "truncate_left"
) -> ChoiceInputs:
    """`ChoiceInputs` of every node of `graph`: each distinct prompt tokenised once (`Policy.encode_prompts`), each
    distinct answer once (`<action>a</action>` + EOS, as `TransformersEngine` tokenises it)."""
    tok = policy.tokenizer
    rows: dict[str, int] = {}
    node_row = np.array([rows.setdefault(p, len(rows)) for p in graph.prompt], dtype=np.int64)
    first = np.unique(node_row, return_index=True)[1]
    commands = [graph.commands[n] for n in first]
    prompt_ids = policy.encode_prompts(list(rows), max_prompt_tokens, prompt_overflow)
    answers = sorted({action_answer(c) for cmds in commands for c in cmds})
    ids = {
        a: list(x) + [tok.eos_token_id] for a, x in zip(answers, tok(answers, add_special_tokens=False)["input_ids"])
    }
    candidates = [[ids[action_answer(c)] for c in cmds] for cmds in commands]
    return ChoiceInputs(prompt_ids, candidates, node_row, tok.pad_token_id)


def choice_log_probs(model, inputs: ChoiceInputs, rows: Sequence[int], temperature: float) -> torch.Tensor:
    """log pi(k | row) [len(rows), inputs.width] for the rows `rows` (-inf beyond a row's candidates), on the model's
    device; gradients flow unless under `torch.no_grad()`. `temperature` > 0 (the sampler's T)."""
    if not temperature > 0:
        raise ValueError(f"temperature={temperature!r}: the choice distribution needs T > 0 (T = 0 is greedy)")
    rows = list(rows)
    scores = candidate_scores(
        model, [inputs.prompt_ids[r] for r in rows], [inputs.candidates[r] for r in rows], inputs.pad_id
    )
    log_pi = choice_log_distribution(scores, temperature)
    pad = inputs.width - log_pi.shape[1]
    return torch.nn.functional.pad(log_pi, (0, pad), value=float("-inf")) if pad else log_pi


def policy_log_probs(
    model, inputs: ChoiceInputs, temperature: float, progress: bool = True, desc: str = "exact pi"
) -> np.ndarray:
    """log pi(k | n) [n_nodes, width] (float64) at every node, without gradients: every distinct prompt scored once,
    `SCORE_CHUNK` at a time. `temperature` 0 gives the engine's greedy choice (log 1 at the first best score)."""
    n_rows = len(inputs.prompt_ids)
    out = np.full((n_rows, inputs.width), -np.inf)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in tqdm(
                range(0, n_rows, SCORE_CHUNK), desc=desc, unit="chunk", disable=not progress, leave=False
            ):
                rows = range(start, min(start + SCORE_CHUNK, n_rows))
                log_pi = choice_log_probs(model, inputs, rows, temperature or 1.0).double().cpu().numpy()
                if temperature == 0:
                    greedy = np.full_like(log_pi, -np.inf)
                    greedy[np.arange(len(log_pi)), log_pi.argmax(1)] = 0.0
                    log_pi = greedy
                out[start : start + len(rows)] = log_pi
    finally:
        model.train(was_training)
    return out[inputs.node_row]


@dataclass
class ExactTable:
    """A policy's exact solution on a graph: `log_probs` [n_nodes, K] and `p` [n_edges] (its action probabilities),
    `v` [n_nodes] and `q` [n_edges] (success values), `d` [n_nodes] (node distribution), at `temperature`."""

    graph: PolicyGraph
    log_probs: np.ndarray
    p: np.ndarray
    v: np.ndarray
    q: np.ndarray
    d: np.ndarray
    temperature: float

    @property
    def success(self) -> np.ndarray:
        """Per task, V_0 at its root: the probability that an episode wins within the budget."""
        return self.v[self.graph.roots]

    @property
    def advantage(self) -> np.ndarray:
        """Per edge, A(n, a) = Q(n, a) - V(n)."""
        return self.q - self.v[self.graph.source]


def solve(graph: PolicyGraph, log_probs: np.ndarray, temperature: float = 1.0) -> ExactTable:
    """The `ExactTable` of action log-probabilities `log_probs` [n_nodes, K] on `graph`."""
    p = edge_probabilities(graph, log_probs)
    v, q = success_values(graph, p)
    return ExactTable(graph, np.asarray(log_probs, np.float64), p, v, q, node_distribution(graph, p), temperature)


def exact_graph(
    env_name: str,
    tasks: Sequence[str],
    *,
    max_steps: int,
    history_length: int,
    data_root: str = "data",
    env_options: dict | None = None,
) -> PolicyGraph:
    """The reachable nodes of `tasks` of environment `env_name` within `max_steps` (its declared tabular model)."""
    spec = env_spec(env_name)
    models = [spec.tabular_model(task, data_root=data_root, **(env_options or {})) for task in tasks]
    return build_graph(models, list(tasks), max_steps, env_package(env_name).build_prompt, history_length)


def exact_table(
    policy: PolicyLike,
    env_name: str,
    tasks: Sequence[str],
    *,
    max_steps: int,
    history_length: int,
    temperature: float = 1.0,
    data_root: str = "data",
    env_options: dict | None = None,
    max_prompt_tokens: int = 1024,
    prompt_overflow: str = "truncate_left",
    progress: bool = True,
) -> ExactTable:
    """The policy's `ExactTable` over every node of `tasks` (module docstring)."""
    graph = exact_graph(
        env_name,
        tasks,
        max_steps=max_steps,
        history_length=history_length,
        data_root=data_root,
        env_options=env_options,
    )
    inputs = choice_inputs(policy, graph, max_prompt_tokens, prompt_overflow)
    return solve(graph, policy_log_probs(policy.model, inputs, temperature, progress), temperature)


def row_nodes(batch: RolloutBatch, graph: PolicyGraph) -> tuple[np.ndarray, np.ndarray]:
    """-> (node, edge) per row of `batch`: each trajectory replayed from its task's root along its actions. ValueError
    naming the row where the replay leaves the graph: an observation other than the saved one, an action that is not
    one of the node's commands, a step beyond the budget."""
    tasks = {task: k for k, task in enumerate(graph.tasks)}
    node = np.empty(batch.n_rows, dtype=np.int64)
    edge = np.empty(batch.n_rows, dtype=np.int64)
    for rows in batch.trajectory_rows():
        task = str(batch.task_id[rows[0]])
        if task not in tasks:
            raise ValueError(f"task {task!r} of the batch is not among the graph's tasks")
        n = int(graph.roots[tasks[task]])
        for r in rows:
            where = f"{task}, trajectory {batch.traj_uid[r]}, step {batch.step[r]}"
            if n < 0:
                raise ValueError(f"{where}: the graph's episode ended before this step (budget {graph.horizon})")
            if graph.observation[n] != batch.observation[r]:
                raise ValueError(
                    f"{where}: the tabular model's observation {graph.observation[n]!r} differs from the saved "
                    f"{str(batch.observation[r])!r}"
                )
            node[r] = n
            edge[r] = graph.edge_of(n, str(batch.action[r]))
            n = int(graph.next[edge[r]])
    return node, edge


def exact_values(
    batch: RolloutBatch,
    policy: PolicyLike,
    env_name: str,
    *,
    max_steps: int,
    history_length: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    data_root: str = "data",
    env_options: dict | None = None,
    max_prompt_tokens: int = 1024,
    prompt_overflow: str = "truncate_left",
    progress: bool = True,
) -> np.ndarray:
    """The batch's `exact_value` column: per row, V^pi_t(n_t), the probability that the policy (at `temperature`)
    wins from the node the row acted on within the steps left (`max_steps` - t), exactly (module docstring). The
    keywords are the collector's (`top_p` is not applied by the admissible-choice sampler, nor here). ValueError for
    rollouts of free generation and where a replay leaves the tabular model (`row_nodes`)."""
    del top_p
    if batch.candidate_ids is None or any(c is None for c in batch.candidate_ids):
        raise ValueError(
            "exact values need rollouts whose answers were chosen among the admissible commands "
            "(rollout.action_choice: admissible): a freely generated answer has no enumerable distribution"
        )
    tasks = sorted({str(t) for t in batch.task_id})
    table = exact_table(
        policy,
        env_name,
        tasks,
        max_steps=max_steps,
        history_length=history_length,
        temperature=temperature,
        data_root=data_root,
        env_options=env_options,
        max_prompt_tokens=max_prompt_tokens,
        prompt_overflow=prompt_overflow,
        progress=progress,
    )
    node, _ = row_nodes(batch, table.graph)
    return table.v[node]
