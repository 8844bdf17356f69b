"""AutotuneCallback: a tuned configuration applied to Lightning's `Trainer.fit`, on the CPU.

The module is a tiny language model whose batches are dicts padded by a collate function to the
longest row, so every batch has its own length and the configuration's padding and marking matter.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import lightning as L
import pytest
import torch
from torch import nn
from torch._dynamo.utils import counters
from torch.compiler._cache import CacheInfo
from torch.nn import functional as F
from torch.utils.data import DataLoader

from autotune import CompileConfig
from autotune.errors import ConfigError
from autotune.integrations.lightning import AutotuneCallback
from autotune.runtime import compile_cache
from autotune.runtime.summary import WorkloadSummary
from autotune.runtime.tuned import EnvironmentMismatchWarning
from tests.best_yaml import write_best

VOCAB = 24
SUMMARY = WorkloadSummary(
    spec="tests.integrations.test_lightning_callback:TinyLM",
    task="train",
    model_class="TinyLM",
    dynamic_dims={"input_ids": (1,), "attention_mask": (1,), "labels": (1,)},
    pad_values={"input_ids": 0, "attention_mask": 0, "labels": -100},
    samples_per_batch=4,
)
MARKS = (("input_ids", 1), ("attention_mask", 1), ("labels", 1))
COMPILED = CompileConfig(mark_dynamic=MARKS, padding_alignment=8, compile_optimizer=True)


def rows(count: int = 48) -> list[list[int]]:
    """Rows of 3 to 13 tokens; in batches of 4, the longest row of a batch has 6 to 13."""
    return [[1 + (i * 7 + j) % (VOCAB - 1) for j in range(3 + ((i // 4) * 5 + i % 4) % 11)] for i in range(count)]


def collate(features: list[list[int]]) -> dict[str, torch.Tensor]:
    longest = max(map(len, features))
    ids = torch.tensor([row + [0] * (longest - len(row)) for row in features])
    mask = torch.tensor([[1] * len(row) + [0] * (longest - len(row)) for row in features])
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


class TinyLM(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.head = nn.Linear(16, VOCAB)
        self.losses: list[float] = []
        self.lengths: list[int] = []

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        hidden = torch.tanh(self.embed(input_ids)) * attention_mask.unsqueeze(-1)
        return F.cross_entropy(self.head(hidden).flatten(0, 1), labels.flatten(), ignore_index=-100)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.lengths.append(batch["input_ids"].shape[1])
        loss = self(**batch)
        self.losses.append(float(loss.detach()))
        return loss

    def configure_optimizers(self) -> dict:
        optimizer = torch.optim.AdamW(self.parameters(), lr=0.05)
        # A learning rate that changes every step: the compiled step must not recompile for each value.
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (1 + step))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class ManualLM(TinyLM):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        optimizer = self.optimizers()
        loss = self(**batch)
        self.manual_backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        return loss


class Wrapper(L.LightningModule):
    """A LightningModule around the model that was tuned, the way many are written."""

    def __init__(self, count: int = 1) -> None:
        super().__init__()
        self.models = nn.ModuleList(TinyLM() for _ in range(count))

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.models[0](**batch)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def write(path: Path, config: CompileConfig = COMPILED, section: dict | None = None, **workload: object) -> Path:
    """The best.yaml of this module's workload (its summary changed by `workload`) tuned to `config`."""
    return write_best(path, replace(SUMMARY, **workload), config, compile_cache=section or {})


def fit(module: L.LightningModule, *callbacks: L.Callback, max_steps: int, **arguments: object) -> L.Trainer:
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        max_steps=max_steps,
        callbacks=list(callbacks),
        **arguments,
    )
    trainer.fit(module, DataLoader(rows(), batch_size=4, collate_fn=collate))
    return trainer


def tiny(cls: type[L.LightningModule] = TinyLM) -> L.LightningModule:
    torch.manual_seed(0)
    return cls()


def assert_same_losses(tuned: list[float], eager: list[float]) -> None:
    # float32 throughout: only the order of the reductions differs (padded rows add exact zeros).
    torch.testing.assert_close(torch.tensor(tuned), torch.tensor(eager), rtol=1e-4, atol=1e-5)


@pytest.fixture
def stance() -> object:
    """The compiler's stance is process-wide: check that the callback puts it back, and put it back regardless."""
    yield
    from torch._dynamo.eval_frame import _stance

    left = _stance.stance
    torch.compiler.set_stance("default")
    assert left == "default", "the fit left the eager stance behind"


@pytest.mark.slow
@pytest.mark.parallel
def test_a_tuned_fit_trains_as_eager_does_and_keeps_its_checkpoint_keys(tmp_path: Path) -> None:
    eager = tiny()
    fit(eager, max_steps=12)
    module = tiny()
    graphs = counters["stats"]["unique_graphs"]
    trainer = fit(module, AutotuneCallback(write(tmp_path / "best.yaml")), max_steps=12)
    assert len(module.losses) == 12
    assert_same_losses(module.losses, eager.losses)
    # Every batch reached training_step padded to a multiple of 8; the collate function gave 3 to 13.
    assert set(module.lengths) == {8, 16} and len(set(eager.lengths)) > 2
    # The model and the optimizer step were compiled, once each: the scheduler's values are a tensor's.
    assert module._compiled_call_impl is not None and "training_step" not in module.__dict__
    optimizer = trainer.optimizers[0]
    assert isinstance(optimizer.param_groups[0]["lr"], torch.Tensor)
    assert counters["stats"]["unique_graphs"] - graphs <= 2, "a recompile for a length or a learning rate"
    # Compiled in place: the checkpoint has the eager module's keys and loads into a fresh one.
    trainer.save_checkpoint(tmp_path / "tuned.ckpt")
    state = torch.load(tmp_path / "tuned.ckpt", weights_only=False)["state_dict"]
    assert list(state) == list(eager.state_dict())
    TinyLM().load_state_dict(state)


@pytest.mark.slow
@pytest.mark.parallel
def test_with_gradient_accumulation_the_warmup_ends_after_optimizer_steps(tmp_path: Path, stance: None) -> None:
    eager = tiny()
    fit(eager, max_steps=4, accumulate_grad_batches=4)
    config = replace(COMPILED, knobs={"stance_after_warmup": "eager_on_recompile", "compiled_autograd": True})
    callback = AutotuneCallback(write(tmp_path / "best.yaml", config), warmup_steps=2)
    module = tiny()
    ended: list[tuple[int, int]] = []
    finish = callback.tuned.module.finish_warmup

    def finish_warmup() -> None:
        ended.append((len(module.losses), trainer.global_step))
        finish()

    callback.tuned.module.finish_warmup = finish_warmup
    captures = counters["compiled_autograd"]["captures"]
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        max_steps=4,
        accumulate_grad_batches=4,
        callbacks=[callback],
    )
    trainer.fit(module, DataLoader(rows(), batch_size=4, collate_fn=collate))
    # 4 optimizer steps of 4 batches each; the warm-up ended once, after the 2nd step, i.e. the 8th batch.
    assert len(module.losses) == len(eager.losses) == 16
    assert ended == [(8, 2)]
    assert_same_losses(module.losses, eager.losses)
    assert counters["compiled_autograd"]["captures"] > captures, "the backward ran under compiled autograd"


@pytest.mark.parallel
def test_the_compile_cache_beside_best_yaml_is_loaded_when_the_configuration_has_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded: list[bytes] = []

    def load(payload: bytes) -> CacheInfo:
        loaded.append(payload)
        info = CacheInfo()
        info.artifacts["inductor"].append("stand-in")
        return info

    monkeypatch.setattr(torch.compiler, "load_cache_artifacts", load)
    payload = b"\x00stand-in artifacts\xff" * 10
    here = compile_cache.running_fingerprint("cpu")
    compile_cache.write_cache_file(tmp_path / compile_cache.CACHE_FILE, payload, here)
    eager = CompileConfig(scope="none")  # nothing to compile: only the cache is looked at
    fit(tiny(), AutotuneCallback(write(tmp_path / "plain.yaml", eager)), max_steps=1)
    assert loaded == [], "best.yaml has no compile_cache section: the file beside it is not its own"
    fit(tiny(), AutotuneCallback(write(tmp_path / "best.yaml", eager, {"fingerprint": here})), max_steps=1)
    assert loaded == [payload]


@pytest.mark.parallel
def test_the_tuned_class_is_found_inside_the_lightning_module(tmp_path: Path) -> None:
    # limit_train_batches=0: the fit starts (and compiles, lazily) but runs no step, so nothing compiles yet.
    wrapper = Wrapper()
    fit(wrapper, AutotuneCallback(write(tmp_path / "best.yaml")), max_steps=1, limit_train_batches=0)
    assert wrapper.models[0]._compiled_call_impl is not None and wrapper._compiled_call_impl is None
    with pytest.raises(ConfigError, match=r"this Wrapper holds 2 of them \(models.0, models.1\)"):
        fit(Wrapper(2), AutotuneCallback(tmp_path / "best.yaml"), max_steps=1, limit_train_batches=0)


@pytest.mark.parallel
def test_a_second_fit_keeps_the_compiled_module_and_refuses_another_configuration(tmp_path: Path) -> None:
    module = tiny()
    best = write(tmp_path / "best.yaml")
    for _ in range(2):
        fit(module, AutotuneCallback(best), max_steps=1, limit_train_batches=0)
        # The hooks are the module's own again between fits; the compile stays.
        assert "training_step" not in module.__dict__ and module._compiled_call_impl is not None
    with pytest.raises(ConfigError, match=r"TinyLM was compiled with .*best.yaml in an earlier fit, and this"):
        fit(module, AutotuneCallback(write(tmp_path / "other.yaml")), max_steps=1, limit_train_batches=0)


@pytest.mark.parallel
def test_a_configuration_for_another_task_or_model_is_refused_and_another_machine_warned(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tuned for the 'infer' task, and Lightning's Trainer.fit trains"):
        AutotuneCallback(write(tmp_path / "infer.yaml", CompileConfig(), task="infer"))
    other = AutotuneCallback(write(tmp_path / "other.yaml", model_class="BertForMaskedLM"))
    with pytest.raises(ConfigError, match="tuned for a BertForMaskedLM model .* and this model is a TinyLM"):
        fit(tiny(), other, max_steps=1)
    moved = write(tmp_path / "moved.yaml")
    moved.write_text(moved.read_text().replace(f"torch: {torch.__version__}", "torch: 2.0.0"))
    with pytest.warns(EnvironmentMismatchWarning, match="tuned in another environment") as caught:
        AutotuneCallback(moved)
    mismatch = [w.filename for w in caught if issubclass(w.category, EnvironmentMismatchWarning)]
    assert mismatch == [__file__], "the warning points at the line that made the callback"


@pytest.mark.parallel
def test_a_module_that_compiles_itself_is_refused_by_name(tmp_path: Path) -> None:
    best = write(tmp_path / "best.yaml")
    itself = tiny()
    itself.compile()
    with pytest.raises(ConfigError, match=r"TinyLM compiles itself \(nn.Module.compile\)"):
        fit(itself, AutotuneCallback(best), max_steps=1)
    inside = tiny()
    inside.head = torch.compile(inside.head)
    with pytest.raises(ConfigError, match="TinyLM.head is a torch.compile'd Linear"):
        fit(inside, AutotuneCallback(best), max_steps=1)
    with pytest.raises(ConfigError, match=r"TinyLM was passed to Trainer.fit compiled \(torch.compile\(module\)\)"):
        fit(torch.compile(tiny()), AutotuneCallback(best), max_steps=1)


@pytest.mark.parallel
def test_manual_optimization_is_refused_when_the_step_is_compiled(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ManualLM optimizes manually \(automatic_optimization = False\)"):
        fit(tiny(ManualLM), AutotuneCallback(write(tmp_path / "best.yaml")), max_steps=1)
