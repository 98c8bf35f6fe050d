"""`gpupoc sample train`: the workload sample as a container's process (the repository's image, profiles/kind.yaml).

A training loop on PyTorch (on CUDA when a GPU is there) or NumPy, its dataset read through a prefetching loader,
checkpoints every K steps and resumption after a restart; step time, samples/s, data read MB/s (and the GPU's memory
and utilisation) as Prometheus metrics and as a JSON summary at the end of its log (harness/sample/train.py).
"""

from __future__ import annotations

import argparse

from harness.cli.common import OneLineParser
from harness.sample import train


def add_commands(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    sample = commands.add_parser("sample", help="gpupoc's workload sample (a real training loop) in this process")
    kinds = sample.add_subparsers(dest="sample_command", required=True, parser_class=OneLineParser)
    train.arguments(kinds.add_parser("train", help="train to --steps, resuming from a checkpoint in --data-dir"))


def command(args: argparse.Namespace) -> int:
    train.check(args)
    train.train(args)
    return 0
