"""What the demo prints: numbered steps, the commands it runs, their real output, verdicts.

Output reads the same in a terminal and in a CI log: colour only when the console is a
terminal (rich decides), no wrapping of long lines (kubectl's columns stay as kubectl
printed them), and commands and outputs unindented, as a shell session shows them.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text


class Narrator:
    def __init__(self, console: Console | None = None, steps: int = 0) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self._steps = steps
        self._step = 0

    def step(self, title: str) -> None:
        self._step += 1
        self.console.print()
        counter = f"[{self._step}/{self._steps}]" if self._steps else f"[{self._step}]"
        self.console.print(Text(f"{counter} {title}", style="bold cyan"))

    def say(self, message: str) -> None:
        """A plain line of explanation."""
        self.console.print(Text(message))

    def detail(self, message: str) -> None:
        """A secondary line: progress, paths, timings."""
        self.console.print(Text(f"  {message}", style="dim"))

    def command(self, command: str) -> None:
        self.console.print(Text(f"$ {command}", style="bold"))

    def output(self, text: str) -> None:
        """A command's output, as it printed it."""
        text = text.rstrip("\n")
        if text:
            self.console.print(Text(text))

    def verdict(self, ok: bool, where: str) -> None:
        if ok:
            self.console.print(Text(f"OK: matches the specification ({where})", style="green"))
        else:
            self.console.print(
                Text(f"DIFFERS from the specification ({where}); it expects:", style="bold red")
            )

    def error(self, message: str) -> None:
        self.console.print(Text(message, style="bold red"))
