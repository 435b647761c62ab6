"""The confirmation prompt of `kubectl ome traffic drain|undrain`, as OME reads it.

The terminal is put in raw mode and read one byte at a time until Enter: `y` or `yes`
(any case) confirms; anything else, more than 16 characters, a byte that is not
printable ASCII, Ctrl-D or a closed input declines; Ctrl-C cancels; Backspace edits.
Typed characters are echoed to stderr. The terminal is restored before anything is sent.
Input that is not a terminal never confirms (scripts pass `--yes`).
"""

from __future__ import annotations

import os
import select
import termios
import time
import tty
from typing import TextIO

from ome_routing.kubectl.actions import NOT_CONFIRMED, PROMPT
from ome_routing.kubectl.drain_checks import CANCELED, DEADLINE, Refused

__all__ = ["confirm"]

_MAX_ANSWER = 16


def _read_byte(fd: int, deadline: float) -> int | None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise Refused(DEADLINE)
    ready, _, _ = select.select([fd], [], [], left)
    if not ready:
        raise Refused(DEADLINE)
    data = os.read(fd, 1)
    return data[0] if data else None


def confirm(stdin: TextIO, stderr: TextIO, deadline: float) -> None:
    """Return when the user confirms; raise `Refused` otherwise."""
    if not stdin.isatty():
        raise Refused(NOT_CONFIRMED)
    fd = stdin.fileno()
    try:
        saved = termios.tcgetattr(fd)
        tty.setraw(fd)
    except (termios.error, OSError):
        raise Refused(NOT_CONFIRMED) from None
    try:
        stderr.write(PROMPT)
        stderr.flush()
        answer = ""
        while len(answer) <= _MAX_ANSWER:
            value = _read_byte(fd, deadline)
            if value is None or value == 4:
                raise Refused(NOT_CONFIRMED)
            if value in (10, 13):
                stderr.write("\n")
                stderr.flush()
                if answer.lower() in ("y", "yes"):
                    return
                raise Refused(NOT_CONFIRMED)
            if value == 3:
                raise Refused(CANCELED)
            if value in (8, 127):
                answer = answer[:-1]
                continue
            if value < 32 or value > 126:
                raise Refused(NOT_CONFIRMED)
            answer += chr(value)
            stderr.write(chr(value))
            stderr.flush()
        raise Refused(NOT_CONFIRMED)
    finally:
        try:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        except termios.error:
            raise Refused("restore confirmation terminal failed; no request submitted") from None
