"""The sim's own Slurm exporter (simulated: no Slurm exporter is installable here): what slurmctld and slurmdbd
say, as Prometheus series, read at every scrape with Slurm's own commands.

- slurm_queue_jobs{account,state}: jobs pending and running per account (squeue, slurmctld's live view)
- slurm_account_gpus_allocated{account}: GPUs held by each account's running jobs
- slurm_node_gpus{node,kind="total|allocated"}: GRES per node (sinfo)
- slurm_account_fairshare{account}: the fair-share factor (sshare; Fair Tree gives it to users: the highest of the account's)
- slurm_account_gpu_limit{account}: the account's GPU limit, where it has one (sacctmgr: GrpTRES gres/gpu)
- slurm_job_wait_seconds{account}: a histogram of submit-to-start of every job that started (sacct, slurmdbd's
  record; each job counted once, when it is first seen started)
- slurm_preempted_jobs_total{account}: jobs preempted (sacct state PREEMPTED, or requeued: each counted once)
- gpupoc_sim_slurm_exporter_info{simulated="true"}
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness.jobs.slurm.system import expand_hostlist, gres_count, never_started

BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, float("inf"))
COMMAND_TIMEOUT_S = 3  # within Prometheus' 10 s scrape timeout, four commands


def run(*argv: str) -> list[str]:
    """A Slurm command's lines; none when it fails or hangs (slurmctld down: the series go missing, as they would
    with a real exporter)."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return done.stdout.splitlines() if done.returncode == 0 else []


def epoch(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None  # 'Unknown', 'None'


COLLECTORS = ("queue", "nodes", "fairshare", "limits", "accounting")


class Exporter:
    def __init__(self, collectors: set[str] = set(COLLECTORS)) -> None:
        self.collectors = collectors
        self.lock = threading.Lock()
        self.waits: dict[str, list[int]] = {}      # account -> bucket counts (cumulative at render)
        self.wait_sums: dict[str, float] = {}
        self.counted: set[str] = set()               # job ids whose wait was counted
        self.preempted: dict[str, int] = {}
        self.preempted_ids: set[str] = set()

    def scrape(self) -> str:
        with self.lock:
            lines = ['gpupoc_sim_slurm_exporter_info{simulated="true"} 1']
            for name, collect in (("queue", self._queue), ("nodes", self._nodes), ("fairshare", self._fairshare),
                                  ("limits", self._limits), ("accounting", self._accounting)):
                if name in self.collectors:
                    lines += collect()
            return "\n".join(lines) + "\n"

    def _accounting(self) -> list[str]:
        self._account_history()
        return self._histogram() + [f'slurm_preempted_jobs_total{{account="{a}"}} {n}'
                                    for a, n in sorted(self.preempted.items())]

    def _queue(self) -> list[str]:
        jobs: dict[tuple[str, str], int] = {}
        gpus: dict[str, int] = {}
        for line in run("squeue", "--noheader", "--all", "--format=%a|%T|%D|%b"):
            account, state, nodes, tres = (line.split("|") + ["", "", "", ""])[:4]
            jobs[(account, state.lower())] = jobs.get((account, state.lower()), 0) + 1
            if state == "RUNNING":
                gpus[account] = gpus.get(account, 0) + gres_count(tres.replace("gres:", "")) * int(nodes or 0)
        out = [f'slurm_queue_jobs{{account="{a}",state="{s}"}} {n}' for (a, s), n in sorted(jobs.items())
               if s in ("pending", "running")]
        return out + [f'slurm_account_gpus_allocated{{account="{a}"}} {n}' for a, n in sorted(gpus.items())]

    def _nodes(self) -> list[str]:
        out = []
        for line in run("sinfo", "--Node", "--noheader", "--Format=NodeList:|,Gres:|,GresUsed:"):
            node, gres, used = (line.split("|") + ["", "", ""])[:3]
            for name in expand_hostlist(node.strip()):
                out += [f'slurm_node_gpus{{node="{name}",kind="total"}} {gres_count(gres)}',
                        f'slurm_node_gpus{{node="{name}",kind="allocated"}} {gres_count(used.split("(")[0])}']
        return sorted(set(out))

    def _fairshare(self) -> list[str]:
        """Fair Tree gives a fair-share factor to users, not accounts: an account's is the highest of its users'."""
        factors: dict[str, float] = {}
        for line in run("sshare", "--all", "--noheader", "--parsable2", "--format=Account,User,FairShare"):
            account, user, factor = (line.split("|") + ["", "", ""])[:3]
            if account.strip() and user and factor:
                factors[account.strip()] = max(factors.get(account.strip(), 0.0), float(factor))
        return [f'slurm_account_fairshare{{account="{a}"}} {f}' for a, f in sorted(factors.items())]

    def _limits(self) -> list[str]:
        """Each account's GPU limit (GrpTRES gres/gpu) where it has one (sacctmgr, slurmdbd's view)."""
        out = []
        for line in run("sacctmgr", "--noheader", "--parsable2", "show", "association", "format=Account,User,GrpTRES"):
            account, user, tres = (line.split("|") + ["", "", ""])[:3]
            limit = re.search(r"gres/gpu=(\d+)", tres)
            if account.strip() and not user and limit:
                out.append(f'slurm_account_gpu_limit{{account="{account.strip()}"}} {limit.group(1)}')
        return out

    def _account_history(self) -> None:
        """Waits of jobs that started, and preemptions, from slurmdbd (each job counted once)."""
        for line in run("sacct", "--allusers", "--noheader", "--parsable2", "-X", "--duplicates",
                        "--starttime=now-1hour", "--format=JobID,Account,Submit,Start,State,NodeList"):
            job, account, submitted, started, state, nodes = (line.split("|") + [""] * 6)[:6]
            if never_started(state, "" if nodes in ("None assigned", "") else nodes):
                continue  # cancelled while pending: Slurm sets its start to its end, but it never started
            if state.startswith(("PREEMPTED", "REQUEUED")) and f"{job}/{submitted}/{started}" not in self.preempted_ids:
                self.preempted_ids.add(f"{job}/{submitted}/{started}")
                self.preempted[account] = self.preempted.get(account, 0) + 1
            begin, end = epoch(submitted), epoch(started)
            if begin is None or end is None or job in self.counted:
                continue
            self.counted.add(job)
            wait = max(0.0, end - begin)
            counts = self.waits.setdefault(account, [0] * len(BUCKETS))
            for i, bound in enumerate(BUCKETS):
                if wait <= bound:
                    counts[i] += 1
                    break
            self.wait_sums[account] = self.wait_sums.get(account, 0.0) + wait

    def _histogram(self) -> list[str]:
        out = []
        for account, counts in sorted(self.waits.items()):
            total = 0
            for bound, count in zip(BUCKETS, counts):
                total += count
                le = "+Inf" if bound == float("inf") else f"{bound:g}"
                out.append(f'slurm_job_wait_seconds_bucket{{account="{account}",le="{le}"}} {total}')
            out += [f'slurm_job_wait_seconds_sum{{account="{account}"}} {self.wait_sums.get(account, 0.0):.3f}',
                    f'slurm_job_wait_seconds_count{{account="{account}"}} {total}']
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description="the gpupoc sim's Slurm exporter (simulated)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--conf", required=True, help="slurm.conf")
    parser.add_argument("--collectors", default=",".join(COLLECTORS),
                        help=f"what it exports, comma-separated (default: all of {', '.join(COLLECTORS)})")
    args = parser.parse_args()
    os.environ["SLURM_CONF"] = args.conf
    exporter = Exporter(set(args.collectors.split(",")) & set(COLLECTORS))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path not in ("/metrics", "/healthz"):
                self.send_error(404)
                return
            body = (exporter.scrape() if self.path == "/metrics" else "ok\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
