"""The long version of the chaos suite's hostile-reporter scenario: 1,000 homes for minutes.

Runs tests/chaos/test_hostile_reporters.py with a longer hostile phase and prints its
figures (memory at the start and end, fallback reasons outside the guide, each home's
polls against its period). Not a test: the figures depend on the machine.

Usage: python bench/chaos/hostile.py [--seconds 600] [pytest's options, e.g. -x]. The
scenario itself runs in the chaos suite (60 s); `--collect-only` checks in seconds that
this finds it (`tests/bench`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=600, help="length of the hostile phase")
    args, pytest_options = parser.parse_known_args()
    env = {**os.environ, "CHAOS_HOSTILE_SECONDS": str(args.seconds)}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        *pytest_options,
        str(ROOT / "tests" / "chaos" / "test_hostile_reporters.py"),
    ]
    return subprocess.call(command, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main())
