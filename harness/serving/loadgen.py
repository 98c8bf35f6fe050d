"""The LLM load generator: inference-perf (kubernetes-sigs), in a virtual environment of its own, run offline.

inference-perf needs Python >= 3.12 (this project runs on 3.11): it gets its own venv under the gpupoc cache,
from `python3.12`/`python3.13` on PATH, pyenv's, or the interpreter GPUPOC_LOADGEN_PYTHON names. Offline: no
dataset and no tokenizer download; a word-level tokenizer made here stands in for the model's (one token per
word, as the sim's model server counts them; point `tokenizer` at the real model's files on a real cluster).
"""

from __future__ import annotations

import dataclasses
import fcntl
import glob
import json
import math
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.criteria.inference.latency import (REQUEST_TIMEOUT_S, LoadReport, parse_inference_perf,
                                                per_request_samples)
from harness.core.errors import HarnessError
from harness.core.paths import build_root
from harness.serving.traffic import Traffic

PACKAGE = "inference-perf==0.7.0"
PYTHON_ENV = "GPUPOC_LOADGEN_PYTHON"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1"}
INSTALL_TIMEOUT_S = 900
# A word-level tokenizer: written by the venv's own `tokenizers` (a dependency of inference-perf).
TOKENIZER_SCRIPT = """
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
words = ["[UNK]", "tok", "ping", "the", "a", "model", "prompt"] + [str(i) for i in range(100)]
tokenizer = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tokenizer.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps(
    {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1000000}))
"""


# each request's computed latencies only: no payloads, no response chunks
PER_REQUEST_FIELDS = {"request": False, "response": False, "info": False, "response_chunks": False,
                      "computed_metrics": True}


def venv_dir() -> Path:
    return build_root() / "venvs" / "inference-perf"  # a tool, like the binaries: shared by every sim of this user


def find_python() -> str | None:
    """An interpreter inference-perf runs on (>= 3.12) that really starts (a pyenv shim may not), or None."""
    named = os.environ.get(PYTHON_ENV)
    candidates = [named] if named else []
    candidates += sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.1[23]*/bin/python3.1[23]")))
    candidates += [found for name in ("python3.12", "python3.13") if (found := shutil.which(name))]
    for candidate in candidates:
        try:
            ok = subprocess.run([candidate, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"],
                                capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return candidate
    return None


@dataclass(frozen=True)
class LoadGenerator:
    binary: Path
    tokenizer: Path

    def config(self, url: str, model: str, rate: float, duration_s: float, tokens: tuple[int, int],
               slo: dict[str, float], out: Path) -> dict[str, Any]:
        """One fixed-rate stage of streaming completions: `rate` x `duration_s` requests, prompt and output of
        `tokens` words; goodput against `slo` (seconds: ttft, itl, request_latency)."""
        return self._config(url, model, constant(rate, duration_s), _random(tokens), slo, out)

    def sweep_config(self, url: str, model: str, sweep: Sweep, tokens: tuple[int, int], slo: dict[str, float],
                     out: Path) -> dict[str, Any]:
        """inference-perf's own sweep of Poisson stages: a burst of `sweep.probe_requests` finds the saturation point,
        then `sweep.stages` stages of `sweep.stage_s` each, spaced linearly up to it."""
        # inference-perf sizes its prompts from the stages' requests, which a sweep makes only later (0.7: an
        # IndexError past the first): as many as the stages could send at up to the probe's count per second
        count = sweep.probe_requests * (1 + sweep.stages * sweep.stage_s)
        return self._config(url, model, sweep.load(), _random(tokens, count), slo, out)

    def shared_prefix_config(self, url: str, model: str, load: dict[str, Any], prefixes: SharedPrefixes,
                             slo: dict[str, float], out: Path) -> dict[str, Any]:
        """`load` (a Sweep's, or `constant`) with inference-perf's shared-prefix prompts: `prefixes.groups` system
        prompts, each followed by questions of its own, shuffled once by the seed. Each stage sends them from the
        first (inference-perf 0.7 restarts its data at every stage), cycling past the last."""
        return self._config(url, model, load, {"type": "shared_prefix", "shared_prefix": {
            "num_groups": prefixes.groups, "num_prompts_per_group": prefixes.prompts_per_group,
            "system_prompt_len": prefixes.system_tokens, "question_len": prefixes.question_tokens,
            "output_len": prefixes.output_tokens, "seed": prefixes.seed}}, slo, out)

    def _config(self, url: str, model: str, load: dict[str, Any], data: dict[str, Any], slo: dict[str, float],
                out: Path) -> dict[str, Any]:
        return {"api": {"type": "completion", "streaming": True},
                "data": data,
                "load": load | {"num_workers": 1, "worker_max_concurrency": 64, "request_timeout": REQUEST_TIMEOUT_S,
                                "stage_teardown_grace_seconds": 10},
                "server": {"type": "vllm", "model_name": model, "base_url": url, "ignore_eos": True},
                "tokenizer": {"pretrained_model_name_or_path": str(self.tokenizer)},
                "report": {"request_lifecycle": {"summary": True, "per_stage": True, "per_request": True,
                                                 "per_request_fields": PER_REQUEST_FIELDS,
                                                 "use_server_output_tokens": True},
                           "goodput": {"constraints": slo}},
                "storage": {"local_storage": {"path": str(out / "report")}}}

    def run(self, traffic: Traffic, config: dict[str, Any], out: Path, timeout_s: float) -> LoadReport:
        """Run where the traffic must come from; the stage's report, or a HarnessError with the log's tail."""
        return self.run_stages(traffic, config, out, timeout_s)[0][1]

    def run_stages(self, traffic: Traffic, config: dict[str, Any], out: Path,
                   timeout_s: float) -> list[tuple[float, LoadReport]]:
        """Run where the traffic must come from; each stage's rate and report, in the order they ran, or a
        HarnessError with the log's tail."""
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.yaml").write_text(yaml.safe_dump(config))
        log = out / "inference-perf.log"
        process = traffic.start([str(self.binary), "--config_file", str(out / "config.yaml")], log,
                                env={**os.environ, **OFFLINE}, cwd=out)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise HarnessError(f"inference-perf did not finish within {timeout_s:.0f}s (killed); log: {log}")
        found = {int(p.name.split("_")[1]): p for p in (out / "report").glob("stage_*_lifecycle_metrics.json")}
        if process.returncode != 0 or not found:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise HarnessError(f"inference-perf failed (exit {process.returncode}); last lines of {log}:\n{tail}")
        stages = [json.loads(found[n].read_text()) for n in sorted(found)]
        per_request = out / "report" / "per_request_lifecycle_metrics.json"
        entries = json.loads(per_request.read_text()) if per_request.exists() else []
        return stage_reports(stages, entries)


@dataclass(frozen=True)
class Sweep:
    """inference-perf's sweep: the saturation probe's burst, then stages up to the saturation point it finds."""

    probe_requests: int
    probe_timeout_s: float
    stages: int
    stage_s: int

    def load(self) -> dict[str, Any]:
        return {"type": "poisson", "sweep": {
            "type": "linear", "num_requests": self.probe_requests, "timeout": self.probe_timeout_s,
            "num_stages": self.stages, "stage_duration": self.stage_s, "saturation_percentile": 95}}

    @property
    def timeout_s(self) -> float:
        """What the whole sweep may take: the probe's timeout, each stage and its drain, inference-perf's start."""
        return self.probe_timeout_s + self.stages * 30 + 60


@dataclass(frozen=True)
class SharedPrefixes:
    """inference-perf's shared-prefix prompts: `groups` system prompts of `system_tokens`, each with
    `prompts_per_group` questions of `question_tokens`; answers of `output_tokens`."""

    groups: int
    system_tokens: int
    question_tokens: int
    output_tokens: int
    prompts_per_group: int
    seed: int = 20261207

    @property
    def prompts(self) -> int:
        return self.groups * self.prompts_per_group

    def each_once(self, rate: float) -> dict[str, Any]:
        """One constant stage at about `rate` that sends every prompt exactly once."""
        duration = max(1, math.ceil(self.prompts / rate))
        return constant((self.prompts + 0.5) / duration, duration)  # int(rate * duration) == prompts


def constant(rate: float, duration_s: float) -> dict[str, Any]:
    """inference-perf's constant-rate load: one stage of `rate` requests/s for `duration_s`."""
    return {"type": "constant", "stages": [{"rate": rate, "duration": duration_s}]}


def stage_reports(stages: list[dict[str, Any]], entries: list[dict[str, Any]]) -> list[tuple[float, LoadReport]]:
    """Pure: each stage's offered rate and report, with its requests' latencies as samples (the percentiles'
    intervals, core/estimate.py). The per-request report does not name stages: stages run one after another, so
    its entries by start time fall to them in turn, as many as each stage sent."""
    ordered = sorted(entries, key=lambda e: float(e.get("start_time") or 0.0))
    out, taken = [], 0
    for stage in stages:
        report = parse_inference_perf(stage)
        mine = ordered[taken:taken + report.sent]
        taken += report.sent
        if mine:
            report = dataclasses.replace(report, samples=per_request_samples(mine))
        rate = float((stage.get("load_summary") or {}).get("requested_rate") or 0.0)
        out.append((rate, report))
    return out


def _random(tokens: tuple[int, int], count: int | None = None) -> dict[str, Any]:
    """Random prompts of tokens[0] words, answers of tokens[1]."""
    return {"type": "random", "input_distribution": _fixed(tokens[0], count),
            "output_distribution": _fixed(tokens[1], count)}


def _fixed(n: int, count: int | None = None) -> dict[str, Any]:
    return {"type": "fixed", "min": n, "max": n, "mean": n, "std_dev": 0} | ({"total_count": count} if count else {})


def ensure(say: Callable[[str], None] = print) -> LoadGenerator | str:
    """The load generator, installed on first use; else why it cannot be. Several runs at once (make poc's parts)
    install it once: the first under the lock, the others wait for it and use what it made."""
    venv = venv_dir()
    venv.parent.mkdir(parents=True, exist_ok=True)
    with (venv.parent / "inference-perf.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        return _installed(venv, say)


def required(say: Callable[[str], None] = print) -> LoadGenerator:
    """The load generator, or a HarnessError naming why it is not there: the run's own tool missing is an ERROR of
    the case, not a finding about the cluster."""
    generator = ensure(say)
    if isinstance(generator, str):
        raise HarnessError(f"the load generator is not there: {generator}")
    return generator


def _installed(venv: Path, say: Callable[[str], None]) -> LoadGenerator | str:
    binary, stamp, tokenizer = venv / "bin" / "inference-perf", venv / ".gpupoc-installed", venv / "tokenizer"
    if not (binary.exists() and stamp.exists() and stamp.read_text() == PACKAGE):
        python = find_python()
        if python is None:
            return (f"inference-perf needs Python >= 3.12 and none was found: install python3.12, or name one with "
                    f"{PYTHON_ENV}=/path/to/python3.12")
        started = time.monotonic()
        say(f"gpupoc: installing {PACKAGE} into {venv} (once; about a minute) ...")
        shutil.rmtree(venv, ignore_errors=True)
        for argv in ([python, "-m", "venv", str(venv)],
                     [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", PACKAGE]):
            result = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
            if result.returncode != 0:
                return f"installing {PACKAGE} failed: {(result.stderr or result.stdout).strip()[-500:]}"
        stamp.write_text(PACKAGE)
        say(f"gpupoc: {PACKAGE} installed in {time.monotonic() - started:.0f}s")
    if not (tokenizer / "tokenizer.json").exists():
        result = subprocess.run([str(venv / "bin" / "python"), "-c", TOKENIZER_SCRIPT, str(tokenizer)],
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            return f"making the offline tokenizer failed: {result.stderr.strip()[-500:]}"
    return LoadGenerator(binary, tokenizer)
