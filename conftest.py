"""gpupoc's pytest wiring: the plugin (options, fixtures, outcomes) for the suites and the project's tests."""

pytest_plugins = ["harness.plugin"]
