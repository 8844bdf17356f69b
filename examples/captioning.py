"""Image captioning: a ViT encoder and a GPT-2 decoder trained with Adam, as in the torch.compile case study.

The model is transformers' `VisionEncoderDecoderModel`, built from a `ViTConfig` and a
`GPT2Config` with random weights (nothing is downloaded). It is trained on synthetic
images and captions whose lengths follow the case study's skewed distribution: 90% short
(5-31 tokens), 9% medium (33-63), 1% long (65-255), with a vocabulary of 1024 and batches
of 64 at full size. That skew is what makes the case interesting: padding every caption to
the longest possible one (256) wastes most of the decoder's work, while padding each batch
to its own longest caption changes the shapes from step to step.

Two targets, one per padding strategy a data pipeline might use:

    autotune search --model examples.captioning:captioning_static    # every caption padded to 256
    autotune search --model examples.captioning:captioning_dynamic   # padded to the batch's longest

The case study trained under `torch.autocast(dtype=torch.bfloat16)` with every caption padded
to 256; `captioning_static_bf16` is that workload, and `captioning_dynamic_bf16` the same under
autocast with each batch padded to its longest caption.

Both are tiny (a 32x32 image, 2 layers, 64 wide, batches of 4, lengths scaled down by 4)
unless `AUTOTUNE_EXAMPLE_SIZE=full` is set: ViT-Base/16 at 224x224 and a 12-layer GPT-2.

The loss: `VisionEncoderDecoderModel` computes the decoder's cross-entropy itself (its
decoder inputs are the labels shifted right) and never asks the GPT-2 decoder for its own
loss, so transformers' loss lookup, which breaks the graph when a bare GPT-2 is given
labels without a `loss_type` (see `examples.hf:gpt2` and `autotune doctor`), is not on
this model's path: a labelled forward pass is one graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import GPT2Config, VisionEncoderDecoderConfig, VisionEncoderDecoderModel, ViTConfig

from autotune import Workload
from examples._shared import checked_size, draw_lengths, length_mask, seeded

__all__ = [
    "CaptioningSize",
    "build_model",
    "captioning_dynamic",
    "captioning_dynamic_bf16",
    "captioning_static",
    "captioning_static_bf16",
    "make_batches",
    "workload",
]

VOCAB = 1024
PAD, START, END = 0, 1, 2
"""Token ids reserved for padding, the decoder's start token and the end of a caption."""


@dataclass(frozen=True, kw_only=True)
class CaptioningSize:
    """The dimensions of one size of the captioning workload."""

    image_size: int
    patch_size: int
    hidden: int
    layers: int
    heads: int
    batch_size: int
    buckets: tuple[tuple[float, int, int], ...]
    """Caption lengths: (probability, shortest, longest) per bucket."""
    max_length: int
    """The longest caption plus one: what the static variant pads to, and the decoder's positions."""


SIZES = {
    "full": CaptioningSize(
        image_size=224,
        patch_size=16,
        hidden=768,
        layers=12,
        heads=12,
        batch_size=64,
        buckets=((0.90, 5, 31), (0.09, 33, 63), (0.01, 65, 255)),
        max_length=256,
    ),
    "tiny": CaptioningSize(
        image_size=32,
        patch_size=8,
        hidden=64,
        layers=2,
        heads=4,
        batch_size=4,
        buckets=((0.90, 2, 8), (0.09, 9, 16), (0.01, 17, 63)),
        max_length=64,
    ),
}


def build_model(dims: CaptioningSize) -> VisionEncoderDecoderModel:
    """The captioning model with seeded random weights."""
    encoder = ViTConfig(
        image_size=dims.image_size,
        patch_size=dims.patch_size,
        hidden_size=dims.hidden,
        num_hidden_layers=dims.layers,
        num_attention_heads=dims.heads,
        intermediate_size=4 * dims.hidden,
    )
    decoder = GPT2Config(
        vocab_size=VOCAB,
        n_positions=dims.max_length,
        n_embd=dims.hidden,
        n_layer=dims.layers,
        n_head=dims.heads,
        bos_token_id=START,
        eos_token_id=END,
        pad_token_id=PAD,
        # Training needs no key/value cache; building one costs time and memory in every step.
        use_cache=False,
    )
    config = VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    config.pad_token_id = PAD
    config.decoder_start_token_id = START
    with seeded(0):
        model = VisionEncoderDecoderModel(config=config)
    return model


def make_batches(dims: CaptioningSize, count: int, pad_to_max: bool) -> list[dict[str, torch.Tensor]]:
    """`count` batches of images and captions, padded to `dims.max_length` or to each batch's longest caption.

    Padded positions have label -100 (ignored by the loss) and attention mask 0; a caption
    ends with the END token. Only torch's RNG is used, so seeding it makes batches repeatable.
    """
    batches = []
    for _ in range(count):
        lengths = draw_lengths(dims.batch_size, dims.buckets)
        width = dims.max_length if pad_to_max else int(lengths.max())
        mask = length_mask(lengths, width)
        tokens = torch.randint(END + 1, VOCAB, (dims.batch_size, width))
        tokens[torch.arange(dims.batch_size), lengths - 1] = END
        images = torch.randn(dims.batch_size, 3, dims.image_size, dims.image_size)
        batches.append(
            {
                "pixel_values": images,
                "labels": tokens.masked_fill(mask == 0, -100),
                "decoder_attention_mask": mask,
            }
        )
    return batches


def workload(size: str | None = None, *, dynamic: bool, autocast: torch.dtype | None = None) -> Workload:
    """The captioning workload at `size` ('tiny' or 'full'; None reads $AUTOTUNE_EXAMPLE_SIZE).

    `dynamic=False` pads every caption to the longest possible length (static shapes);
    `dynamic=True` pads each batch to its longest caption and declares the caption axis of
    the decoder inputs dynamic, with -100 as the labels' padding value. `autocast` runs the forward
    pass under `torch.autocast` with that dtype (the weights and the optimizer stay in float32).
    """
    dims = SIZES[checked_size(size)]
    varying = {"labels": [1], "decoder_attention_mask": [1]} if dynamic else {}
    return Workload(
        model=build_model(dims),
        batches=lambda: make_batches(dims, count=8, pad_to_max=not dynamic),
        task="train",
        optimizer=lambda params: torch.optim.Adam(params, lr=1e-4),
        dynamic_dims=varying,
        pad_values={"labels": -100} if dynamic else {},
        # The decoder's positions bound every caption: what 'max' padding pads to.
        max_lengths={key: dims.max_length for key in varying},
        modules=("encoder", "decoder"),
        autocast=autocast,
    )


def captioning_static() -> Workload:
    """Captions padded to the maximum length (256 at full size): every batch has the same shapes."""
    return workload(dynamic=False)


def captioning_dynamic() -> Workload:
    """Captions padded to the longest in each batch: the caption axis varies from batch to batch."""
    return workload(dynamic=True)


def captioning_static_bf16() -> Workload:
    """The case study's procedure: captions padded to the maximum length, the forward pass under bfloat16 autocast."""
    return workload(dynamic=False, autocast=torch.bfloat16)


def captioning_dynamic_bf16() -> Workload:
    """Captions padded to the longest in each batch, the forward pass under bfloat16 autocast."""
    return workload(dynamic=True, autocast=torch.bfloat16)
