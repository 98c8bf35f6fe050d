"""The workload sample: a training loop on a real framework, reading a dataset through a prefetching loader,
checkpointing every K steps and resuming from its last checkpoint after a restart.

    python3 -m harness.sample.train --steps 300 --warmup 30 --checkpoint-every 50 --data-dir /data --port 9400

PyTorch when it is installed (on CUDA when a GPU is there), NumPy otherwise (its BLAS on as many threads as the
CPUs the process may run on, as PyTorch's and OpenBLAS's defaults do: a CPU manager that pins the container to its
cores is what keeps a neighbour off them). The dataset (`--dataset-mb`, float32 features and a label per record,
made by a fixed linear teacher so the loss falls) is written once into `--data-dir` and read back in batches by a
thread that stays `--prefetch` batches ahead.

What it measures is exported twice, under the same names on any cluster: as Prometheus metrics on `--port`
(/metrics; /health answers once the loop runs) and as one JSON line at the end of its log, prefixed
`gpupoc-sample-summary `: every measured step's seconds (after the warm-up), their p50/p95/CoV, samples/s, data
read MB/s, the checkpoint it resumed from and the steps it redid, and the GPU's memory and utilisation when it has
one. It exits with the code in its pod's `gpupoc.io/exit-code` annotation (read through a downward-API file) once
per asked value: a restarted container resumes instead of exiting again. The step it reached and the requests it
honoured are kept in `--data-dir`; its checkpoints in `--checkpoint-dir` (by default the same): checkpoints kept
where a restart loses them show up as every step redone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

SUMMARY_PREFIX = "gpupoc-sample-summary "
EXIT_REQUEST_KEY = "gpupoc.io/exit-code"
CHECKPOINT, PROGRESS, HONOURED = "checkpoint.npz", "progress.json", "exit-requests-honoured"
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
MAX_STEPS_LOGGED = 5000
TEACHER_SEED, MODEL_SEED = 7, 11


def cpus() -> int:
    """The CPUs this process may run on (a CPU manager's exclusive set, or the node's)."""
    return len(os.sched_getaffinity(0))


def summarize(step_s: Sequence[float]) -> dict[str, float]:
    """p50, p95 (nearest rank), mean and coefficient of variation of step times; empty input, empty result."""
    if not step_s:
        return {}
    ordered = sorted(step_s)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    mean = sum(ordered) / len(ordered)
    var = sum((s - mean) ** 2 for s in ordered) / len(ordered)
    return {"p50_s": rank(0.5), "p95_s": rank(0.95), "mean_s": mean, "cov": math.sqrt(var) / mean if mean else 0.0}


def parse_summary(log: str) -> dict[str, Any] | None:
    """The last summary line of a sample's log, or None (it ended before writing one)."""
    for line in reversed(log.splitlines()):
        at = line.find(SUMMARY_PREFIX)
        if at >= 0:
            try:
                found = json.loads(line[at + len(SUMMARY_PREFIX):])
            except json.JSONDecodeError:
                return None
            return found if isinstance(found, dict) else None
    return None


class Model(Protocol):
    framework: str
    device: str

    def step(self, x: Any, y: Any) -> float: ...
    def save(self, path: Path, step: int) -> None: ...
    def load(self, path: Path) -> int: ...
    def gpu(self) -> dict[str, Any]: ...


class NumpyModel:
    """A two-layer MLP with softmax cross-entropy and SGD, forward and backward by hand on NumPy's BLAS."""

    framework, device = "numpy", "cpu"

    def __init__(self, features: int, width: int, classes: int, lr: float) -> None:
        import numpy as np
        self.np, self.lr = np, lr
        rng = np.random.default_rng(MODEL_SEED)
        self.w1 = (rng.standard_normal((features, width)) / math.sqrt(features)).astype(np.float32)
        self.w2 = (rng.standard_normal((width, classes)) / math.sqrt(width)).astype(np.float32)

    def step(self, x: Any, y: Any) -> float:
        np = self.np
        h = np.maximum(x @ self.w1, 0)
        logits = h @ self.w2
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        rows = np.arange(len(y))
        loss = float(-np.log(p[rows, y] + 1e-9).mean())
        p[rows, y] -= 1
        p /= len(y)
        grad_w2 = h.T @ p
        grad_h = (p @ self.w2.T) * (h > 0)
        self.w1 -= self.lr * (x.T @ grad_h)
        self.w2 -= self.lr * grad_w2
        return loss

    def save(self, path: Path, step: int) -> None:
        tmp = path.with_suffix(".tmp.npz")
        self.np.savez(tmp, w1=self.w1, w2=self.w2, step=self.np.array(step))
        os.replace(tmp, path)

    def load(self, path: Path) -> int:
        with self.np.load(path) as saved:
            self.w1, self.w2 = saved["w1"], saved["w2"]
            return int(saved["step"])

    def gpu(self) -> dict[str, Any]:
        return {}


class TorchModel:
    """The same MLP in PyTorch, on CUDA when a GPU is there."""

    framework = "torch"

    def __init__(self, features: int, width: int, classes: int, lr: float, device: str) -> None:
        import torch
        self.torch = torch
        self.device = device if device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cpu":
            torch.set_num_threads(cpus())
        torch.manual_seed(MODEL_SEED)
        self.net = torch.nn.Sequential(torch.nn.Linear(features, width), torch.nn.ReLU(),
                                       torch.nn.Linear(width, classes)).to(self.device)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=lr)
        self.loss_fn = torch.nn.CrossEntropyLoss()

    def step(self, x: Any, y: Any) -> float:
        torch = self.torch
        xt = torch.from_numpy(x).to(self.device, non_blocking=True)
        yt = torch.from_numpy(y).long().to(self.device, non_blocking=True)
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.net(xt), yt)
        loss.backward()
        self.opt.step()
        return float(loss.item())  # .item() waits for the device: the step's time is the GPU's too

    def save(self, path: Path, step: int) -> None:
        tmp = path.with_suffix(".tmp")
        self.torch.save({"model": self.net.state_dict(), "opt": self.opt.state_dict(), "step": step}, tmp)
        os.replace(tmp, path)

    def load(self, path: Path) -> int:
        saved = self.torch.load(path, map_location=self.device)
        self.net.load_state_dict(saved["model"])
        self.opt.load_state_dict(saved["opt"])
        return int(saved["step"])

    def gpu(self) -> dict[str, Any]:
        cuda = self.torch.cuda
        if self.device != "cuda":
            return {}
        found: dict[str, Any] = {"name": cuda.get_device_name(), "cuda": self.torch.version.cuda,
                                 "memory_bytes": int(cuda.max_memory_allocated())}
        try:
            found["utilization"] = cuda.utilization() / 100.0  # needs NVML (pynvml)
        except Exception:  # noqa: BLE001 - no NVML: utilisation not measured, said so by its absence
            pass
        return found


def make_model(framework: str, features: int, width: int, classes: int, lr: float, device: str) -> Model:
    if framework in ("auto", "torch"):
        try:
            return TorchModel(features, width, classes, lr, device)
        except ImportError:
            if framework == "torch":
                raise SystemExit("gpupoc sample: --framework torch, but PyTorch is not installed")
    if device == "cuda":
        raise SystemExit("gpupoc sample: --device cuda needs PyTorch, which is not installed")
    return NumpyModel(features, width, classes, lr)


def dataset(data_dir: Path, features: int, classes: int, size_mb: float) -> tuple[Path, int]:
    """The dataset file (written once, then reused by every restart) and its record count."""
    import numpy as np
    record = (features + 1) * 4
    records = max(1, int(size_mb * 1024 * 1024) // record)
    path = data_dir / f"dataset-{features}x{classes}-{records}.f32"
    if path.exists() and path.stat().st_size == records * record:
        return path, records
    rng = np.random.default_rng(TEACHER_SEED)
    teacher = rng.standard_normal((features, classes)).astype(np.float32)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as out:
        for start in range(0, records, 4096):
            n = min(4096, records - start)
            x = rng.standard_normal((n, features)).astype(np.float32)
            label = (x @ teacher).argmax(axis=1).astype(np.float32)
            out.write(np.concatenate([x, label[:, None]], axis=1).tobytes())
    os.replace(tmp, path)
    return path, records


class Loader(threading.Thread):
    """Reads batches of the dataset in order (wrapping round) a few batches ahead of the loop; counts the bytes it
    read and the seconds its reads took."""

    def __init__(self, path: Path, records: int, features: int, batch: int, prefetch: int) -> None:
        super().__init__(name="gpupoc-sample-loader", daemon=True)
        self.path, self.records, self.features, self.batch = path, records, features, batch
        self.batches: queue.Queue[tuple[Any, Any]] = queue.Queue(maxsize=prefetch)
        self.bytes_read, self.read_s = 0, 0.0
        self.stopping = threading.Event()

    def run(self) -> None:
        import numpy as np
        record = (self.features + 1) * 4
        fd = os.open(self.path, os.O_RDONLY)
        try:
            at = 0
            while not self.stopping.is_set():
                n = min(self.batch, self.records - at)
                started = time.perf_counter()
                data = os.pread(fd, n * record, at * record)
                self.read_s += time.perf_counter() - started
                self.bytes_read += len(data)
                rows = np.frombuffer(data, dtype=np.float32).reshape(n, self.features + 1)
                at = (at + n) % self.records
                item = (np.ascontiguousarray(rows[:, :-1]), rows[:, -1].astype(np.int64))
                while not self.stopping.is_set():
                    try:
                        self.batches.put(item, timeout=0.2)
                        break
                    except queue.Full:
                        continue
        finally:
            os.close(fd)


class Metrics:
    """The sample's Prometheus metrics (text exposition), updated by the loop and served on a port."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        self.lock = threading.Lock()
        self.steps = 0
        self.buckets = [0] * len(STEP_BUCKETS)
        self.step_sum = 0.0
        self.values: dict[str, float] = {}
        self.running = False

    def observe_step(self, seconds: float) -> None:
        with self.lock:
            self.steps += 1
            self.step_sum += seconds
            for i, bound in enumerate(STEP_BUCKETS):
                if seconds <= bound:
                    self.buckets[i] += 1

    def set(self, **values: float) -> None:
        with self.lock:
            self.values.update(values)

    def text(self) -> str:
        lab = self.labels
        with self.lock:
            lines = ["# HELP gpupoc_sample_step_seconds Seconds per training step (data, forward, backward, update).",
                     "# TYPE gpupoc_sample_step_seconds histogram"]
            lines += [f'gpupoc_sample_step_seconds_bucket{{{lab},le="{b:g}"}} {n}'
                      for b, n in zip(STEP_BUCKETS, self.buckets)]
            lines += [f'gpupoc_sample_step_seconds_bucket{{{lab},le="+Inf"}} {self.steps}',
                      f"gpupoc_sample_step_seconds_sum{{{lab}}} {self.step_sum:.6f}",
                      f"gpupoc_sample_step_seconds_count{{{lab}}} {self.steps}",
                      "# TYPE gpupoc_sample_steps_total counter", f"gpupoc_sample_steps_total{{{lab}}} {self.steps}"]
            for name, value in sorted(self.values.items()):
                kind = "counter" if name.endswith("_total") else "gauge"
                lines += [f"# TYPE gpupoc_sample_{name} {kind}", f"gpupoc_sample_{name}{{{lab}}} {value:g}"]
        return "\n".join(lines) + "\n"

    def serve(self, port: int) -> ThreadingHTTPServer:
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.startswith("/metrics"):
                    body, kind, status = metrics.text().encode(), "text/plain; version=0.0.4", 200
                elif self.path.startswith("/health"):
                    status = 200 if metrics.running else 503
                    body, kind = (b"ok\n" if metrics.running else b"starting\n"), "text/plain"
                else:
                    body, kind, status = b"not found\n", "text/plain", 404
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("", port), Handler)
        threading.Thread(target=server.serve_forever, name="gpupoc-sample-metrics", daemon=True).start()
        return server


def exit_request(podinfo: Path, honoured: Path) -> int | None:
    """The exit code the pod's annotation asks for, unless this container's checkpoint directory says it was
    honoured already (a restarted container resumes rather than exiting again)."""
    try:
        text = (podinfo / "annotations").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == EXIT_REQUEST_KEY:
            value = value.strip().strip('"')
            done = honoured.read_text().split() if honoured.exists() else []
            return int(value) if value.isdigit() and value not in done else None
    return None


def _say(message: str) -> None:
    host = os.environ.get("HOSTNAME", "")
    print(f"gpupoc sample{' ' + host if host else ''}: {message}", flush=True)


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Run the loop to `args.steps` (from the last checkpoint, if there is one); the summary it logs."""
    data_dir, ckpt_dir = Path(args.data_dir), Path(args.checkpoint_dir or args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    threads = os.environ.setdefault("OPENBLAS_NUM_THREADS", str(cpus()))  # before NumPy loads its BLAS
    model = make_model(args.framework, args.features, args.width, args.classes, args.lr, args.device)
    made = time.perf_counter()
    path, records = dataset(data_dir, args.features, args.classes, args.dataset_mb)
    _say(f"{model.framework} on {model.device} ({threads} CPU threads), dataset {path.name} "
         f"({records} records, ready in {time.perf_counter() - made:.1f}s)")
    # where it got to and the exit requests it honoured live beside its dataset, whatever survives of its checkpoints
    checkpoint, progress, honoured = ckpt_dir / CHECKPOINT, data_dir / PROGRESS, data_dir / HONOURED
    start = model.load(checkpoint) if checkpoint.exists() else 0
    before = json.loads(progress.read_text())["step"] if progress.exists() else None
    redone = max(0, before - start) if before is not None else 0
    if checkpoint.exists():
        _say(f"resumed from the checkpoint of step {start} (the last run reached step {before}: {redone} redone)")
    metrics = Metrics({"framework": model.framework, "device": model.device})
    metrics.set(resumed_from_step=start, steps_redone=redone, cpu_threads=float(threads))
    server = metrics.serve(args.port) if args.port else None
    loader = Loader(path, records, args.features, args.batch, args.prefetch)
    loader.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    step_s: list[float] = []
    loss, checkpoints, measured_from = float("nan"), 0, time.time()
    metrics.running = True
    try:
        for step in range(start + 1, args.steps + 1):
            if stop.is_set():
                _say(f"terminated at step {step - 1}")
                raise SystemExit(143)
            code = exit_request(Path(args.podinfo), honoured)
            if code is not None:
                with honoured.open("a") as out:
                    out.write(f"{code}\n")
                _say(f"exiting with {code} as asked, at step {step - 1}")
                raise SystemExit(code)
            began = time.perf_counter()
            x, y = loader.batches.get()
            loss = model.step(x, y)
            took = time.perf_counter() - began
            progress.write_text(json.dumps({"step": step}))
            if step - start > args.warmup:
                if not step_s:
                    measured_from = time.time()
                step_s.append(took)
            metrics.observe_step(took)
            metrics.set(data_read_bytes_total=loader.bytes_read, data_read_seconds_total=loader.read_s,
                        samples_per_second=args.batch / took, loss=loss, **_gpu_gauges(model.gpu()))
            if step % args.checkpoint_every == 0 or step == args.steps:
                model.save(checkpoint, step)
                checkpoints += 1
                metrics.set(checkpoint_step=step)
            if step % args.log_every == 0:
                _say(f"step {step}/{args.steps} loss {loss:.4f} {took * 1000:.1f} ms")
    finally:
        loader.stopping.set()
        if server:
            server.shutdown()
    stats = summarize(step_s)
    summary = {
        "framework": model.framework, "device": model.device, "cpu_threads": int(threads),
        "steps": args.steps, "warmup": args.warmup, "batch": args.batch, "resumed_from_step": start,
        "steps_before_restart": before, "steps_redone": redone, "checkpoints": checkpoints,
        "measured_steps": len(step_s), "measured_from": measured_from, "loss": loss, **stats,
        "samples_per_s": args.batch / stats["mean_s"] if stats else None,
        "data_read_mb_s": loader.bytes_read / 1e6 / loader.read_s if loader.read_s else None,
        "data_read_mb": loader.bytes_read / 1e6, "gpu": model.gpu(),
        "step_s": [round(s, 6) for s in step_s[-MAX_STEPS_LOGGED:]],
    }
    print(SUMMARY_PREFIX + json.dumps(summary), flush=True)
    return summary


def _gpu_gauges(gpu: dict[str, Any]) -> dict[str, float]:
    gauges = {}
    if "memory_bytes" in gpu:
        gauges["gpu_memory_bytes"] = float(gpu["memory_bytes"])
    if "utilization" in gpu:
        gauges["gpu_utilization_ratio"] = float(gpu["utilization"])
    return gauges


def arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--steps", type=int, default=400, help="steps to train to (a resumed run goes on to them)")
    parser.add_argument("--warmup", type=int, default=30, help="steps of each run left out of the measurement")
    parser.add_argument("--checkpoint-every", type=int, default=50, metavar="K")
    parser.add_argument("--batch", type=int, default=1024, help="samples per step")
    parser.add_argument("--features", type=int, default=512)
    parser.add_argument("--width", type=int, default=2048, help="the hidden layer's width")
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--dataset-mb", type=float, default=64.0)
    parser.add_argument("--prefetch", type=int, default=4, help="batches the loader reads ahead")
    parser.add_argument("--data-dir", default="/data")
    parser.add_argument("--checkpoint-dir", default="", help="default: --data-dir")
    parser.add_argument("--port", type=int, default=9400, help="Prometheus metrics on /metrics (0: none)")
    parser.add_argument("--framework", choices=("auto", "torch", "numpy"), default="auto")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--podinfo", default="/etc/gpupoc", help="the downward-API directory with its annotations")
    parser.add_argument("--log-every", type=int, default=50)
    return parser


def check(args: argparse.Namespace) -> None:
    for name in ("steps", "checkpoint_every", "batch", "features", "width", "classes", "prefetch", "log_every"):
        if getattr(args, name) < 1:
            raise SystemExit(f"gpupoc sample: --{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.warmup < 0 or args.warmup >= args.steps:
        raise SystemExit(f"gpupoc sample: --warmup must be 0 to --steps - 1, got {args.warmup}")
    if args.dataset_mb <= 0:
        raise SystemExit(f"gpupoc sample: --dataset-mb must be more than 0, got {args.dataset_mb}")


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argparse.ArgumentParser(prog="gpupoc sample train", description=__doc__.split("\n")[0]))\
        .parse_args(argv)
    check(args)
    train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
