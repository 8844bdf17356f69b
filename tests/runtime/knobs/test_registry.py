"""Every registered knob, from its own module alone: it validates, round-trips, generates code of its own, is read
from a space file with an error that says what is allowed, names bundled spaces that exist, probes a feature the
installed torch has, and has its row in docs/knobs.md. A new knob gets these tests by being registered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.cli._knobs_page import PAGE, REGENERATE, render
from autotune.errors import ConfigError, SpaceError
from autotune.runtime import codegen
from autotune.runtime.config import CompileConfig
from autotune.runtime.features import has_feature, torch_lacks
from autotune.runtime.knobs import BackwardWrapper, Knob, ProcessSetting, registered
from autotune.study.search import bundled_spaces, load_space
from tests.study.summaries import TOY_LIKE
from tests.study.test_dimensions import code_without_docstrings

pytestmark = pytest.mark.parallel

KNOBS = sorted(registered())


def _config(entry: Knob, value: object) -> CompileConfig:
    settings, _ = entry.example
    return CompileConfig(**{**settings, "knobs": {entry.name: value}})


def _code(config: CompileConfig) -> str:
    """The generated module without its docstrings (which describe the configuration in words)."""
    return code_without_docstrings(codegen.generate(config, TOY_LIKE, created="2026-01-02T03:04:05Z", version="0.0.0"))


def test_the_registry_finds_the_knob_modules() -> None:
    modules = sorted(p.stem for p in Path(codegen.__file__).parent.joinpath("knobs").glob("[!_]*.py"))
    assert modules == KNOBS, "each module of autotune/runtime/knobs declares one knob under its own name"


@pytest.mark.parametrize("name", KNOBS)
def test_its_neutral_value_is_no_setting_and_its_example_is_one_that_round_trips(name: str) -> None:
    entry = registered()[name]
    settings, value = entry.example
    assert CompileConfig(**{**settings, "knobs": {name: entry.neutral}}) == CompileConfig(**settings)
    assert (
        entry.allows(value) and not isinstance(value, type(None)) and entry.why_not(CompileConfig(**settings)) is None
    )
    config = _config(entry, value)
    assert config.knobs == {name: value} and config.to_dict()[name] == value
    assert CompileConfig.from_dict(config.to_dict()) == config
    assert entry.describe(value) in config.describe()
    assert not torch_lacks(config) and has_feature(name, value), "the installed torch has what it needs"


@pytest.mark.parametrize("name", KNOBS)
def test_a_value_it_does_not_allow_is_refused_naming_what_it_allows(name: str) -> None:
    entry = registered()[name]
    with pytest.raises(ConfigError, match=f"{name}: 'no such value' is not allowed; use ") as exc:
        _config(entry, "no such value")
    assert entry.allowed_text() in str(exc.value)


@pytest.mark.parametrize("name", KNOBS)
def test_its_example_generates_code_of_its_own(name: str) -> None:
    entry = registered()[name]
    settings, value = entry.example
    assert _code(_config(entry, value)) != _code(CompileConfig(**settings))


@pytest.mark.parametrize("name", KNOBS)
def test_a_space_file_lists_it_by_name_and_a_bad_choice_says_what_is_allowed(name: str, tmp_path: Path) -> None:
    entry = registered()[name]
    _, value = entry.example
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    # A JSON list is a YAML flow sequence: null, true and numbers spelled as a space file spells them.
    good.write_text(f"description: one knob\n{name}: {json.dumps([entry.neutral, value])}\n")
    assert load_space(str(good)).knobs == {name: (entry.neutral, value)}
    bad.write_text(f"description: one knob\n{name}: [{json.dumps(entry.neutral)}, not a value]\n")
    with pytest.raises(SpaceError, match=f"{name}: 'not a value' is not allowed; use ") as exc:
        load_space(str(bad))
    assert entry.allowed_text() in str(exc.value)


@pytest.mark.parametrize("name", KNOBS)
def test_the_bundled_spaces_it_names_exist_and_offer_what_it_allows(name: str) -> None:
    entry = registered()[name]
    assert set(entry.offered) <= set(bundled_spaces())
    for space, values in entry.offered.items():
        assert (values[0] == entry.neutral) == entry.neutral_offered and all(entry.allows(v) for v in values)
        assert load_space(space).knobs[name] == values


def test_docs_knobs_md_is_the_registry_s_table() -> None:
    page = Path(__file__).parents[3] / PAGE
    assert page.read_text() == render(), f"run `{REGENERATE}` and commit {PAGE}"
    for name in KNOBS:
        assert f"`{name}`" in page.read_text()


def test_what_a_knob_generates_is_checked_before_it_reaches_the_generated_file() -> None:
    with pytest.raises(ValueError, match="is not a dotted attribute of torch"):
        ProcessSetting(comment="", target="os.system", value="echo", call=True)
    wrapper = {"header": "", "comment": "", "constant_comment": "", "value": {}}
    with pytest.raises(ValueError, match=r"names \['BACKWARD', 'os'\]; only torch and BACKWARD are defined there"):
        BackwardWrapper(**wrapper, constant="BACKWARD", context="os.popen(BACKWARD)")
    with pytest.raises(ValueError, match="is not an expression"):
        BackwardWrapper(**wrapper, constant="BACKWARD", context="torch.no_grad():\n    pass")
    with pytest.raises(ValueError, match="is not an upper-case name"):
        BackwardWrapper(**wrapper, constant="kwargs", context="torch.no_grad()")
    assert BackwardWrapper(**wrapper, constant="KWARGS", context="torch.enable_grad()").context == "torch.enable_grad()"
