"""scpo: credit assignment for group-based RL post-training of LLM agents (SCPO, GRPO, GiGPO, HGPO, G2PO, ProGPO,
HCAPO)."""

__version__ = "0.1.0"
