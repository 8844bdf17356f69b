"""A Hugging Face Trainer as the target, and a tuned configuration applied back to one.

The Trainer is examples.trainer's: a 2-layer GPT-2 from a config, a generated dataset whose lengths
vary, and transformers' own language-modelling collator.
"""

from __future__ import annotations

import contextlib
import io
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers import DataCollatorForLanguageModeling, TrainerCallback
from transformers.trainer_utils import get_last_checkpoint

from autotune import CompileConfig, cli, resolve
from autotune.errors import ConfigError, WorkloadError
from autotune.integrations.transformers import apply_to_accelerate, apply_to_trainer
from autotune.runtime.tuned import EnvironmentMismatchWarning, read
from autotune.workload.trainer import infer_padding, trainer_workload
from examples import trainer as example
from tests.best_yaml import write_best
from tests.short_runs import SHORT_FLAGS

SPEC = "examples.trainer:trainer"
SPACE = str(Path(__file__).parent.parent / "search_spaces" / "trainer.yaml")
TUNED = CompileConfig(
    mark_dynamic=(("input_ids", 1), ("attention_mask", 1), ("labels", 1)), compile_optimizer=True, padding_alignment=8
)


def batches(collator, rows: list[list[int]], size: int = 4) -> list[dict]:
    return [dict(collator([{"input_ids": r} for r in rows[i : i + size]])) for i in range(0, len(rows), size)]


def rows(count: int = 16) -> list[list[int]]:
    return [[5 + (i * 7 + j) % 40 for j in range(3 + (i * 5) % 13)] for i in range(count)]


@pytest.mark.parallel
def test_the_dynamic_axes_and_pad_values_of_a_padding_collator_are_inferred() -> None:
    tokenizer = example.build_tokenizer()
    tokenizer.pad_token = "t1"  # id 3: a pad id that no default would guess
    guess = infer_padding(batches(DataCollatorForLanguageModeling(tokenizer, mlm=False), rows()))
    assert guess.dynamic_dims == {"input_ids": [1], "attention_mask": [1], "labels": [1]}
    assert guess.pad_values == {"input_ids": 3, "attention_mask": 0, "labels": -100}
    assert not guess.unsure
    assert "labels: axis 1 varies, padded with -100" in guess.describe()


@pytest.mark.parallel
def test_a_collator_that_pads_to_a_fixed_length_has_no_dynamic_axis() -> None:
    tokenizer = example.build_tokenizer()

    def fixed(features: list[dict]) -> dict:
        return dict(tokenizer.pad(features, padding="max_length", max_length=24, return_tensors="pt"))

    guess = infer_padding(batches(fixed, rows()))
    assert guess.dynamic_dims == {} and guess.pad_values == {}
    assert guess.describe().startswith("no input changes length")


@pytest.mark.parallel
def test_labels_of_their_own_length_are_read_from_how_rows_end() -> None:
    # Sequence-to-sequence batches: the labels have a length of their own and no mask says where they are padded.
    def seq2seq(features: list[dict]) -> dict:
        ids = [f["input_ids"] for f in features]
        targets = [r[: max(1, len(r) // 2)] for r in ids]
        longest, longest_target = max(map(len, ids)), max(map(len, targets))
        return {
            "input_ids": torch.tensor([r + [0] * (longest - len(r)) for r in ids]),
            "attention_mask": torch.tensor([[1] * len(r) + [0] * (longest - len(r)) for r in ids]),
            "labels": torch.tensor([t + [-100] * (longest_target - len(t)) for t in targets]),
        }

    guess = infer_padding(batches(seq2seq, rows()))
    assert guess.dynamic_dims == {"input_ids": [1], "attention_mask": [1], "labels": [1]}
    assert guess.pad_values == {"input_ids": 0, "attention_mask": 0, "labels": -100}


@pytest.mark.parallel
def test_the_workload_is_the_one_the_trainer_would_run(capsys) -> None:
    workload = resolve(SPEC)
    assert "inferred from the Trainer's collator: input_ids: axis 1 varies, padded with 0" in capsys.readouterr().err
    assert workload.task == "train" and workload.autocast is None
    assert workload.dynamic_dims == {"input_ids": (1,), "attention_mask": (1,), "labels": (1,)}
    assert workload.pad_values == {"input_ids": 0, "attention_mask": 0, "labels": -100}
    drawn = workload.draw_batches()
    assert len({b["input_ids"].shape[1] for b in drawn}) > 1 and all(b["input_ids"].shape[0] == 8 for b in drawn)
    # The Trainer's optimizer: its class, its learning rate, and no weight decay on biases and norms.
    trainer = example.trainer()
    optimizer = workload.optimizer(workload.model.parameters())
    trainer.create_optimizer()
    assert type(optimizer) is type(trainer.optimizer)
    assert [len(g["params"]) for g in optimizer.param_groups] == [
        len(g["params"]) for g in trainer.optimizer.param_groups
    ]
    assert optimizer.param_groups[0]["lr"] == trainer.args.learning_rate
    # The loss is the Trainer's own compute_loss.
    batch = drawn[0]
    with torch.no_grad():
        ours = workload.compute_loss(workload.run_forward(workload.model, batch), batch)
        theirs = trainer.compute_loss(trainer.model, dict(batch))
    assert torch.allclose(ours, theirs)
    # Overrides replace what is inferred.
    chosen = trainer_workload(trainer, dynamic_dims={"input_ids": [1]}, pad_values={"input_ids": 7})
    assert chosen.dynamic_dims == {"input_ids": (1,)} and chosen.pad_values == {"input_ids": 7}


@pytest.mark.parallel
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"torch_compile": True},
            "TrainingArguments.torch_compile=True (torch_compile_mode=None, torch_compile_backend=",
        ),
        ({"torch_compile_mode": "max-autotune"}, "torch_compile=True (torch_compile_mode='max-autotune'"),
    ],
)
def test_a_trainer_that_cannot_be_searched_as_it_is_says_which_argument(arguments, expected) -> None:
    with pytest.raises(WorkloadError) as caught:
        trainer_workload(example.trainer(**arguments))
    assert expected in str(caught.value)


@pytest.mark.parallel
def test_a_trainer_without_a_train_dataset_is_refused() -> None:
    trainer = example.trainer()
    trainer.train_dataset = None
    with pytest.raises(WorkloadError, match="it has no train_dataset.*pass train_dataset="):
        trainer_workload(trainer)


def _write(path: Path, config: CompileConfig = TUNED, **workload_changes: object) -> Path:
    """The best.yaml of the example trainer's workload (its summary changed by `workload_changes`) tuned to `config`."""
    workload = resolve(SPEC)
    summary = workload.summary(SPEC, workload.draw_batches())
    return write_best(path, replace(summary, **workload_changes), config)  # type: ignore[arg-type]


@pytest.mark.parallel
def test_a_configuration_for_another_task_model_or_machine_is_refused_or_warned(tmp_path: Path) -> None:
    infer = _write(tmp_path / "infer.yaml", CompileConfig(), task="infer")
    with pytest.raises(ConfigError, match="tuned for the 'infer' task, and a Trainer trains"):
        apply_to_trainer(example.trainer(), infer)
    other = _write(tmp_path / "other.yaml", model_class="BertForMaskedLM")
    with pytest.raises(ConfigError, match="tuned for a BertForMaskedLM model .* and this model is a GPT2LMHeadModel"):
        apply_to_trainer(example.trainer(), other)
    with pytest.raises(WorkloadError, match="torch_compile=True"):
        apply_to_trainer(example.trainer(torch_compile=True), _write(tmp_path / "best.yaml"))
    moved = tmp_path / "moved.yaml"
    text = _write(moved).read_text()
    moved.write_text(text.replace(f"torch: {torch.__version__}", "torch: 2.0.0"))
    assert "torch: 2.0.0" in moved.read_text()
    with pytest.warns(EnvironmentMismatchWarning, match="tuned in another environment") as caught:
        apply_to_trainer(example.trainer(), moved)
    mismatch = [w.filename for w in caught if issubclass(w.category, EnvironmentMismatchWarning)]
    assert mismatch == [__file__], "the warning points at the line that applied it"


class Losses(TrainerCallback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_log(self, args, state, control, logs=None, **kwargs) -> None:
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))


def _train(tmp_path: Path, tuned: Path | None, max_steps: int, resume: bool = False, **arguments) -> tuple:
    trainer = example.trainer(
        output_dir=str(tmp_path),
        max_steps=max_steps,
        logging_steps=1,
        optim="adamw_torch",  # not the fused kernel, which dynamo leaves alone: the compiled step must be traced
        **arguments,
    )
    if tuned is not None:
        apply_to_trainer(trainer, tuned)
    losses = Losses()
    trainer.add_callback(losses)
    trainer.train(resume_from_checkpoint=get_last_checkpoint(str(tmp_path)) if resume else None)
    return trainer, losses.losses


@pytest.mark.parallel
@pytest.mark.slow
def test_a_tuned_trainer_trains_as_eager_does_and_its_checkpoints_load_anywhere(tmp_path: Path) -> None:
    best = _write(tmp_path / "best.yaml")
    _, eager = _train(tmp_path / "eager", None, 20)
    saved = {"save_strategy": "steps", "save_steps": 10}
    trainer, tuned = _train(tmp_path / "tuned", best, 20, **saved)
    # 20 steps whose lengths vary, a warm-up from learning rate 0, a compiled AdamW step: the same losses as eager.
    assert len(tuned) == len(eager) == 20 and all(math.isfinite(x) for x in tuned)
    assert max(abs(a - b) for a, b in zip(tuned, eager, strict=True)) < 1e-3, (tuned, eager)
    # Compiled in place: what the Trainer saved loads into an uncompiled model with the same keys.
    assert getattr(trainer.model, "_compiled_call_impl", None) is not None, "the model was compiled in place"
    inner = trainer.optimizer.optimizer
    assert inner.step.__name__ == "step" and isinstance(inner.param_groups[0]["lr"], torch.Tensor)
    checkpoint = get_last_checkpoint(str(tmp_path / "tuned"))
    assert checkpoint is not None and checkpoint.endswith("checkpoint-20")
    from safetensors.torch import load_file

    fresh = example.model()
    saved_state = load_file(str(Path(checkpoint) / "model.safetensors"))
    missing, unexpected = fresh.load_state_dict(saved_state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)  # tied to the embedding
    assert set(saved_state) | set(missing) == set(fresh.state_dict())
    # Resuming from step 10 with the configuration applied again runs steps 11 to 20 as the first run did.
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    (resumed_dir / "checkpoint-10").symlink_to(tmp_path / "tuned" / "checkpoint-10")
    _, resumed = _train(resumed_dir, best, 20, resume=True)
    assert len(resumed) == 10
    assert max(abs(a - b) for a, b in zip(resumed, tuned[10:], strict=True)) < 1e-3, (resumed, tuned[10:])


# Beside other tests: nothing here rests on a figure (no pruner, no slow-ratio rule, either export accepted).
@pytest.mark.parallel
@pytest.mark.slow
def test_the_example_trainer_is_searched_and_its_export_applies_to_a_new_trainer(tmp_path: Path) -> None:
    out = tmp_path / "search"
    printed, progress = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(progress):
        code = cli.main(
            [
                "search", "--no-doctor", "--model", SPEC, "--space", SPACE, "--trials", "1", "--confirm", "1",
                "--replicates", "1", "--max-replicates", "1", "--windows", "3", *SHORT_FLAGS, "--device", "cpu",
                "--out", str(out), "--no-compile-cache", "--pruner", "none", "--slow-ratio", "0",
            ]
        )  # fmt: skip
    assert code == 0, progress.getvalue()[-3000:]
    assert "inferred from the Trainer's collator: input_ids: axis 1 varies" in progress.getvalue()
    searched = read(out / "best.yaml")
    assert searched.workload.spec == SPEC and searched.workload.task == "train"
    assert searched.workload.model_class == "GPT2LMHeadModel"
    assert searched.study["trials"]["total"] == 1
    # Whatever was exported (the trial or plain compile) trains a new Trainer from the same factory.
    trainer, losses = _train(tmp_path / "applied", out / "best.yaml", 6)
    assert len(losses) == 6 and all(math.isfinite(x) for x in losses)
    # The model is compiled in place exactly when the export compiles it (the space's one trial or plain compile,
    # both of the whole model; eager, if it was faster, compiles nothing).
    compiled = getattr(trainer.model, "_compiled_call_impl", None) is not None
    assert searched.config.scope in ("whole", "none") and compiled == (searched.config.scope == "whole")
    inner = trainer.optimizer.optimizer
    # A compiled step is the generated code's own, set on the optimizer itself; an eager one is the class's.
    assert ("step" in vars(inner)) == searched.config.compile_optimizer, "the optimizer step as exported"


@pytest.mark.parallel
@pytest.mark.slow  # compiles the example's GPT-2 with Inductor
def test_a_loop_prepared_by_accelerate_gets_the_configuration_in_two_lines(tmp_path: Path) -> None:
    from accelerate import Accelerator

    best = _write(tmp_path / "best.yaml")
    trainer = example.trainer()
    model = example.model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    accelerator = Accelerator(cpu=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, trainer.get_train_dataloader())
    tuned = apply_to_accelerate(model, optimizer, best)
    inner = optimizer.optimizer
    assert getattr(model, "_compiled_call_impl", None) is not None and inner.step.__name__ == "step"
    assert isinstance(inner.param_groups[0]["lr"], torch.Tensor)
    losses = []
    for _, batch in zip(range(4), loader, strict=False):
        prepared = tuned.prepare_batch(batch)
        assert prepared["input_ids"].shape[1] % 8 == 0
        loss = model(**prepared).loss
        tuned.module.backward(loss, run=accelerator.backward)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss))
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0] + 0.5
