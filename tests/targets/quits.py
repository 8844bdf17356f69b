"""A workload module that ends its process with status 0 as it is imported, as a library's import-time exit would."""

from __future__ import annotations

import os

os._exit(0)


def quits_on_import() -> None:
    """Never reached: importing the module ended the process."""
