"""Workloads for bare transformers models: batches synthesised from the model's config.

A target may return a `transformers.PreTrainedModel` without saying what to feed it.
`workload_for` then builds a Workload from the model's config:

* Text models (a config with `vocab_size`, a forward taking `input_ids`): batches of
  `BATCH_SIZE` sequences of token ids drawn uniformly from the vocabulary, with lengths
  uniform in `TEXT_LENGTHS` (clamped to `max_position_embeddings`), right-padded to the
  longest sequence of each batch with the config's `pad_token_id` (0 when unset), and an
  attention mask. The sequence axis of `input_ids`, `attention_mask` (and token-level
  `labels`) is declared dynamic.
* Vision models (a config with `image_size`, a forward taking `pixel_values`): batches of
  `BATCH_SIZE` standard-normal images of `num_channels` x `image_size` x `image_size`.

The task is "train" when the forward takes `labels` and the head is one whose labels are
known: causal, masked and sequence-to-sequence language modelling (token ids; padding and,
for masked LM, unmasked positions are -100), sequence, token and image classification
(classes below `num_labels`; float targets for regression and multi-label problems).
Training uses `torch.optim.AdamW(lr=1e-4)`. Models whose forward takes no `labels` get the
"infer" task and are put in eval mode. Anything else is a `WorkloadError` naming the model
class and what is missing; wrap such a model in an `autotune.Workload` with real batches.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from autotune.errors import WorkloadError
from autotune.runtime.config import InputKey
from autotune.runtime.summary import INFER, TRAIN
from autotune.workload.contract import Workload

__all__ = ["BATCH_SIZE", "MASKED_FRACTION", "NUM_BATCHES", "TEXT_LENGTHS", "is_pretrained_model", "workload_for"]

BATCH_SIZE = 8
"""Sequences or images per synthesised batch."""
TEXT_LENGTHS = (16, 128)
"""Shortest and longest synthesised sequence (uniform in between, clamped to the model's positions)."""
NUM_BATCHES = 8
"""Batches per synthesised workload; every trial cycles over the same ones."""
MASKED_FRACTION = 0.15
"""Share of tokens that carry a label for masked language models, as in BERT's pre-training."""

_HEADS: dict[str, tuple[str, tuple[str, ...]]] = {
    # head: (transformers' auto-mapping listing its classes, class-name endings as a fallback)
    "causal_lm": ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", ("ForCausalLM", "LMHeadModel")),
    "masked_lm": ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", ("ForMaskedLM",)),
    "seq2seq_lm": ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", ()),
    "sequence_classification": ("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", ("ForSequenceClassification",)),
    "token_classification": ("MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES", ("ForTokenClassification",)),
    "image_classification": ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", ("ForImageClassification",)),
}
_TOKEN_LABELS = ("causal_lm", "masked_lm", "seq2seq_lm", "token_classification")
_TEXT_HEADS = ("causal_lm", "masked_lm", "seq2seq_lm", "sequence_classification", "token_classification")

Batches = Callable[[], list[dict[str, torch.Tensor]]]


def is_pretrained_model(obj: Any) -> bool:
    """Whether `obj` is a transformers PreTrainedModel (without importing transformers when it is not loaded)."""
    transformers = sys.modules.get("transformers")
    return transformers is not None and isinstance(obj, transformers.PreTrainedModel)


def workload_for(model: nn.Module) -> Workload:
    """A Workload for a bare PreTrainedModel, with batches synthesised from its config.

    Heads with known labels train with `torch.optim.AdamW(lr=1e-4)`; models whose forward
    takes no labels are inference workloads. See the module docstring for the batches.
    Raises WorkloadError, naming the model class and what is missing, when it cannot.
    """
    name = type(model).__name__
    config = getattr(model, "config", None)
    accepted = _forward_parameters(model)
    modality = _modality(config, accepted)
    if modality is None:
        raise WorkloadError(_missing_inputs(name, config, accepted))
    head = _head_of(name, config, accepted, modality)
    labels = ["labels"] if head else []
    if modality == "text":
        _check_required(model, ["input_ids", "attention_mask", *labels])
        batches = _text_batches(config, head)
        dims: dict[InputKey, list[int]] = {"input_ids": [1], "attention_mask": [1]}
        pads: dict[InputKey, int | float | bool] = {"input_ids": _pad_id(config)} if _pad_id(config) else {}
        if head in _TOKEN_LABELS:
            dims["labels"] = [1]
            pads["labels"] = -100
    else:
        _check_required(model, ["pixel_values", *labels])
        batches = _vision_batches(config, name, head)
        dims, pads = {}, {}
    if head is None:
        # Inference: dropout off, so that compiled and eager outputs can be compared.
        model.eval()
    return Workload(
        model=model,
        batches=batches,
        task=TRAIN if head else INFER,
        optimizer=(lambda params: torch.optim.AdamW(params, lr=1e-4)) if head else None,
        dynamic_dims=dims,
        pad_values=pads,
        num_batches=NUM_BATCHES,
    )


def _modality(config: Any, accepted: set[str]) -> str | None:
    """'text' or 'vision': which inputs the forward takes and the config can describe; None if neither."""
    vocab_size = getattr(config, "vocab_size", None)
    if "input_ids" in accepted and isinstance(vocab_size, int) and vocab_size > 0:
        return "text"
    if "pixel_values" in accepted and getattr(config, "image_size", None) is not None:
        return "vision"
    return None


def _head_of(name: str, config: Any, accepted: set[str], modality: str) -> str | None:
    """The known head whose labels to synthesise, None when the forward takes no labels; raise when unknown."""
    if "labels" not in accepted:
        head = None
    else:
        head = _known_head(name)
        allowed = _TEXT_HEADS if modality == "text" else ("image_classification",)
        if head not in allowed:
            raise WorkloadError(
                f"{name}: its forward takes `labels`, but autotune does not know which labels this kind of "
                f"{modality} model expects (it synthesises them for: {', '.join(allowed)}); "
                "return an autotune.Workload with your own batches."
            )
    if getattr(config, "is_encoder_decoder", False) and head != "seq2seq_lm":
        raise WorkloadError(
            f"{name}: an encoder-decoder model without a sequence-to-sequence LM head is not supported, "
            "since autotune cannot synthesise its decoder inputs; return an autotune.Workload with your own batches."
        )
    if head == "seq2seq_lm" and not isinstance(getattr(config, "decoder_start_token_id", None), int):
        raise WorkloadError(
            f"{name}: config.decoder_start_token_id is not set; the model needs it to make its decoder inputs "
            "from the labels autotune synthesises (T5 uses 0, BART 2)."
        )
    return head


def _forward_parameters(model: nn.Module) -> set[str]:
    return set(inspect.signature(model.forward).parameters)


def _known_head(name: str) -> str | None:
    """Which known head the class `name` is, from transformers' auto mappings or, failing that, its name."""
    from transformers.models.auto import modeling_auto  # transformers is loaded already: the model came from it

    for head, (mapping, endings) in _HEADS.items():
        classes: set[str] = set()
        for value in getattr(modeling_auto, mapping, {}).values():
            classes.update([value] if isinstance(value, str) else value)
        if name in classes or (endings and name.endswith(endings)):
            return head
    return None


def _pad_id(config: Any) -> int:
    pad = getattr(config, "pad_token_id", None)
    return pad if isinstance(pad, int) and not isinstance(pad, bool) and pad >= 0 else 0


def _text_batches(config: Any, head: str | None) -> Batches:
    vocab, pad = int(config.vocab_size), _pad_id(config)
    positions = getattr(config, "max_position_embeddings", None)
    longest = min(TEXT_LENGTHS[1], positions) if isinstance(positions, int) and positions > 0 else TEXT_LENGTHS[1]
    shortest = min(TEXT_LENGTHS[0], longest)

    def batches() -> list[dict[str, torch.Tensor]]:
        drawn = []
        for _ in range(NUM_BATCHES):
            lengths = torch.randint(shortest, longest + 1, (BATCH_SIZE,))
            mask = (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).long()
            input_ids = torch.randint(0, vocab, mask.shape).masked_fill(mask == 0, pad)
            batch = {"input_ids": input_ids, "attention_mask": mask}
            if head is not None:
                batch["labels"] = _text_labels(head, config, input_ids, mask)
            drawn.append(batch)
        return drawn

    return batches


def _text_labels(head: str, config: Any, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    if head == "causal_lm":
        return input_ids.masked_fill(mask == 0, -100)
    if head == "seq2seq_lm":
        return torch.randint(0, int(config.vocab_size), input_ids.shape).masked_fill(mask == 0, -100)
    if head == "masked_lm":
        # The first token always carries a label, so that no batch has an empty (NaN) loss.
        chosen = (torch.rand(input_ids.shape) < MASKED_FRACTION) | (torch.arange(input_ids.shape[1]) == 0)
        return input_ids.masked_fill(~chosen | (mask == 0), -100)
    if head == "token_classification":
        return torch.randint(0, _num_labels(config), input_ids.shape).masked_fill(mask == 0, -100)
    return _class_labels(config, input_ids.shape[0])


def _vision_batches(config: Any, name: str, head: str | None) -> Batches:
    height, width = _image_shape(config.image_size, name)
    channels = getattr(config, "num_channels", 3)

    def batches() -> list[dict[str, torch.Tensor]]:
        drawn = []
        for _ in range(NUM_BATCHES):
            batch = {"pixel_values": torch.randn(BATCH_SIZE, channels, height, width)}
            if head is not None:
                batch["labels"] = _class_labels(config, BATCH_SIZE)
            drawn.append(batch)
        return drawn

    return batches


def _image_shape(size: object, name: str) -> tuple[int, int]:
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size, size
    if isinstance(size, Sequence) and len(size) == 2 and all(isinstance(s, int) and s > 0 for s in size):
        return int(size[0]), int(size[1])
    raise WorkloadError(f"{name}: config.image_size {size!r} is not a positive int or an (height, width) pair.")


def _num_labels(config: Any) -> int:
    return max(int(getattr(config, "num_labels", 2)), 1)


def _class_labels(config: Any, count: int) -> torch.Tensor:
    classes = _num_labels(config)
    if getattr(config, "problem_type", None) == "multi_label_classification":
        return torch.randint(0, 2, (count, classes)).float()
    if classes == 1 or getattr(config, "problem_type", None) == "regression":
        return torch.randn(count) if classes == 1 else torch.randn(count, classes)
    return torch.randint(0, classes, (count,))


def _missing_inputs(name: str, config: Any, accepted: set[str]) -> str:
    config_name = type(config).__name__
    vocab_size, image_size = getattr(config, "vocab_size", None), getattr(config, "image_size", None)
    if vocab_size is None and image_size is None:
        return (
            f"{name}: cannot synthesise inputs: its config ({config_name}) has neither `vocab_size` "
            "(for token ids) nor `image_size` (for pixel values); return an autotune.Workload with your own batches."
        )
    if "input_ids" not in accepted and "pixel_values" not in accepted:
        return (
            f"{name}: cannot synthesise inputs: its forward takes neither `input_ids` nor `pixel_values` "
            f"(it takes {sorted(accepted)}); return an autotune.Workload with your own batches."
        )
    return (
        f"{name}: cannot synthesise inputs from its config ({config_name}: vocab_size={vocab_size!r}, "
        f"image_size={image_size!r}) for a forward taking {sorted(accepted)}: token ids need `input_ids` and a "
        "positive `vocab_size`, images `pixel_values` and `image_size`; return an autotune.Workload with your own batches."
    )


def _check_required(model: nn.Module, provided: list[str]) -> None:
    """Refuse a forward that requires an input the synthesised batches do not have."""
    missing = [
        p.name
        for p in inspect.signature(model.forward).parameters.values()
        if p.default is p.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in provided
    ]
    if missing:
        raise WorkloadError(
            f"{type(model).__name__}: its forward requires {missing}, which autotune cannot synthesise "
            f"(it provides {provided}); return an autotune.Workload with your own batches."
        )
