"""Text environments (ALFWorld, WebShop, the corridor test env) behind two protocols (`TextEnv`, `EnvPackage`) and one
registry (`scpo.envs.registry`)."""

from scpo.envs.base import EnvPackage, TextEnv
from scpo.envs.registry import available, env_spec, make, trainable
from scpo.envs.spec import EnvOptions, EnvSpec

__all__ = ["TextEnv", "EnvPackage", "EnvSpec", "EnvOptions", "make", "available", "trainable", "env_spec"]
