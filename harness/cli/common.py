"""What every command group shares: the one-line parser, the target flags (the run options), the exit codes."""

from __future__ import annotations

import argparse
import dataclasses
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


def connect_to(args: argparse.Namespace, admin: bool = False) -> Target:
    """The target of a command; `admin`: an admin's step (setup, clean, rbac --apply), which on the sim is the sim
    admin's rather than the runner's (elsewhere the kubeconfig says who acts)."""
    cfg = config_of(args)
    return connect(dataclasses.replace(cfg, as_runner=False) if admin else cfg)
