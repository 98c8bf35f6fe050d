"""`gpupoc standin`: a model server without a GPU, as a container's process (profiles/kind.yaml's model server).

The same vLLM stand-in the sim runs for its serving pods: OpenAI-compatible completions with streamed tokens,
/health once its simulated load time has passed, vLLM's metric names on /metrics. The record says the model
server is simulated wherever it answers.
"""

from __future__ import annotations

import argparse

from harness.cli.common import OneLineParser
from harness.targets import sim as the_sim


def add_commands(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    the_sim.standin_arguments(commands.add_parser(
        "standin", help="serve gpupoc's vLLM stand-in on a port (a model server without a GPU, for clusters that have "
                        "none: kind)"))


def command(args: argparse.Namespace) -> int:
    the_sim.serve_model_server_standin(args)
    return 0
