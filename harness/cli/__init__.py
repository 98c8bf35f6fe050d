"""The `gpupoc` command: one module per command group (sim, the cluster, runs), one line per error."""

from __future__ import annotations

import argparse
import sys

from kubernetes import client
from kubernetes.dynamic.exceptions import DynamicApiError

from harness.cli import cluster, runs, sample, sim, standin
from harness.cli.common import EXIT_USAGE, OneLineParser
from harness.core.errors import ConfigError, HarnessError

GROUPS = {"sim": sim, "inventory": cluster, "setup": cluster, "preflight": cluster, "rbac": cluster, "clean": cluster,
          "run": runs, "compare": runs, "trend": runs, "check-designed": runs, "standin": standin,
          "sample": sample}


def parser() -> argparse.ArgumentParser:
    top = OneLineParser(prog="gpupoc", description="GPU scheduling POC acceptance tests")
    commands = top.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for group in (sim, cluster, runs, standin, sample):
        group.add_commands(commands)
    return top


def run(args: argparse.Namespace) -> int:
    code: int = GROUPS[args.command].command(args)
    return code


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except ConfigError as exc:
        print(f"gpupoc: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (HarnessError, ValueError, OSError) as exc:
        print(f"gpupoc: {exc}", file=sys.stderr)
        return 1
    except (client.ApiException, DynamicApiError) as exc:
        print(f"gpupoc: the API server refused a request: {getattr(exc, 'status', '?')} "
              f"{getattr(exc, 'reason', exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gpupoc: interrupted", file=sys.stderr)
        return 130
