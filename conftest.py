"""The repository's pytest plugins: the collection hooks the slow suites share.

tests/e2e's helpers (the controller harness, reporters on loopback, kubectl) are shared by
tests/chaos, tests/image and tests/gateway: their folder is on sys.path, last, so that a
suite's own modules come first.
"""

import sys
from pathlib import Path

_E2E_HELPERS = str(Path(__file__).parent / "tests" / "e2e")
if _E2E_HELPERS not in sys.path:
    sys.path.append(_E2E_HELPERS)

pytest_plugins = ("tests.suite_hooks",)
