"""Adapters that let other training stacks call scpo's credit estimators (verl-agent:
`scpo.integrations.verl_agent`)."""
