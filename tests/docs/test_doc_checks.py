"""Each check of the docs catches its failure, on the Markdown of `fixtures/`.

The fixtures' folder stands for a repository's root: `good.md` passes every check, each
other file breaks one of them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from doc_checks import (
    Doc,
    block_environment,
    block_script,
    command_problems,
    describe_failure,
    exported_metrics,
    link_problems,
    marker_kind,
    marker_problems,
    metric_names,
    metric_problems,
    read_doc,
    run_block,
)
from doc_commands import CommandTree, Invocation, invocations, logical_lines

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture(name: str) -> Doc:
    return read_doc(FIXTURES / name, FIXTURES)


@pytest.fixture(scope="module")
def tree() -> CommandTree:
    return CommandTree.of_project()


@pytest.fixture(scope="module")
def exported() -> frozenset[str]:
    return exported_metrics()


def ended(pid: int, wait: float = 30.0) -> bool:
    """Whether the process is gone (or a zombie), waiting up to `wait` s for a kill to land."""
    stat = Path(f"/proc/{pid}/stat")
    give_up = time.monotonic() + wait
    while time.monotonic() < give_up:
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def run_env() -> dict[str, str]:
    return block_environment(os.environ)


class TestTheGoodPage:
    def test_passes_every_check(self, tree: CommandTree, exported: frozenset[str]) -> None:
        doc = fixture("good.md")
        assert marker_problems(doc) == []
        assert link_problems(doc, FIXTURES) == []
        assert command_problems(doc, tree) == []
        assert metric_problems(doc, exported) == []

    def test_its_run_block_runs_from_the_root_with_the_virtualenv_first(self) -> None:
        doc = fixture("good.md")
        fence = next(f for f in doc.document.fences if marker_kind(f) == "run")
        run = run_block(block_script(fence), cwd=FIXTURES, env=run_env())
        assert (run.returncode, run.output) == (0, "ran from fixtures\n")

    def test_a_console_block_runs_its_prompted_lines_only(self) -> None:
        fence = next(f for f in fixture("good.md").document.fences if f.language == "console")
        assert block_script(fence) == "ome-routing dev up --node --dir /tmp/node\n"


class TestMarkers:
    def test_each_fault_is_named_with_its_line(self) -> None:
        assert [p.split(" ", 1)[0] for p in marker_problems(fixture("unmarked.md"))] == [
            "unmarked.md:3:",  # no marker
            "unmarked.md:14:",  # two markers
            "unmarked.md:7:",  # an unknown kind
            "unmarked.md:18:",  # before a yaml block
            "unmarked.md:23:",  # before nothing
        ]

    def test_the_messages_say_what_is_wrong(self) -> None:
        problems = "\n".join(marker_problems(fixture("unmarked.md")))
        assert "unmarked.md:3: ```bash block has no doc-test marker" in problems
        assert "unmarked.md:14: ```shell block has more than one doc-test marker" in problems
        assert "<!-- doc-test: runn --> is not a doc-test marker" in problems
        assert "is before a ```yaml block, not a shell block" in problems
        assert (
            "unmarked.md:23: <!-- doc-test: illustration --> is not on the line right before"
            in problems
        )


class TestLinks:
    def test_each_bad_link_is_named_with_its_line(self) -> None:
        assert link_problems(fixture("bad_links.md"), FIXTURES) == [
            "bad_links.md:3: link 'nowhere.md': no such file nowhere.md",
            "bad_links.md:3: link '#nowhere': bad_links.md has no heading #nowhere",
            "bad_links.md:5: link 'other.md#no-such-heading': other.md has no heading #no-such-heading",
            "bad_links.md:5: link '../../../../etc/hostname' points outside the repository",
            "bad_links.md:6: link 'https://' is not a well-formed URL",
        ]


class TestCommands:
    def test_missing_flags_and_subcommands_are_named(self, tree: CommandTree) -> None:
        assert command_problems(fixture("bad_commands.md"), tree) == [
            "bad_commands.md:3: `ome-routing validate-config` has no flag --config",
            "bad_commands.md:4: `ome-routing` has no subcommand frobnicate",
            "bad_commands.md:4: `ome-routing dev` has no subcommand sideways",
            "bad_commands.md:8: `kubectl ome get` has no flag --no-such-flag",
        ]

    @pytest.mark.parametrize(
        "code",
        [
            'eval "$(ome-routing dev up --node --dir /tmp/x)"',
            ".venv/bin/ome-routing demo --traffic --gateway contour | tee log",
            "kubectl-ome traffic drain chat -n prod --dry-run=client --yes",
            "kubectl ome placement endpoint ISVC -o wide 2>&1",
            "ome-routing controller [--config values.yaml] [-n NAMESPACE]",
            "ome-routing --version && ome-routing -h",
            "ome-routing <subcommand> --anything",
        ],
    )
    def test_real_commands_pass(self, tree: CommandTree, code: str) -> None:
        found = [p for inv in invocations(code, 1) for p in tree.problems(inv)]
        assert found == []

    @pytest.mark.parametrize(
        "code",
        [
            "helm install ome . --set image.repository=example.com/ome-routing -f values.yaml",
            "skopeo copy oci:$HOME/.cache/ome-routing/image/oci:0.1.0 docker://r/ome-routing:0.1.0",
            "kubectl get lease ome-routing-controller -n ome",
        ],
    )
    def test_the_name_inside_another_word_is_no_command(self, code: str) -> None:
        assert invocations(code, 1) == []

    @pytest.mark.parametrize(
        "code",
        [
            "helm upgrade --install ome-routing ./charts/ome-resources --namespace ome-routing",
            "kubectl logs -n ome-routing -l app.kubernetes.io/name=ome-routing",
            "kubectl rollout status deployment ome-routing -n ome-routing",
        ],
    )
    def test_the_name_as_another_commands_argument_is_no_command(self, code: str) -> None:
        """A release, namespace or Deployment named ome-routing is not the program."""
        assert invocations(code, 1) == []

    @pytest.mark.parametrize(
        "code",
        [
            'eval "$(ome-routing dev up)"',
            "sudo ome-routing dev up",
            "KUBECONFIG=k ome-routing dev up",
            "make image && ome-routing dev up",
        ],
    )
    def test_the_program_where_a_command_starts_is_a_command(self, code: str) -> None:
        [found] = invocations(code, 1)
        assert found.words == ("dev", "up")

    def test_the_program_with_a_path_is_a_command(self) -> None:
        found = invocations("$(BIN)/ome-routing dev image; .venv/bin/kubectl-ome get tm", 1)
        assert [(i.program, i.words) for i in found] == [
            ("ome-routing", ("dev", "image")),
            ("kubectl ome", ("get", "tm")),
        ]

    def test_a_flags_value_is_not_read_as_a_subcommand(self, tree: CommandTree) -> None:
        invocation = Invocation(1, "ome-routing", ("dev", "up", "--dir", "down"))
        assert tree.problems(invocation) == []

    def test_commands_of_a_pipe_each_checked(self, tree: CommandTree) -> None:
        (first, second) = invocations("ome-routing simulate --nope | ome-routing dev --nope", 1)
        assert first.words == ("simulate", "--nope") and second.words == ("dev", "--nope")

    def test_comments_and_continuations(self) -> None:
        code = "a \\\n  b # c 'd\n# whole\n'x # y'\n"
        assert list(logical_lines(code, 10)) == [(10, "a b"), (12, ""), (13, "'x # y'")]


class TestMetrics:
    def test_a_metric_not_exported_is_named(self, exported: frozenset[str]) -> None:
        assert metric_problems(fixture("bad_metrics.md"), exported) == [
            "bad_metrics.md:4: ome_routing_polls_made_total is not a metric the project exports"
        ]

    def test_the_package_names_are_not_metric_names(self) -> None:
        line = "`ome_routing` and `ome_routing_dev` import; ome_routing_capacity_polls_total counts"
        assert metric_names([line]) == [(1, "ome_routing_capacity_polls_total")]

    def test_both_registries_are_read(self, exported: frozenset[str]) -> None:
        assert {
            "ome_trafficmap_capacity_fallback_homes",
            "ome_routing_capacity_polls_total",
            "ome_routing_trafficmap_reconcile_duration_seconds_count",
            "ome_routing_reporter_count_age_seconds",
            "ome_routing_reporter_health_checks_total",
        } <= exported


class TestRunBlocks:
    def test_a_failing_command_fails_the_block(self) -> None:
        doc = fixture("failing_run.md")
        fence = doc.document.fences[0]
        run = run_block(block_script(fence), cwd=FIXTURES, env=run_env())
        assert (run.returncode, run.output) == (1, "before\n")
        assert describe_failure(doc.label, fence, run).startswith(
            "failing_run.md:4: ```bash block exited 1; its output:\nbefore"
        )

    def test_a_block_past_its_deadline_is_ended(self) -> None:
        doc = fixture("failing_run.md")
        fence = doc.document.fences[1]
        run = run_block(block_script(fence), cwd=FIXTURES, env=run_env(), deadline=0.5)
        assert run.returncode is None
        assert describe_failure(doc.label, fence, run, 0.5).startswith(
            "failing_run.md:11: ```bash block did not finish within 0.5 s"
        )

    def test_what_a_block_leaves_running_is_ended_with_it(self, tmp_path: Path) -> None:
        script = f"sleep 600 &\necho $! > {tmp_path}/pid\necho started\n"
        run = run_block(script, cwd=tmp_path, env=run_env(), deadline=60)
        assert (run.returncode, run.output) == (0, "started\n")
        pid = int((tmp_path / "pid").read_text())
        assert ended(pid)

    def test_a_run_block_gets_no_kubeconfig(self) -> None:
        env = block_environment({"KUBECONFIG": "/x", "PATH": "/usr/bin"})
        assert "KUBECONFIG" not in env and env["PATH"].endswith(os.pathsep + "/usr/bin")
        with_cluster = block_environment({"PATH": "/usr/bin"}, kubeconfig=Path("/k"))
        assert with_cluster["KUBECONFIG"] == "/k"
