"""Where the policy runs and in which precision: `train.device` and `policy.dtype`; and one run per GPU: `gpu_claim`
refuses a second run on a GPU (the seeds of a stage and the points of a sweep each get a GPU of their own through
CUDA_VISIBLE_DEVICES: `scpo.pipeline.devices`).

The trained weights stay float32 and the forward passes run under `torch.autocast` to `policy.dtype` (mixed
precision, as transformers' Trainer does with `bf16=True`): an AdamW step moves a weight by about `lr`, and at the gpu
profile's 1e-6 that is far below a bfloat16 weight's resolution (2^-8 relative, ~1e-4 for a weight of 0.02), so
16-bit weights would not move.

Autocast is scoped to each forward pass (`autocast_each_forward`), never held around a loop with optimizer steps
inside: autocast keeps a 16-bit copy of every float32 weight that requires grad and frees it only when the outermost
autocast block exits, so a block around the loop would keep serving the first forward's copies after every
`optimizer.step()` (PyTorch's AMP notes: autocast should wrap only the forward pass and the loss). A caller may hold
`forward_precision(model)` around one call during which the weights do not change (a `generate` call), so that its
forward passes share one cast of the weights.
"""

from __future__ import annotations

import contextlib
import functools
import os
from types import MethodType

import torch

from scpo.errors import MachineError, PlacementError
from scpo.policy.profiles import torch_dtype

__all__ = [
    "resolve_device",
    "check_engine",
    "compute_precision",
    "autocast_each_forward",
    "forward_precision",
    "gpu_claim",
]


def resolve_device(name: str) -> torch.device:
    """`train.device`: 'auto' -> cuda when torch sees a GPU, else cpu; 'cuda' without a GPU is a MachineError (one
    line)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise MachineError(
            "train.device='cuda' but torch sees no GPU (torch.cuda.is_available() is False); "
            "use train.device=auto or cpu"
        )
    if name not in ("cpu", "cuda"):
        raise ValueError(f"train.device={name!r} is not one of 'auto', 'cpu', 'cuda'")
    return torch.device(name)


def check_engine(engine: str, device: torch.device) -> None:
    """MachineError (one line) when `rollout.engine` cannot run here: vLLM needs a GPU and the `vllm` package."""
    if engine != "vllm":
        return
    if device.type != "cuda":
        raise MachineError(
            f"rollout.engine='vllm' needs a GPU, and this run's device is {device.type} (torch sees "
            f"{'no GPU' if not torch.cuda.is_available() else 'a GPU, but train.device=cpu'}); "
            "use --set rollout.engine=transformers"
        )
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise MachineError(
            "rollout.engine='vllm' but vLLM is not installed in this environment "
            "(`pip install -r requirements/gpu.txt`); or use --set rollout.engine=transformers"
        )


def compute_precision(device: torch.device, dtype: str):
    """A context running forward passes in `dtype` over float32 weights (autocast), or a no-op for float32.

    Enter it around forward passes between which the weights do not change (module docstring); the trainer uses it
    through `autocast_each_forward`."""
    compute_dtype = torch_dtype(dtype)  # ValueError naming policy.dtype if unknown
    if compute_dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=compute_dtype)


_PRECISION_ATTR = "_scpo_compute_precision"  # (device type, dtype name) of a model wrapped by autocast_each_forward


def autocast_each_forward(model, device: torch.device, dtype: str):
    """Run every forward pass of `model` in its own `compute_precision(device, dtype)` block; returns `model`.

    The model's `forward` is rebound to a wrapper (as accelerate's `prepare` does for mixed precision), so every caller
    (generation, scoring, the update, SFT, the sync probe) gets a fresh weight cast, and backward passes run outside
    autocast. float32 leaves the model as it is. Wrapping twice is an error rather than a silent double wrap."""
    compute_dtype = torch_dtype(dtype)
    if getattr(model, _PRECISION_ATTR, None) is not None:
        raise ValueError(f"model already runs its forward passes under {getattr(model, _PRECISION_ATTR)}")
    if compute_dtype == torch.float32:
        return model
    forward = model.forward.__func__ if hasattr(model.forward, "__func__") else model.forward

    @functools.wraps(forward)
    def forward_in_precision(self, *args, **kwargs):
        with torch.autocast(device_type=device.type, dtype=compute_dtype):
            return forward(self, *args, **kwargs)

    model.forward = MethodType(forward_in_precision, model)  # bound to `model` (deepcopy rebinds it to the copy)
    setattr(model, _PRECISION_ATTR, (device.type, dtype))
    return model


def forward_precision(model):
    """The autocast block `autocast_each_forward` gave `model` (a no-op context for a float32 model): held around one
    call whose forward passes see unchanged weights (one `generate`), they share one cast of the weights."""
    wrapped = getattr(model, _PRECISION_ATTR, None)
    if wrapped is None:
        return contextlib.nullcontext()
    return compute_precision(torch.device(wrapped[0]), wrapped[1])


# ------------------------------------------------------------------------------------------------------ one run per GPU
@contextlib.contextmanager
def gpu_claim(device: torch.device, lock_dir: str | os.PathLike | None = None):
    """Hold the GPU `device` (the first visible one) for this process: an exclusive flock on
    `<lock_dir>/scpo-gpu-<uuid>.lock` (the GPU's UUID, so different CUDA_VISIBLE_DEVICES views of one GPU meet); a
    second run on the same GPU fails at once in one line naming the first one's pid. A no-op on the CPU."""
    if device.type != "cuda":
        yield None
        return
    import fcntl
    import tempfile
    from pathlib import Path

    index = device.index or 0
    uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", index))
    path = Path(lock_dir or tempfile.gettempdir()) / f"scpo-gpu-{uuid}.lock"
    handle = open(path, "a+")  # noqa: SIM115 (held for the run)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise PlacementError(
            f"GPU {uuid} (cuda:{index} with CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}) "
            f"is in use by scpo run {holder}: two trainers with their engines on one GPU do not fit; give each run its "
            "own GPU (report.parallel_runs=per_gpu, scpo sweep --gpus auto)"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}")
    handle.flush()
    try:
        yield path
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
