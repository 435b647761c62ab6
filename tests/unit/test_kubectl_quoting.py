"""`kubectl ome` quotes what the user typed as OME's Go plugin does (`%q`), bytes that are
not UTF-8 included: the plugin and the controller share `core.quoting.quote`."""

from __future__ import annotations

import os
import subprocess
import sys

PLUGIN = "from ome_routing.cli.kubectl_ome import main; main()"


def test_a_name_that_is_not_utf8_is_quoted_byte_by_byte_as_go_does() -> None:
    """The argument's bytes reach the plugin as the shell passed them; Go writes `\\xff`."""
    result = subprocess.run(
        [sys.executable, "-c", PLUGIN, b"traffic", b"status", b"a\xffb"],
        capture_output=True,
        env=os.environ,
        check=False,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(b'error: invalid InferenceService name "a\\xffb": ')
