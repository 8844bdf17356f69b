"""Environment fingerprints: what they record, that they are plain data, and how two are compared."""

from __future__ import annotations

import platform

import pytest
import torch
import yaml
from torch import nn

from autotune.runtime import environment

pytestmark = pytest.mark.parallel


def test_fingerprint_records_software_and_device() -> None:
    info = environment.fingerprint("cpu")
    assert set(info) >= {"autotune", "python", "torch", "triton", "cuda", "platform", "device", "device_name", "driver"}
    assert info["torch"] == torch.__version__ and info["python"] == platform.python_version()
    assert info["device"] == "cpu" and isinstance(info["device_name"], str) and info["device_name"]
    assert set(environment.KEYS_THAT_MATTER) <= set(info)


def test_fingerprint_is_plain_yaml_data() -> None:
    info = environment.fingerprint("cpu")
    assert yaml.safe_load(yaml.safe_dump(info)) == info
    assert all(type(v) in (str, type(None)) for v in info.values())


def test_differences() -> None:
    recorded = {"torch": "2.5.0", "cuda": None, "device_name": "A"}
    current = {"torch": "2.6.0", "cuda": None, "device_name": "A", "python": "3.11"}
    assert environment.differences(recorded, current, environment.KEYS_THAT_MATTER) == {"torch": ("2.5.0", "2.6.0")}
    assert environment.differences(recorded, current) == {"python": (None, "3.11"), "torch": ("2.5.0", "2.6.0")}


def test_model_fingerprint_tracks_shapes() -> None:
    a = environment.model_fingerprint(nn.Linear(3, 4), [(2, 3)])
    assert a["model_class"] == "Linear" and a["parameters"] == 16
    assert environment.model_fingerprint(nn.Linear(3, 4), [(2, 3)]) == a
    assert environment.model_fingerprint(nn.Linear(3, 5), [(2, 3)])["shapes_sha256"] != a["shapes_sha256"]
    assert environment.model_fingerprint(nn.Linear(3, 4), [(2, 7)])["shapes_sha256"] != a["shapes_sha256"]
