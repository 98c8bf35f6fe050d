"""`gpupoc standin`: a model server without a GPU, as a container's process (profiles/kind.yaml's model server).

The same vLLM stand-in the sim runs for its serving pods: OpenAI-compatible completions with streamed tokens,
/health once its simulated load time has passed, vLLM's metric names on /metrics. The record says the model
server is simulated wherever it answers.
"""

from __future__ import annotations

import argparse

from harness.cli.common import OneLineParser
from harness.core.errors import ConfigError
from harness.targets import sim as the_sim


def add_commands(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    standin = commands.add_parser("standin", help="serve gpupoc's vLLM stand-in on a port (a model server without a "
                                  "GPU, for clusters that have none: kind)")
    standin.add_argument("--port", type=int, default=8000)
    standin.add_argument("--model", default="sim-llm", help="the model name it answers for (default: %(default)s)")
    standin.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                         help="its latency model, as the sim's pod annotations name it: load-time=2s, ttft=40ms, "
                              "itl=10ms, max-num-seqs=16, error-rate=0, output-tokens=32")


def command(args: argparse.Namespace) -> int:
    settings = {}
    for item in args.settings:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. ttft=40ms")
        settings[key.strip()] = value.strip()
    the_sim.serve_model_server_standin(args.port, args.model, settings)
    return 0
