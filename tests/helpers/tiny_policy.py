"""A small tiny policy for the corridor (a 1-layer Llama of a few thousand parameters, its tokenizer trained on the
corridor's expert prompts), optionally cloned a little on the expert's steps so that it wins sometimes: built in
seconds for the exact-values and gradient-fidelity tests."""

from __future__ import annotations

import torch

from scpo.config import PolicyConfig
from scpo.envs import corridor
from scpo.envs.demos import expert_demonstrations
from scpo.policy import create_policy
from scpo.train.sft import behaviour_cloning


def corridor_policy(seed: int = 0, hidden: int = 16, history_length: int = 2, bc_epochs: int = 0, lr: float = 3e-3):
    """A freshly initialised tiny policy (`seed`) whose tokenizer knows the corridor's prompts, after `bc_epochs`
    epochs of behaviour cloning on the expert steps of 12 corridor tasks."""
    tasks = corridor.list_tasks("train")[:6] + corridor.list_tasks("train_long")[:6]
    demos, _ = expert_demonstrations(corridor, tasks, max_steps=12, history_length=history_length, progress=False)
    torch.manual_seed(seed)
    cfg = PolicyConfig(tiny_hidden_size=hidden, tiny_layers=1, tiny_heads=2, tiny_vocab_size=300)
    policy = create_policy(cfg, corpus=[d.prompt for d in demos] + [d.response for d in demos], seed=seed)
    if bc_epochs:
        behaviour_cloning(
            policy, demos, epochs=bc_epochs, lr=lr, batch_size=8, max_prompt_tokens=1024, seed=seed, progress=False
        )
    policy.model.eval()
    return policy
