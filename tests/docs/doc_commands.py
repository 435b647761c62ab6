"""The commands the docs name (`ome-routing ...`, `kubectl ome ...`), checked against the CLI.

`invocations(code, line)` finds each command in a piece of shell (a logical line: comments
cut, `\\`-continued lines joined) where a command starts, not as another command's argument
(the release `ome-routing` of `helm install ome-routing`), and splits it into words;
`CommandTree.problems(...)` walks the words down the click commands themselves
(`ome_routing.cli.main.main` and `ome_routing.cli.kubectl_ome.cli`): each word in a
subcommand's place must name one, each `--flag` or `-f` must be an option of the command
reached (a flag's value is skipped).

How docs words are read:
- `a|b` with no space around the bar is a choice, each of which must exist
  (`dev tools|up|down`); ` | ` with spaces is a pipe and ends the command, as do `;`, `&`,
  `)`, a backquote and a redirection;
- `[` and `]` of optional parts are dropped; `--flag=value` is `--flag`;
- in a subcommand's place, a placeholder (`<verb>`, `VERB`, `...`, `$x`) ends the check.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import click

# the program as a shell word of its own, perhaps with a path (`.venv/bin/ome-routing`), not
# the end of another word (`--set image.repository=example.com/ome-routing`)
_PROGRAM = re.compile(
    r"(?:^|(?<=[\s\"'(;|&`]))(?:[\w.~$(){}/-]*/)?"
    r"(?P<program>ome-routing|kubectl-ome|kubectl[ \t]+ome)(?=[ \t]|$)"
)
_COMMAND_STARTS = frozenset(";|&(`{!\"'")
_PREFIX_WORDS = frozenset(
    {"sudo", "eval", "exec", "env", "time", "nohup", "xargs", "command", "then", "do", "else"}
)
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=\S*")
_FLAG = re.compile(r"^(?:--[A-Za-z0-9][\w-]*|-[A-Za-z])(?:=.*)?$")
_PROMPT = re.compile(r"^\s*[$#] ")


@dataclass(frozen=True)
class Invocation:
    line: int
    program: str  # "ome-routing" or "kubectl ome"
    words: tuple[str, ...]

    def __str__(self) -> str:
        return " ".join((self.program, *self.words))


def logical_lines(
    code: str, first_line: int, *, console: bool = False
) -> Iterator[tuple[int, str]]:
    """(line, text) of each command line: comments cut, continued lines joined.

    In a `console` block only the lines after a `$ ` prompt (and their continuations) are
    commands; the rest is output.
    """
    pending: list[str] = []
    start = first_line
    for number, raw in enumerate(code.splitlines(), start=first_line):
        if not pending:
            if console:
                if not _PROMPT.match(raw):
                    continue
                raw = _PROMPT.sub("", raw, count=1)
            start = number
        text = strip_comment(raw)
        if text.endswith("\\") and not text.endswith("\\\\"):
            pending.append(text[:-1])
            continue
        pending.append(text)
        yield start, " ".join(part.strip() for part in pending)
        pending = []
    if pending:
        yield start, " ".join(part.strip() for part in pending)


def strip_comment(line: str) -> str:
    """The line without a shell comment (a `#` starting a word outside quotes)."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line


def invocations(code: str, line: int) -> list[Invocation]:
    """Every `ome-routing ...` / `kubectl ome ...` in one logical line of shell."""
    found = []
    for match in _PROGRAM.finditer(code):
        if match.group("program") == "ome-routing" and not _at_command_position(
            code, match.start()
        ):
            continue  # a release, namespace or label value named ome-routing
        program = "ome-routing" if match.group("program") == "ome-routing" else "kubectl ome"
        found.append(Invocation(line, program, tuple(_words(_segment(code, match.end())))))
    return found


def _at_command_position(code: str, start: int) -> bool:
    """Whether a command starts at `start`: first in the line, after a separator or `$(`,
    or after a word that runs the next one (`sudo`, `eval`, `VAR=value`, ...); not an
    argument (`helm install ome-routing ...`, `-n ome-routing`)."""
    before = code[:start].rstrip()
    if not before or before[-1] in _COMMAND_STARTS:
        return True
    word = before.split()[-1]
    return word in _PREFIX_WORDS or bool(_ASSIGNMENT.fullmatch(word))


def _segment(code: str, start: int) -> str:
    """The command's own text: up to the first unquoted separator."""
    quote = ""
    index = start
    while index < len(code):
        char = code[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in ";&)`<>" or (char == "|" and _is_pipe(code, index)):
            return code[start:index]
        index += 1
    return code[start:]


def _is_pipe(code: str, index: int) -> bool:
    """A bar with a space (or another bar) beside it; `a|b` is a choice in the docs."""
    before = code[index - 1 : index]
    after = code[index + 1 : index + 2]
    return before.isspace() or after in ("", "|") or after.isspace()


def _words(segment: str) -> list[str]:
    try:
        raw = shlex.split(segment)
    except ValueError:
        raw = segment.split()
    words = []
    for word in raw:
        word = word.strip("[]")
        if word:
            words.append(word)
    return words


def _placeholder(word: str) -> bool:
    return (
        word.startswith("<")
        or "..." in word
        or any(char in word for char in "${}*")
        or (word.isupper() and word.replace("_", "").isalpha())
    )


class CommandTree:
    """The CLI's click commands by program name, read for the docs' checks."""

    def __init__(self, programs: Mapping[str, click.Command]) -> None:
        self._programs = dict(programs)

    @classmethod
    def of_project(cls) -> CommandTree:
        from ome_routing.cli.kubectl_ome import cli as kubectl_ome
        from ome_routing.cli.main import main as ome_routing

        return cls({"ome-routing": ome_routing, "kubectl ome": kubectl_ome})

    def problems(self, invocation: Invocation) -> list[str]:
        """What in the invocation the CLI does not have; [] when all of it exists."""
        root = self._programs[invocation.program]
        current = [
            (root, click.Context(root, info_name=invocation.program, **root.context_settings))
        ]
        path = [invocation.program]
        found: list[str] = []
        words = list(invocation.words)
        index = 0
        while index < len(words):
            word = words[index]
            index += 1
            if word == "--":
                break
            if word.startswith("-"):
                if not _FLAG.match(word):
                    continue
                name = word.split("=", 1)[0]
                options = [
                    param
                    for command, ctx in current
                    for param in command.get_params(ctx)
                    if isinstance(param, click.Option)
                    and (name in param.opts or name in param.secondary_opts)
                ]
                if not options:
                    found.append(f"`{' '.join(path)}` has no flag {name}")
                elif "=" not in word and not (options[0].is_flag or options[0].count):
                    index += options[0].nargs
                continue
            groups = [
                (command, ctx) for command, ctx in current if isinstance(command, click.Group)
            ]
            if not groups:
                continue  # an argument of the command reached
            if _placeholder(word):
                break
            chosen = []
            for name in word.split("|"):
                for group, ctx in groups:
                    sub = group.get_command(ctx, name)
                    if sub is not None:
                        chosen.append(
                            (
                                sub,
                                click.Context(
                                    sub, info_name=name, parent=ctx, **sub.context_settings
                                ),
                            )
                        )
                        break
                else:
                    found.append(f"`{' '.join(path)}` has no subcommand {name}")
            if not chosen:
                break
            path.append(word)
            current = chosen
        return found
