"""The repository's pytest plugins: the collection hooks the slow suites share."""

pytest_plugins = ("tests.suite_hooks",)
