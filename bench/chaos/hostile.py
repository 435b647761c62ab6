"""The long version of the chaos suite's hostile-reporter scenario: 1,000 homes for minutes.

Runs tests/chaos/test_hostile_reporters.py with a longer hostile phase and prints its
figures (memory at the start and end, fallback reasons outside the guide, each home's
polls against its period). Not a test: the figures depend on the machine.

Usage: python bench/chaos/hostile.py [--seconds 600] [--services 500] [--warm-up 20]
[pytest's options, e.g. -x]. The scenario itself runs in the chaos suite (60 s);
tests/bench runs it at a tiny size (`--services 5 --seconds 10 --warm-up 5`).
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
    parser.add_argument(
        "--services", type=int, default=500, help="routed services, two hostile homes each"
    )
    parser.add_argument(
        "--warm-up", type=int, default=20, help="seconds before the hostile phase is measured"
    )
    args, pytest_options = parser.parse_known_args()
    env = {
        **os.environ,
        "CHAOS_HOSTILE_SECONDS": str(args.seconds),
        "CHAOS_HOSTILE_SERVICES": str(args.services),
        "CHAOS_HOSTILE_WARM_UP": str(args.warm_up),
    }
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
