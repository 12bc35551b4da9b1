"""The `tiny` profile: a small Llama-architecture causal LM initialised locally, with a byte-level BPE tokenizer trained
(tokenizers library) on environment text. Nothing is downloaded; the CPU profile trains it in minutes.

The answer tags (`<think>`, `</think>`, `<action>`, `</action>`) are single added tokens, so a short answer such as
`<action>go to desk 1</action>` is six tokens.
"""

from __future__ import annotations

from collections.abc import Iterable

from scpo.envs.prompting import ANSWER_TAGS

__all__ = ["TAG_TOKENS", "SPECIAL_TOKENS", "train_tokenizer", "build_tiny_model"]

TAG_TOKENS = ANSWER_TAGS  # the answer tags of the envs' prompts, one added token each
# Pre-tokenisation at word boundaries: a word, a number, a run of punctuation (each with its leading space). An object
# or receptacle name is then the same token in the task, the observation, the admissible commands and the answer
# ("apple" in "cool some apple" and in "take apple 1 from countertop 1"), which a small model can learn to copy. The
# prompt template's fixed sentences (`fixed_phrases`, the env's `EnvSpec.tokenizer_phrases`) are single added tokens,
# so the boilerplate costs a handful of positions: ALFWorld prompts are ~300 tokens (median), the longest ~700.
WORD_BOUNDARY = r"""'s|\s?[A-Za-z]+|\s?\d+|\s?[^\sA-Za-z\d]+|\s+"""
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 2048,
    max_texts: int = 3000,
    fixed_phrases: Iterable[str] = (),
    lowercase: bool = False,
):
    """Byte-level BPE over word-level pre-tokens, trained on (the first `max_texts` of) `texts`; any text decodes back
    exactly (lowercased, with `lowercase`). The answer tags and each of `fixed_phrases` are added tokens. Wrapped as a
    transformers fast tokenizer with left padding. `lowercase` (an env package's `TINY_TOKENIZER_LOWERCASE`) folds case
    before tokenising, so a name shown in one case and typed in another is one token sequence: WebShop shows an ASIN as
    "B09RPRRNVP" and clicks it as "click[b09rprrnvp]"."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    texts = list(texts)[:max_texts]
    if not texts:
        raise ValueError("train_tokenizer needs at least one text (got an empty corpus)")
    tok = Tokenizer(models.BPE(unk_token=None))
    if lowercase:
        tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(WORD_BOUNDARY), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        max_token_length=24,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    fast.add_tokens(list(TAG_TOKENS) + sorted(set(fixed_phrases) - set(TAG_TOKENS)))
    fast.padding_side = "left"
    return fast


def build_tiny_model(
    tokenizer, hidden_size: int = 128, layers: int = 2, heads: int = 4, max_positions: int = 2048, seed: int = 0
):
    """A freshly initialised LlamaForCausalLM sized by the `policy.tiny_*` options (tied input/output embeddings)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if hidden_size % heads:
        raise ValueError(f"policy.tiny_hidden_size={hidden_size} must be divisible by policy.tiny_heads={heads}")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 4,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model
