"""Workload: resolving `pkg.mod:attr` targets, validation, batches, forward and loss, the summary."""

from __future__ import annotations

from collections import UserDict

import pytest
import torch
from torch import nn

from autotune import ConfigError, Workload, WorkloadError, resolve
from autotune.runtime.summary import WorkloadSummary
from autotune.workload import find_repeated_blocks, seed_everything
from tests.targets.workloads import TinyLM, make_batches

pytestmark = pytest.mark.parallel

TARGETS = "tests.targets.workloads"


def infer(**fields: object) -> Workload:
    return Workload(**{"model": TinyLM(), "batches": make_batches, "task": "infer", **fields})


# --- resolving targets ---------------------------------------------------------------------------


def test_resolves_a_workload_instance() -> None:
    from tests.targets import workloads

    assert resolve(f"{TARGETS}:workload") is workloads.workload


def test_resolves_a_factory_and_a_dotted_attribute() -> None:
    built = resolve(f"{TARGETS}:factory")
    assert isinstance(built, Workload) and built.task == "infer"
    assert resolve(f"{TARGETS}:Registry.inner").task == "train"


def test_resolves_the_bundled_toy(toy: Workload) -> None:
    assert toy.task == "train" and type(toy.model).__name__ == "ToyLM"
    assert toy.optimizer is not None


def test_unimportable_module_shows_the_import_error() -> None:
    with pytest.raises(WorkloadError) as raised:
        resolve("tests.targets.broken_import:model")
    message = str(raised.value)
    assert "cannot import 'tests.targets.broken_import'" in message
    assert "ModuleNotFoundError: No module named 'autotune_missing_dependency_xyz'" in message


def test_module_failing_at_import_shows_its_exception() -> None:
    with pytest.raises(WorkloadError, match="RuntimeError: CHECKPOINT_DIR is not set"):
        resolve("tests.targets.raises_on_import:model")


def test_missing_package_is_an_import_error_with_a_hint_about_the_working_directory() -> None:
    with pytest.raises(
        WorkloadError, match="cannot import 'no_such_package_xyz.mod'.*No module named 'no_such_package_xyz'"
    ) as raised:
        resolve("no_such_package_xyz.mod:model")
    assert "run autotune from the folder that contains it, or add that folder to PYTHONPATH" in str(raised.value)


def test_missing_attribute_lists_public_callables() -> None:
    with pytest.raises(WorkloadError) as raised:
        resolve(f"{TARGETS}:modle")
    message = str(raised.value)
    assert f"'{TARGETS}' has no attribute 'modle'" in message
    listed = message.split("what it defines that could be one: ")[1]
    for name in ("factory", "make_batches", "raises_in_factory", "TinyLM", "Registry", "workload"):
        assert f"'{name}'" in listed
    assert "_private_helper" not in listed
    assert "'Workload'" not in listed and "'nn'" not in listed, "names it imported are not its own"


@pytest.mark.parametrize(
    ("attr", "said"),
    [
        ("returns_number", "the factory returned an object of type int"),
        ("returns_nothing", "the factory returned an object of type NoneType"),
        ("Registry", "the target is the class Registry"),
        ("BATCH_SIZE", "the target is an object of type int"),
    ],
)
def test_wrong_target_type_says_what_it_got_and_what_is_accepted(attr: str, said: str) -> None:
    with pytest.raises(WorkloadError) as raised:
        resolve(f"{TARGETS}:{attr}")
    message = str(raised.value)
    assert "accepted: an autotune.Workload, a torch.nn.Module, a transformers.Trainer, a LightningModule" in message
    assert "or a zero-argument callable returning one of them" in message
    assert said in message


@pytest.mark.parametrize("attr", ["bare_module", "TinyLM"])
def test_bare_module_or_its_class_asks_for_inputs_or_a_workload(attr: str) -> None:
    # A module's class is built with no arguments, as a factory would be; then it is a bare module like any other.
    with pytest.raises(WorkloadError, match="bare TinyLM, and autotune cannot tell what batches.*--inputs.*Workload"):
        resolve(f"{TARGETS}:{attr}")


def test_factory_with_required_arguments() -> None:
    with pytest.raises(WorkloadError, match=r"must take no arguments, but it requires \['size'\]"):
        resolve(f"{TARGETS}:needs_arguments")


def test_factory_that_raises() -> None:
    with pytest.raises(WorkloadError, match="calling the factory raised RuntimeError: the dataset is not downloaded"):
        resolve(f"{TARGETS}:raises_in_factory")


def test_train_without_optimizer() -> None:
    with pytest.raises(WorkloadError, match="Workload.optimizer: a train workload needs an optimizer factory"):
        resolve(f"{TARGETS}:train_without_optimizer")


def test_dynamic_dims_naming_a_missing_input() -> None:
    workload = resolve(f"{TARGETS}:missing_input")
    with pytest.raises(WorkloadError) as raised:
        workload.draw_batches()
    assert "batch 0 has no input 'attention_mask'; its inputs: ['input_ids', 'labels']" in str(raised.value)


def test_dynamic_axis_out_of_range() -> None:
    workload = resolve(f"{TARGETS}:axis_out_of_range")
    with pytest.raises(
        WorkloadError, match=r"axis 2 of input 'input_ids' is out of range; its shape is \(2, 5\) \(axes 0..1\)"
    ):
        workload.draw_batches()


@pytest.mark.parametrize("spec", ["examples.toy", "examples.toy:model:x", ":model", "examples.toy:", "", None])
def test_malformed_target(spec: object) -> None:
    with pytest.raises(WorkloadError, match="expected 'package.module:attribute'"):
        resolve(spec)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "spec", ["os;touch /tmp/x:model", "../etc/passwd:x", ".relative:model", "examples/toy.py:model"]
)
def test_hostile_or_path_like_targets_are_import_errors(spec: str) -> None:
    with pytest.raises(WorkloadError, match="cannot import"):
        resolve(spec)


# --- validating a Workload ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"model": "gpt2"}, "Workload.model: expected a torch.nn.Module, got str"),
        ({"task": "eval"}, "Workload.task: 'eval' is not allowed"),
        ({"autocast": torch.float32}, "Workload.autocast: torch.float32 is not allowed"),
        ({"num_batches": 0}, "Workload.num_batches: 0"),
        ({"num_batches": True}, "Workload.num_batches: True"),
        ({"dynamic_dims": ["input_ids"]}, "dynamic_dims: expected a mapping"),
        ({"dynamic_dims": {"input_ids": 1}}, "dynamic_dims.input_ids: expected a non-empty list of axes"),
        ({"dynamic_dims": {"input_ids": []}}, "dynamic_dims.input_ids: expected a non-empty list of axes"),
        ({"dynamic_dims": {"input_ids": [-1]}}, "dynamic_dims.input_ids: axis -1"),
        ({"dynamic_dims": {"input_ids": ["1"]}}, "dynamic_dims.input_ids: axis '1'"),
        ({"dynamic_dims": {"input ids": [1]}}, "'input ids' is not a valid input name"),
        ({"dynamic_dims": {"x'] or __import__('os').system('id') or ['": [1]}}, "is not a valid input name"),
        (
            {"dynamic_dims": {"input_ids": [1]}, "pad_values": {"labels": -100}},
            "pad_values: 'labels' is not one of the dynamic inputs",
        ),
        ({"dynamic_dims": {"input_ids": [1]}, "pad_values": {"input_ids": "pad"}}, "pad_values.input_ids: 'pad'"),
        ({"modules": ["embed", "decoder"]}, "Workload.modules: 'decoder' is not a submodule of the model"),
        ({"modules": ["embed; import os"]}, "Workload.modules: 'embed; import os' is not a submodule"),
        ({"blocks": ["layers.0"]}, "Workload.blocks: 'layers.0' must be a ModuleList/Sequential of two or more blocks"),
        ({"blocks": ["head"]}, "Workload.blocks: 'head' must be a ModuleList/Sequential"),
        ({"blocks": ["nope"]}, "its children: ['embed', 'layers', 'head']"),
    ],
)
def test_invalid_workload_field_is_named(fields: dict, named: str) -> None:
    with pytest.raises(WorkloadError) as raised:
        infer(**fields)
    assert named in str(raised.value)


def test_dynamic_dims_accept_positions_and_sort_axes() -> None:
    workload = infer(dynamic_dims={"input_ids": [1, 0, 1], "1": [1]}, pad_values={"1": -100})
    assert workload.dynamic_dims == {"input_ids": (0, 1), 1: (1,)}
    assert workload.pad_values == {1: -100}


def test_module_and_block_paths() -> None:
    workload = infer()
    assert workload.module_paths() == ("embed", "head")  # ModuleLists have no forward of their own
    assert workload.block_paths() == ("layers",)
    chosen = infer(modules=["layers.0", "head"], blocks=["layers"])
    assert chosen.module_paths() == ("layers.0", "head")
    assert chosen.block_paths() == ("layers",)


def test_repeated_blocks_are_detected(toy: Workload) -> None:
    assert find_repeated_blocks(toy.model) == ("encoder.blocks",)
    assert toy.module_paths() == ("embed", "encoder", "head")
    mixed = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2))
    assert find_repeated_blocks(nn.ModuleDict({"a": mixed})) == ()
    nested = nn.ModuleDict({"outer": nn.ModuleList(nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2)) for _ in range(2))})
    assert find_repeated_blocks(nested) == ("outer",)  # not also outer.0, inside a block already found


def test_sequential_model_uses_numbered_child_paths() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
    workload = Workload(model=model, batches=[torch.randn(2, 4)], task="infer")
    batches = workload.draw_batches()
    summary = workload.summary("pkg:model", batches)
    assert summary.modules == ("0", "2")


# --- batches --------------------------------------------------------------------------------------


def test_batches_are_reproducible_across_draws() -> None:
    workload = infer()
    first, second = workload.draw_batches(seed=3), workload.draw_batches(seed=3)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"])
    assert not torch.equal(workload.draw_batches(seed=4)[0]["input_ids"], first[0]["input_ids"])


def test_draws_at_most_num_batches_from_an_endless_iterable() -> None:
    def endless():
        while True:
            yield torch.randn(2, 3)

    workload = Workload(model=nn.Linear(3, 3), batches=endless, task="infer", num_batches=4)
    assert len(workload.draw_batches()) == 4


def test_a_dataloader_is_a_batch_source() -> None:
    samples = [{"x": torch.randn(3), "y": torch.tensor(i)} for i in range(6)]
    loader = torch.utils.data.DataLoader(samples, batch_size=2)
    workload = Workload(model=nn.Linear(3, 3), batches=loader, task="infer", forward=lambda m, b: m(b["x"]))
    batches = workload.draw_batches()
    assert len(batches) == 3 and batches[0]["x"].shape == (2, 3)


def test_mapping_batches_become_plain_dicts() -> None:
    batch = UserDict({"input_ids": torch.ones(2, 3, dtype=torch.long), "labels": torch.ones(2, 3, dtype=torch.long)})
    workload = infer(batches=[batch])
    (drawn,) = workload.draw_batches()
    assert type(drawn) is dict and set(drawn) == {"input_ids", "labels"}


@pytest.mark.parametrize(
    ("batches", "named"),
    [
        ([], "no batch was produced"),
        (42, "int is not iterable"),
        (["text"], "batch 0: str is not a batch"),
    ],
)
def test_bad_batches(batches: object, named: str) -> None:
    with pytest.raises(WorkloadError, match=named):
        infer(batches=batches).draw_batches()


def test_seed_everything_seeds_torch_and_random() -> None:
    import random

    seed_everything(7)
    a = (random.random(), torch.rand(1))
    seed_everything(7)
    assert (random.random(), torch.rand(1)) == a


# --- forward and loss ------------------------------------------------------------------------------


def test_run_forward_for_each_batch_shape() -> None:
    model = nn.Bilinear(2, 2, 1)
    x, y = torch.randn(3, 2), torch.randn(3, 2)
    workload = Workload(model=model, batches=[(x, y)], task="infer")
    assert torch.equal(workload.run_forward(model, (x, y)), model(x, y))
    assert torch.equal(workload.run_forward(model, [x, y]), model(x, y))
    single = Workload(model=nn.Linear(2, 1), batches=[x], task="infer")
    assert torch.equal(single.run_forward(single.model, x), single.model(x))
    custom = Workload(model=nn.Linear(2, 1), batches=[(x, y)], task="infer", forward=lambda m, b: m(b[0]))
    assert torch.equal(custom.run_forward(custom.model, (x, y)), custom.model(x))
    keywords = infer()
    batch = make_batches()[0]
    assert torch.equal(keywords.run_forward(keywords.model, batch)["loss"], keywords.model(**batch)["loss"])


def test_loss_defaults_to_the_output_loss() -> None:
    workload = infer()
    loss = torch.tensor(1.5)
    assert workload.compute_loss({"loss": loss}, {}) is loss

    class Output:
        pass

    output = Output()
    output.loss = loss  # type: ignore[attr-defined]
    assert workload.compute_loss(output, {}) is loss
    custom = infer(loss=lambda output, batch: output["logits"].sum())
    assert custom.compute_loss({"logits": torch.ones(2)}, {}).item() == 2.0


def test_missing_loss_says_how_to_give_one() -> None:
    with pytest.raises(
        WorkloadError, match=r"the model's output \(Tensor\) has no `.loss`; pass loss=lambda output, batch"
    ):
        infer().compute_loss(torch.ones(2), {})


# --- the summary ----------------------------------------------------------------------------------


def test_summary_records_what_codegen_needs(toy: Workload, toy_summary: WorkloadSummary) -> None:
    batches = toy.draw_batches()
    assert toy_summary.spec == "examples.toy:model"
    assert (toy_summary.task, toy_summary.model_class) == ("train", "ToyLM")
    assert toy_summary.modules == ("embed", "encoder", "head")
    assert toy_summary.blocks == ("encoder.blocks",)
    assert toy_summary.dynamic_dims == {"input_ids": (1,), "attention_mask": (1,), "labels": (1,)}
    assert toy_summary.pad_values == {"labels": -100}
    # The longest lengths the workload declares ('max' padding pads to them), not the longest of the drawn batches.
    assert toy_summary.max_lengths == {key: {1: 64} for key in ("input_ids", "attention_mask", "labels")}
    assert toy_summary.samples_per_batch == batches[0]["input_ids"].shape[0]


def test_summary_round_trip(toy_summary: WorkloadSummary) -> None:
    assert WorkloadSummary.from_dict(toy_summary.to_dict()) == toy_summary
    # best.yaml may carry axes and positions as text (JSON keys).
    data = {"spec": "m:w", "task": "infer", "dynamic_dims": {"0": [1]}, "max_lengths": {"0": {"1": 40}}}
    summary = WorkloadSummary.from_dict(data)
    assert summary.dynamic_dims == {0: (1,)} and summary.max_lengths == {0: {1: 40}}


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ("m:w", "workload: expected a mapping"),
        ({"spec": "m:w", "task": "infer", "model": "x"}, "unknown key(s) ['model']"),
        ({"task": "infer"}, "workload.spec: expected a 'pkg.mod:attr' string"),
        ({"spec": "m:w"}, "workload.task: the required key is missing"),
        ({"spec": "m:w", "task": "serve"}, "workload.task: 'serve' is not allowed"),
        ({"spec": "m:w", "task": "infer", "model_class": 3}, "workload.model_class: expected a string"),
        ({"spec": "m:w", "task": "infer", "samples_per_batch": 0}, "workload.samples_per_batch: 0"),
        ({"spec": "m:w", "task": "infer", "modules": "encoder"}, "workload.modules: expected a list"),
        ({"spec": "m:w", "task": "infer", "modules": ["x'); import os; ('"]}, "is not a submodule path"),
        ({"spec": "m:w", "task": "infer", "blocks": ["layers\n"]}, "is not a submodule path"),
        ({"spec": "m:w", "task": "infer", "dynamic_dims": {"ids)]; import os #": [1]}}, "is not a valid input name"),
        ({"spec": "m:w", "task": "infer", "max_lengths": {"ids": [1]}}, "workload.max_lengths.ids: expected a mapping"),
        ({"spec": "m:w", "task": "infer", "max_lengths": {"ids": {1: "x"}}}, "workload.max_lengths.ids"),
        ({"spec": "m:w", "task": "infer", "autocast": "float32"}, "workload.autocast: 'float32'"),
    ],
)
def test_summary_from_dict_errors(data: object, named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        WorkloadSummary.from_dict(data)
    assert named in str(raised.value)


def test_preimport_imports_the_target_s_module_builds_nothing_and_leaves_failures_to_resolve(monkeypatch) -> None:
    import sys

    from autotune.workload import preimport

    monkeypatch.delitem(sys.modules, "tests.targets.doctor", raising=False)
    preimport("tests.targets.doctor:gpt2_default_loss")
    assert "tests.targets.doctor" in sys.modules
    for failing in ("tests.targets.raises_on_import:model", "tests.targets.broken_import:model", "not a spec"):
        preimport(failing)  # resolve names these failures, with their cause
    with pytest.raises(WorkloadError, match="cannot import 'tests.targets.broken_import'"):
        resolve("tests.targets.broken_import:model")


# --- gradient accumulation -----------------------------------------------------------------------


def test_with_gradient_accumulation_the_optimizer_steps_every_k_batches_on_their_mean_gradient() -> None:
    import copy
    from types import SimpleNamespace

    from autotune.trial.measuring import whole_steps
    from autotune.workload.steps import StepRunner

    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    start = copy.deepcopy(model)
    batches = [torch.randn(2, 3) for _ in range(8)]
    stepped: list[list[torch.Tensor]] = []

    class Recorded(torch.optim.SGD):
        def step(self, closure=None):  # type: ignore[override]
            stepped.append([p.grad.clone() for p in self.param_groups[0]["params"]])
            return super().step(closure)

    def square(output: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        return output.pow(2).mean()

    workload = Workload(
        model=model,
        batches=batches,
        task="train",
        optimizer=lambda params: Recorded(params, lr=0.1),
        loss=square,
        accumulation_steps=4,
    )
    runner = StepRunner(workload, torch.device("cpu"), cuda_graphs=False)
    optimizer = workload.optimizer(model.parameters())  # type: ignore[misc]
    for batch in batches[:3]:
        runner(model, optimizer, batch)
    assert not stepped, "no optimizer step before the 4th micro-batch"
    runner(model, optimizer, batches[3])
    assert len(stepped) == 1
    # The step saw the mean of the 4 micro-batches' gradients, as a trainer that accumulates computes it.
    mean_loss = sum(square(start(b), b) for b in batches[:4]) / 4
    expected = torch.autograd.grad(mean_loss, list(start.parameters()))
    for got, want in zip(stepped[0], expected, strict=True):
        torch.testing.assert_close(got, want)
    assert all(p.grad is None for p in model.parameters()), "the gradients were cleared after the step"
    for batch in batches[4:]:
        runner(model, optimizer, batch)
    assert len(stepped) == 2
    # A timed span is continued from its start to whole optimizer steps; one of whole steps is left as it is.
    trial = SimpleNamespace(workload=workload)
    assert whole_steps(list("abcdef"), trial) == list("abcdefab")  # type: ignore[arg-type]
    assert whole_steps(list("abcdefgh"), trial) == list("abcdefgh")  # type: ignore[arg-type]
    assert whole_steps([], trial) == []  # type: ignore[arg-type]


def test_gradient_accumulation_is_refused_where_it_cannot_apply() -> None:
    with pytest.raises(WorkloadError, match="accumulation_steps: 4 applies to training only"):
        infer(accumulation_steps=4)
    train = {"model": TinyLM(), "batches": make_batches, "task": "train", "optimizer": torch.optim.SGD}
    with pytest.raises(WorkloadError, match="num_batches: 6 is not a multiple of accumulation_steps=4.*num_batches=8"):
        Workload(**train, num_batches=6, accumulation_steps=4)  # type: ignore[arg-type]
    with pytest.raises(WorkloadError, match="accumulation_steps: 0 must be an integer >= 1"):
        Workload(**train, accumulation_steps=0)  # type: ignore[arg-type]
    built = Workload(**train, accumulation_steps=4)  # type: ignore[arg-type]
    assert built.summary("x:y", built.draw_batches()).accumulation_steps == 4
    assert WorkloadSummary.from_dict(built.summary("x:y", built.draw_batches()).to_dict()).accumulation_steps == 4


def test_a_kind_of_target_registered_in_one_module_is_resolved_and_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.workload import targets

    class Recipe:
        """A stand-in for a library's training object, which says its own model and batches."""

    monkeypatch.setattr(targets, "_KINDS", dict(targets._KINDS))  # the registry as it was, after the test
    built = Workload(model=nn.Linear(4, 2), batches=lambda: iter([torch.randn(3, 4)] * 4), task="infer", num_batches=4)
    targets.register_target(
        targets.TargetKind(name="a Recipe", recognises=lambda obj: isinstance(obj, Recipe), build=lambda t, **_: built)
    )
    from tests.targets import workloads

    monkeypatch.setattr(workloads, "recipe", Recipe(), raising=False)
    assert resolve("tests.targets.workloads:recipe") is built
    with pytest.raises(WorkloadError, match="a Recipe, or a zero-argument callable"):
        resolve(f"{TARGETS}:returns_number")
