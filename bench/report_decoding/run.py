"""Report decoding: microseconds per `parse_report` call, for each kind of body.

The usual report takes a regex fast path; a valid body of another shape goes through
Python's `json`; a body that `json` refuses is read again by Go's scanner for Go's error
text. This times each kind, so that a change to decoding can be checked against the
code it replaces: `--against REV` times the same bodies with the `src/` of a git
revision too, alternating the two in separate processes round by round, and prints the
best of each (the least disturbed by whatever else runs on the machine).

    .venv/bin/python bench/report_decoding/run.py --against main

Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BODIES = {
    "usual shape": b'{"servable": 4, "observedAt": "2026-09-28T10:00:00Z"}',
    "valid, other shape": (
        b'{"observedAt": "2026-09-28T10:00:00Z", "servable": 4, "model": "m", "queue": [1, 2]}'
    ),
    "empty (HEAD)": b"",
    "HTML error page": b"<html><body>502 Bad Gateway</body></html>",
    "cut short": b'{"servable": 4, "observedAt": "2026-09-28T10:00:00Z"',
    "not UTF-8 outside strings": b'{"servable": 4} \xff',
}
#: run in a fresh interpreter with one `src/` on its path; prints {name: best microseconds}
_TIMER = """
import json, sys, timeit
from ome_routing.core.report import ReportError, parse_report
bodies = {k: bytes.fromhex(v) for k, v in json.loads(sys.argv[1]).items()}
def once(body):
    try:
        parse_report(body)
    except ReportError:
        pass
best = {}
for name, body in bodies.items():
    runs = timeit.repeat(lambda: once(body), number=2000, repeat=5)
    best[name] = min(runs) / 2000 * 1e6
print(json.dumps(best))
"""


def _time(src: Path) -> dict[str, float]:
    bodies = json.dumps({name: body.hex() for name, body in BODIES.items()})
    out = subprocess.run(
        [sys.executable, "-c", _TIMER, bodies],
        env={"PYTHONPATH": str(src), "PATH": ""},
        capture_output=True,
        check=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", metavar="REV", help="also time the src/ of this revision")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sources = {"this tree": ROOT / "src"}
    with tempfile.TemporaryDirectory() as scratch:
        if args.against:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.against, "src"],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", scratch], input=archive, check=True)
            sources[args.against] = Path(scratch) / "src"
        best: dict[str, dict[str, float]] = {label: {} for label in sources}
        for _ in range(args.rounds):
            for label, src in sources.items():
                for name, micros in _time(src).items():
                    best[label][name] = min(best[label].get(name, micros), micros)
    print(f"{'body':28s}" + "".join(f"{label:>14s}" for label in sources))
    for name in BODIES:
        print(f"{name:28s}" + "".join(f"{best[label][name]:12.2f}us" for label in sources))


if __name__ == "__main__":
    main()
