"""What every command group shares: the one-line parser, the target flags (the run options), the exit codes."""

from __future__ import annotations

import argparse
from typing import NoReturn

from harness.config.options import OPTIONS, RunConfig, resolve
from harness.targets.target import Target, connect

EXIT_USAGE = 2
PYTEST_USAGE_ERROR = 4


class OneLineParser(argparse.ArgumentParser):
    """Bad input: one line saying what is wrong, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def target_flags(parser: argparse.ArgumentParser) -> None:
    """The run options (--profile, --kubeconfig, --context, ...), each with its environment variable."""
    for name, (env, help_text) in OPTIONS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None, help=f"{help_text} [env {env}]")


def config_of(args: argparse.Namespace) -> RunConfig:
    """The run options given on the command line, resolved with the environment and the profile (one-line errors)."""
    return resolve({name: getattr(args, name) for name in OPTIONS})


def connect_to(args: argparse.Namespace) -> Target:
    return connect(config_of(args))
