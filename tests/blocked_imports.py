"""Source lines that make packages unimportable, for scripts that show generated code runs without them.

A test runs such a script in a fresh interpreter (`python -c ...`): these lines come first, and
any later `import autotune` (or of another blocked package) fails as if it were not installed.
"""

from __future__ import annotations

import textwrap


def blocker_source(*packages: str) -> str:
    """Python lines that install a finder refusing to import `packages` and their submodules.

    Importing one raises `ModuleNotFoundError("<name> is not available here")` with its `name`, as a package that
    is not installed does. The lines import only `importlib.abc`
    and `sys`, so a script may record `sys.modules` after them to see what the rest of it pulls in.
    """
    if not packages:
        raise ValueError("blocker_source needs at least one package to block, got none.")
    return textwrap.dedent(
        f"""\
        import importlib.abc
        import sys

        BLOCKED = {packages!r}


        class Blocker(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"{{name}} is not available here", name=name)
                return None


        sys.meta_path.insert(0, Blocker())
        """
    )
