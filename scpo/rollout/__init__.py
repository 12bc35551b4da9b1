"""Multi-turn rollouts: the collector and the generation engines (transformers on CPU, vLLM on GPU)."""

from scpo.rollout.collector import RolloutTiming, collect_rollouts
from scpo.rollout.engine import TransformersEngine, make_engine
from scpo.rollout.generation import Generation, GenerationEngine

__all__ = ["collect_rollouts", "RolloutTiming", "Generation", "GenerationEngine", "TransformersEngine", "make_engine"]
