"""A workload module that starts a thread when imported: a process that imported it must not be forked."""

from __future__ import annotations

import threading

from tests.trial_targets.workloads import records_its_process

_stop = threading.Event()
threading.Thread(target=_stop.wait, name="started-on-import", daemon=True).start()

__all__ = ["records_its_process"]
