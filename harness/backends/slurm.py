"""Slurm: batch jobs through slurmrestd, the same training cases as on Kubernetes (harness/jobs/slurm/).

Where it talks to: the sim's own Slurm (`gpupoc sim up --schedulers ...,slurm`), or a site's slurmrestd named by
GPUPOC_SLURM_URL with one JWT per submitting user in GPUPOC_SLURM_TOKENS (a directory of files named by user;
never printed). Each tenant submits as its identity (tenants[].identity: a Unix user of the site) in its account
(tenants[].queues.slurm).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.backends.base import (UPGRADE, MODEL_QUOTA, AUTOSCALING, BORROWING, DRA, GPU_SHARING, MONITORING, PREEMPTION_COUNTER,
                                   PROMPT_FAIR_SHARE, QUEUE_QUOTA, RANKED_FAIR_SHARE, RETRY_POLICY, SAMPLE,
                                   SERVED_MODEL, SERVING, WAIT_HISTOGRAM, Capabilities, Controllers, Monitoring,
                                   PreemptionCounter, WaitHistogram)
from harness.jobs.model import GangJob, JobStatus
from harness.criteria.governance.monitoring_coverage import Series
from harness.core.errors import ConfigError, HarnessError
from harness.config.profile import Profile, Tenant
from harness.jobs.slurm import api as slurm_api, system as jobs_api
from harness.targets.target import Features, Target

if TYPE_CHECKING:
    from harness.jobs.slurm.system import SlurmJobs, SlurmRest, SlurmSite

URL_ENV, TOKENS_ENV = "GPUPOC_SLURM_URL", "GPUPOC_SLURM_TOKENS"
NOT_KUBERNETES = "Slurm runs batch jobs; it has no Deployment or Service"


def site_site() -> SlurmSite | None:
    """A real site's slurmrestd from the environment."""
    url = os.environ.get(URL_ENV)
    if not url:
        return None
    tokens = Path(os.environ.get(TOKENS_ENV, ""))

    def token_for(user: str) -> str:
        path = tokens / user
        if not path.is_file():
            raise ConfigError(f"no Slurm token for user {user}: put it in {path} ({TOKENS_ENV})")
        return path.read_text().strip()
    topology = os.environ.get(jobs_api.TOPOLOGY_ENV)

    def topology_conf() -> str:
        try:
            return Path(str(topology)).read_text()
        except OSError as e:
            raise ConfigError(f"{jobs_api.TOPOLOGY_ENV}: cannot read the site's topology.conf: {e}") from e
    return jobs_api.SlurmSite(url.rstrip("/"), token_for, os.environ.get("GPUPOC_SLURM_PARTITION", "gpu"),
                     admin_user=os.environ.get("GPUPOC_SLURM_READER", "root"),
                     topology=topology_conf if topology else None,
                     api=os.environ.get(slurm_api.API_ENV, ""))


class SlurmBackend(Capabilities):
    name = "slurm"
    jobs_on_kubernetes = False
    # a required placement is a matching OR over the nodes' leaf features (harness/jobs/slurm/system.py placed_as); a
    # preferred one asks for nothing: topology/tree takes the fewest leaf switches anyway
    preferred_topology = "topology/tree's selection, asked nothing"
    lacking = {UPGRADE: "a site's Slurm is upgraded as system packages (slurmdbd, then slurmctld, then slurmd); the "
                        "harness does not replace them",
               MODEL_QUOTA: "a quota per model is a GRES type per model (gres/gpu:<type>) with an account limit per "
                            "type (GrpTRES), which the sim's Slurm does not configure yet (not checked)",
               SERVING: NOT_KUBERNETES, SERVED_MODEL: NOT_KUBERNETES,
               GPU_SHARING: "Slurm shares a GPU through GRES shards or MPS (gres/shard, gres/mps) in its own "
                            "configuration; the case drives fraction requests of a Kubernetes scheduler",
               DRA: "its GPUs are generic resources (GRES) of its nodes: Kubernetes' DRA claims do not reach it",
               AUTOSCALING: "its nodes are slurm.conf's: Slurm adds and removes cloud nodes by its own power saving "
                            "(ResumeProgram, SuspendTime), not by a Kubernetes autoscaler; that is not measured here",
               SAMPLE: "runs batch scripts on its nodes, not containers: the workload sample's case needs a container "
                       "(its image, its pod's volume for checkpoints)",
               BORROWING: "an account's GPU limit (GrpTRES) is a cap, not a quota lent while idle and reclaimed: "
                          "idle GPUs go by fair share, and a QOS preempts by priority",
               PROMPT_FAIR_SHARE: "Slurm ranks the accounts by recorded usage only every PriorityCalcPeriod (a "
                                  "minute at least) and evens out usage since its last reset, not the GPUs held now: "
                                  "a tenant arriving late waits up to a period for its first ranking, then takes "
                                  "every GPU that frees until its usage catches up. Its fairness case has the "
                                  "tenants arrive together and judges their shares over periods"}
    # the sim's exporter (harness/sim/slurm/exporter.py); a site's exporter is not mapped yet
    monitoring = Monitoring((
        Series("queue wait", "slurm_job_wait_seconds_count"),
        Series("pending per queue", 'slurm_queue_jobs{state="pending"}'),
        Series("admitted per queue", 'slurm_queue_jobs{state="running"}'),
        Series("preempted", "slurm_preempted_jobs_total", event=True),
        Series("quota per queue", "slurm_account_gpu_limit"),
        Series("usage per queue", "slurm_account_gpus_allocated"),
        Series("fair share per queue", "slurm_account_fairshare"),
        Series("GPUs per node", "slurm_node_gpus")),
        'sum(slurm_queue_jobs{{account="{queue}",state="pending"}})', pods=False)
    usage_metric = 'sum(slurm_account_gpus_allocated{{account="{queue}"}})'  # the sim's exporter
    # slurmdbd's records of runs ended by preemption (the sim's exporter); a 1-node filler's run is one member
    preemption = PreemptionCounter("sum(slurm_preempted_jobs_total)", "pods")
    controllers = Controllers(("slurmctld",), (), "a site's slurmctld is a system service the harness does not stop",
                              needs=("slurmrestd", "slurmdbd"))
    _rest: SlurmRest | None = None
    _model_applied = False

    _site: SlurmSite | None = None

    def site(self) -> SlurmSite | None:
        """Where this run's Slurm is: known once unavailable_reason has looked at the target."""
        return self._site

    def rest(self) -> SlurmRest:
        if self._rest is None:
            site = self.site()
            if site is None:
                raise ConfigError(f"no Slurm to talk to: start the sim with slurm (`gpupoc sim up --schedulers "
                                  f"...,slurm`) or set {URL_ENV} and {TOKENS_ENV}")
            self._rest = jobs_api.SlurmRest(site)
        return self._rest

    wait = WaitHistogram("slurm_job_wait_seconds", 1.0, "account")  # the sim's exporter (from slurmdbd)

    def lacks(self, capability: str, target: Features) -> str | None:
        if capability == PREEMPTION_COUNTER and not target.own_processes:
            return f"{self.name}: a site's Slurm exporter is not mapped yet (the sim's own counts preemptions)"
        if capability == QUEUE_QUOTA:
            return None  # an account per tenant with its GPU limit (GrpTRES), enforced by slurmctld
        if capability == RETRY_POLICY and not target.own_processes:
            return (f"{self.name}: a job is requeued when its node fails, and the harness fails no node of a site "
                    "(a batch script that fails is not rerun by Slurm)")
        if capability == MONITORING and not target.own_processes:
            return f"{self.name}: a site's Slurm exporter is not mapped yet (the sim's own has a catalogue)"
        if capability == RANKED_FAIR_SHARE and not target.own_processes:
            return (f"{self.name}: the fairness case starts the accounts' recorded usage from zero (sacctmgr, as the "
                    "Slurm administrator); a site's fair share also counts its accounts' past usage, so the shares "
                    "of one run say little")
        if capability == WAIT_HISTOGRAM and not target.own_processes:
            return f"{self.name}: a site's Slurm exporter is not mapped yet (the sim's own exports the histogram)"
        return super().lacks(capability, target)

    def unavailable_reason(self, target: Target) -> str | None:
        self._site = site_site() or target.slurm_site()
        if self._site is None:
            return f"slurm: no slurmrestd (the target is not a sim running slurm, and {URL_ENV} is unset)"
        try:
            self.rest().request("GET", "ping", self.rest().site.admin_user)
        except (HarnessError, ConfigError) as exc:
            return f"slurm: {exc}"
        return None

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        raise HarnessError("slurm jobs are submitted through slurmrestd, not as Kubernetes manifests")

    def serving_pod(self, tenant: Tenant) -> dict[str, Any]:
        raise HarnessError(NOT_KUBERNETES)

    def tracked_kind(self) -> tuple[str, str]:
        return f"slurm/{self.rest().version}", jobs_api.JOB_KIND

    def status(self, obj: dict[str, Any]) -> JobStatus:
        return jobs_api.status_of(obj)

    def describe(self, simulated: bool) -> dict[str, Any]:
        """For the record: version, partitions, nodes with their GRES, the accounts and QOS model."""
        rest = self.rest()
        admin = rest.site.admin_user
        try:
            ping = rest.request("GET", "ping", admin)
            version = ((ping.get("meta") or {}).get("Slurm") or {}).get("release", "unknown")
            partitions = rest.request("GET", "partitions", admin).get("partitions") or []
            associations = rest.request("GET", "associations", admin, db=True).get("associations") or []
            qos = rest.request("GET", "qos", admin, db=True).get("QOS") or []
        except HarnessError as exc:
            return {"url": rest.site.url, "error": str(exc)}
        return {"url": rest.site.url, "version": version, "simulated": simulated,
                "partitions": [{"name": p.get("name"), "nodes": p.get("nodes"), "state": p.get("state")}
                               for p in partitions],
                "nodes": [{"name": n.get("name"), "gres": n.get("gres"), "state": n.get("state")}
                          for n in rest.nodes()],
                "accounts": [{"account": a.get("account"), "user": a.get("user") or "", "shares": a.get("shares_raw"),
                              "gpu_limit": next((t.get("count") for t in ((a.get("max") or {}).get("tres") or {})
                                                 .get("total") or [] if t.get("name") == "gpu"), None),
                              "qos": ",".join(a.get("qos") or [])}
                             for a in associations if a.get("account") != "root"],
                "qos": [{"name": q.get("name"), "priority": q.get("priority"),
                         "preempts": ",".join((q.get("preempt") or {}).get("list") or []),
                         "preempt_mode": ",".join((q.get("preempt") or {}).get("mode") or [])} for q in qos]}

    def cluster_gpus(self) -> int:
        return sum(jobs_api.gres_count(str(n.get("gres", ""))) for n in self.rest().nodes())

    def job_system(self, target: Target, profile: Profile, run_id: str, test_id: str,
                   apply_model: bool = True) -> SlurmJobs:
        """This test's jobs on Slurm; on the sim, the reference model applied first (once per run, unless the run
        keeps the queue model it finds: --queue-model=keep)."""
        if target.features.own_processes and apply_model and not self._model_applied:
            self.apply_reference_model(profile)
        return jobs_api.SlurmJobs(self.rest(), run_id, test_id, accounts_of(profile),
                                  profile.timeouts.delete)

    def usage_from_zero(self, profile: Profile) -> float:
        """The sim's accounts with no recorded usage (RawUsage=0), once slurmctld has ranked them on it (up to a
        PriorityCalcPeriod later); gives that period in seconds."""
        site = self.rest().site
        if site.usage_from_zero is None:
            raise HarnessError("slurm: a site's recorded usage is not reset by the harness (the sim's is)")
        return site.usage_from_zero(list(accounts_of(profile).values()))

    def apply_reference_model(self, profile: Profile) -> None:
        """The sim's accounts, users and QOS from the profile (sacctmgr, as the sim's Slurm administrator)."""
        accounts, site = accounts_of(profile), self.rest().site
        if site.apply_model is None:
            raise HarnessError("slurm: a site's accounts are its administrator's; the harness applies only the sim's")
        site.apply_model([
            {"account": accounts[t.name], "user": t.identity, "weight": t.weight, "limit_gpus": t.limit_gpus}
            for t in profile.tenants if t.name in accounts], self.cluster_gpus())
        self._model_applied = True


def accounts_of(profile: Profile) -> dict[str, str]:
    """tenant name -> its Slurm account (tenants[].queues.slurm)."""
    return {t.name: t.queues["slurm"] for t in profile.tenants if t.queues.get("slurm")}
