"""A workload module that notes, into the folder AUTOTUNE_TEST_RECORDS names, when and where Inductor first asks
which vector instruction sets the host has (`torch._inductor.cpu_vec_isa.valid_vec_isa_list`).

The note is written once per process that asks: by the fork server, which imports this module
before it asks, or by a worker started by `python -m`. Only a worker's process imports it: importing it
replaces Inductor's function for the whole process, so a test generates its configuration's source from
`tests.trial_targets.workloads:tiny_infer`, the same model, instead of resolving this module.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from torch._inductor import cpu_vec_isa

from autotune import Workload
from tests.trial_targets.workloads import tiny

_asked = cpu_vec_isa.valid_vec_isa_list


def _noting() -> Any:
    records = os.environ.get("AUTOTUNE_TEST_RECORDS")
    if records and not _asked.cache_info().currsize:
        (Path(records) / f"asked-{os.getpid()}.json").write_text(json.dumps({"pid": os.getpid(), "at": time.time()}))
    return _asked()


cpu_vec_isa.valid_vec_isa_list = _noting  # type: ignore[assignment]


def model() -> Workload:
    """tiny_infer, after noting whether its process knows the host's answer already."""
    folder = Path(os.environ["AUTOTUNE_TEST_RECORDS"])
    known = bool(_asked.cache_info().currsize)
    (folder / f"process-{os.getpid()}.json").write_text(
        json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "known": known})
    )
    return tiny("infer")
