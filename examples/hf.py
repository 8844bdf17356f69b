"""Bare transformers models as targets: autotune synthesises their batches from the config.

Each target returns a small `PreTrainedModel` built from a config with random weights
(nothing is downloaded) and no batches; `autotune.hf.workload_for` makes the workload:
token ids, lengths and attention masks for text models, pixel values for vision models,
labels for heads that take them (see that module for the defaults).

    autotune search --model examples.hf:gpt2   # causal LM, trained on variable-length text
    autotune search --model examples.hf:bert   # sequence classification, trained
    autotune search --model examples.hf:vit    # image classification, trained

Sizes are small; `gpt2` is GPT-2 small (12 layers, 768 wide, vocabulary 50257) under
`AUTOTUNE_EXAMPLE_SIZE=full`, as the GPU check's `gpt2-train` stage (`bash .ci/gpu`) runs it. To tune a
real checkpoint, return `AutoModelForCausalLM.from_pretrained(...)` from your own target the same way.
"""

from __future__ import annotations

from transformers import (
    BertConfig,
    BertForSequenceClassification,
    GPT2Config,
    GPT2LMHeadModel,
    ViTConfig,
    ViTForImageClassification,
)

from examples._shared import checked_size, seeded

__all__ = ["bert", "gpt2", "vit"]


def gpt2(size: str | None = None) -> GPT2LMHeadModel:
    """A 2-layer GPT-2 language model with a 1024-token vocabulary and 256 positions, for training; GPT-2 small
    (12 layers, 768 wide, vocabulary 50257, 1024 positions) where the size is 'full'."""
    vocab, positions, width, layers, heads = (
        (50257, 1024, 768, 12, 12) if checked_size(size) == "full" else (1024, 256, 64, 2, 4)
    )
    # use_cache=False: a training step has no use for the key/value cache GPT-2 builds by default.
    config = GPT2Config(
        vocab_size=vocab,
        n_positions=positions,
        n_embd=width,
        n_layer=layers,
        n_head=heads,
        bos_token_id=vocab - 1,
        eos_token_id=vocab - 1,
        use_cache=False,
    )
    with seeded(0):
        model = GPT2LMHeadModel(config)
    # GPT2LMHeadModel's loss is looked up by class name, which fails and logs a warning inside
    # forward: a graph break on every labelled call. Naming the causal-LM loss removes it.
    model.loss_type = "ForCausalLM"
    return model


def bert() -> BertForSequenceClassification:
    """A 2-layer BERT classifying sequences into 3 classes."""
    config = BertConfig(
        vocab_size=1024,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        max_position_embeddings=256,
        num_labels=3,
    )
    with seeded(0):
        return BertForSequenceClassification(config)


def vit() -> ViTForImageClassification:
    """A 2-layer ViT classifying 32x32 images into 10 classes."""
    config = ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        num_labels=10,
    )
    with seeded(0):
        return ViTForImageClassification(config)
