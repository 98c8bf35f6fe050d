"""Staging mode on the sim playing staging: the runner as a ServiceAccount bound to its least-privilege role
(manifests/rbac/, `gpupoc rbac`), through a kubeconfig with its token, against the queue model an admin set up
beforehand (--queue-model keep). One case per mechanism (each training backend's gang, RBAC isolation, a model
service) and the preflight; outcomes as the admin's run gives them (suites/expected.yaml). A role without one
verb: the preflight names the missing permission and the run stops, and a request the role refuses is an ERROR
naming it, not a FAIL. The in-cluster loader, pointed at the ServiceAccount's token and CA, is the same runner.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from harness.config import options as harness_config
from harness.cluster import rbac
from harness.config.options import resolve
from harness.core.errors import ConfigError
from harness.run.outcomes import ERROR, classify, load_expected, unexpected
from harness.setup.preflight import MISSING, blocked, run_preflight
from harness.config.profile import Profile
from harness.record.model import load_record
from harness.cluster.seam import PermissionMissing
from harness.sim import cluster
from harness.core.paths import REPO_ROOT
from harness.cluster.manifests import RUN_LABEL
from harness.targets.identity import ROLE_DROP_ENV, RUNNER_ACCOUNT, runner_client
from harness.targets.target import connect, in_cluster_client

ACCOUNT = "gpupoc-lp/gpupoc-runner"
LOCK = ("default", "gpupoc-run-lock")
CASES = ("suites/training/test_gang_admission.py", "suites/governance/test_tenant_isolation.py::test_tenant_isolation",
         "suites/inference/test_cold_start.py::test_cold_start[default]")
MECHANISMS = "kueue,volcano,kuberay,kai,default"
TOKEN_SECONDS = 3600


@dataclass(frozen=True)
class Runner:
    kubeconfig: Path
    token: str
    docs: list[dict[str, Any]]


def runner_kubeconfig(path: Path, server: str, ca: str, token: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gpupoc-runner",
        "clusters": [{"name": "sim", "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": "gpupoc-runner", "user": {"token": token}}],
        "contexts": [{"name": "gpupoc-runner", "context": {"cluster": "sim", "user": "gpupoc-runner"}}]}))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def runner(sim_api: client.ApiClient, queue_model: Profile, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Runner]:
    """The ServiceAccount and its role, applied by the admin; a token; a kubeconfig with nothing else in it."""
    docs = rbac.runner_manifests(queue_model, ACCOUNT, LOCK)
    rbac.apply(sim_api, ACCOUNT, docs)
    namespace, name = ACCOUNT.split("/")
    token = client.CoreV1Api(sim_api).create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": TOKEN_SECONDS}}).status.token
    admin = yaml.safe_load(cluster.layout().kubeconfig.read_text())["clusters"][0]["cluster"]
    path = runner_kubeconfig(tmp_path_factory.mktemp("runner") / "kubeconfig", admin["server"],
                             admin["certificate-authority"], token)
    yield Runner(path, token, docs)
    rbac.remove(sim_api, ACCOUNT, docs)
    client.CoreV1Api(sim_api).delete_namespace(namespace)
    runner_client(sim_api, queue_model, LOCK)  # the roles are shared by name: the session's own runner's back


def as_runner(runner: Runner, *args: str, env: dict[str, str] | None = None,
              gpupoc: tuple[str, ...] = (sys.executable, "-m", "harness.cli"), cwd: Path = REPO_ROOT
              ) -> subprocess.CompletedProcess[str]:
    """A gpupoc command as the runner: its options before any `--` (what follows is pytest's), so that `gpupoc run`
    itself meets the cluster as the runner, not the sim as its own."""
    own = [f"--kubeconfig={runner.kubeconfig}", "--queue-model=keep", f"--prometheus-url={cluster.prometheus_url()}"]
    split = args.index("--") if "--" in args else len(args)
    return subprocess.run([*gpupoc, *args[:split], *own, *args[split:]],
                          cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def installed_wheel(folder: Path) -> tuple[Path, Path]:
    """The wheel of this checkout (setuptools, as `pip wheel .` builds it) installed into a fresh virtual environment:
    its `gpupoc` script and site-packages. The wheel goes in without its dependencies, which the environment sees
    through a .pth line naming the project's own site-packages (a plain folder on sys.path: the editable install's
    finder there is not loaded). Built and installed by uv, which the Makefile installs: 2 s, where pip fetched its
    build requirements afresh for each wheel (19 s, 2026-12-07)."""
    uv = (sys.executable, "-m", "uv", "-q")
    subprocess.run([*uv, "build", "--wheel", "-o", str(folder / "dist"), str(REPO_ROOT)], check=True, timeout=300,
                   capture_output=True)
    subprocess.run([*uv, "venv", "--python", sys.executable, str(folder / "venv")], check=True, timeout=120,
                   capture_output=True)
    python = folder / "venv" / "bin" / "python"
    subprocess.run([*uv, "pip", "install", "--no-deps", "--python", str(python),
                    *map(str, (folder / "dist").glob("*.whl"))], check=True, timeout=300, capture_output=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "gpupoc-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder / "venv" / "bin" / "gpupoc", Path(site)


def test_one_case_per_mechanism_as_the_least_privileged_runner_from_the_installed_wheel(runner: Runner,
                                                                                      tmp_path: Path) -> None:
    """Installed as users install it: the wheel in a fresh environment, run from a folder that is not the checkout,
    carries the suites, profiles, manifests, designed outcomes and templates, and its record lands in ./reports.
    One case per mechanism, as the runner: outcomes as designed, every request inside the role."""
    gpupoc, site = installed_wheel(tmp_path / "install")
    for data, where in (("manifests", "harness/bundled/manifests"), ("profiles", "harness/bundled/profiles")):
        files = {f.relative_to(REPO_ROOT / data) for f in (REPO_ROOT / data).rglob("*") if f.is_file()}
        assert files == {f.relative_to(site / where) for f in (site / where).rglob("*") if f.is_file()}, data
    assert all((site / path).is_file() for path in ("suites/expected.yaml", "suites/releases.yaml",
                                                    "harness/record/templates/page.html.j2"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    installed = (str(gpupoc),)
    helped = as_runner(runner, "run", "--help", gpupoc=installed, cwd=elsewhere)
    assert helped.returncode == 0 and "--queue-model" in helped.stdout, helped.stdout + helped.stderr
    preflight = as_runner(runner, "preflight", gpupoc=installed, cwd=elsewhere)
    assert preflight.returncode == 0, preflight.stdout + preflight.stderr
    assert "permissions the suites use" in preflight.stdout and "MISSING" not in preflight.stdout, preflight.stdout
    result = as_runner(runner, "run", f"--backends={MECHANISMS}", "--run-id=least-privilege", "--", *CASES, "-q",
                       gpupoc=installed, cwd=elsewhere)
    reports = elsewhere / "reports" / "least-privilege"
    assert (reports / "record.json").exists(), result.stdout[-3000:] + result.stderr[-2000:]
    record = load_record(reports / "record.json")
    assert record.commit == "gpupoc 0.1.0 (installed)", record.commit
    assert not (elsewhere / ".pytest_cache").exists() and (reports / "record.html").exists()
    outcomes = [(r.criterion, r.backend, r.outcome) for r in record.results]
    assert not unexpected(outcomes, load_expected()), "\n".join(
        f"{r.nodeid}: {r.outcome} {r.message}" for r in record.results) + result.stdout[-3000:]
    ran = {(c, b) for c, b, o in outcomes if o != "SKIP"}
    assert {("training.gang_admission", b) for b in MECHANISMS.split(",")} | {
        ("governance.tenant_isolation", "-"), ("inference.cold_start", "default")} <= ran, outcomes
    seen = rbac.load_requests(reports / "requests.json")
    assert seen and not rbac.outside(runner.docs, seen), [r.describe() for r in rbac.outside(runner.docs, seen)]


def runs_suites(requests: Path) -> bool:
    """The run beside these requests ran suites/ only (not a test's own test body, which may do what it likes)."""
    record = requests.with_name("record.json")
    try:
        return all(r.nodeid.startswith("suites/") for r in load_record(record).results)
    except ConfigError:  # no record beside it, or not one: a test's own run, judged by that test
        return False


@pytest.mark.gpupoc_last
def test_every_request_of_the_suites_run_in_this_session_is_in_the_role(queue_model: Profile,
                                                                         tmp_path_factory: pytest.TempPathFactory
                                                                         ) -> None:
    """Runs last (see tests/conftest.py): the union of what every suite run of this session asked of the API
    server (requests.json beside each record) is inside the runner's role, with its destructive part, which the
    runner has on the sim (the training scenarios' lost node is a node tainted: `patch nodes`, make test
    2026-12-06, when they ran on this worker); a suite that starts using a verb outside it fails here, naming it."""
    files = [f for f in tmp_path_factory.getbasetemp().rglob(rbac.REQUESTS_FILE) if runs_suites(f)]
    if not files:
        pytest.skip("no suite ran in this session")
    seen = {r for f in files for r in rbac.load_requests(f)}
    docs = rbac.runner_manifests(queue_model, ACCOUNT, LOCK, destructive=())
    beyond = [r.describe() for r in rbac.outside(docs, sorted(seen))]
    assert not beyond, f"{len(files)} runs; requests outside manifests/rbac/: " + "; ".join(beyond)


def test_a_verb_missing_from_the_role_is_named_by_the_preflight_and_is_an_error(
        runner: Runner, sim_api: client.ApiClient, queue_model: Profile) -> None:
    """The runner's Role in team-a's namespace without `delete` on Jobs (what its teardown does)."""
    tenant = queue_model.tenants[0].namespace
    role = client.RbacAuthorizationV1Api(sim_api)
    original = role.read_namespaced_role("gpupoc-runner", tenant)
    rules = [sim_api.sanitize_for_serialization(r) for r in original.rules]
    for rule in rules:
        if "batch" in rule["apiGroups"] and "jobs" in rule["resources"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != "delete"]
    role.patch_namespaced_role("gpupoc-runner", tenant, {"rules": rules})
    missing = f"may not delete batch/jobs in namespace {tenant}"
    try:
        preflight = as_runner(runner, "preflight")
        assert preflight.returncode == 1, preflight.stdout + preflight.stderr
        assert missing in preflight.stdout and "add it to the runner's role" in preflight.stdout, preflight.stdout
        assert "blocking problem(s): the run cannot start" in preflight.stdout, preflight.stdout
        run = as_runner(runner, "run", "--backends=kueue", "--", "suites/training/test_gang_admission.py", "-q")
        assert run.returncode == 2 and missing in run.stdout + run.stderr, run.stdout + run.stderr
        assert "▶" not in run.stdout, "no case started"
        # a request the role refuses, past any preflight: one line naming it, an ERROR (not a FAIL)
        cfg = resolve({"kubeconfig": str(runner.kubeconfig), "queue_model": "keep"})
        with pytest.raises(PermissionMissing) as refused:
            client.BatchV1Api(connect(cfg).api).delete_namespaced_job("gpupoc-lp-no-such-job", tenant)
        said = str(refused.value)
        assert "\n" not in said and 'cannot delete resource "jobs" in API group "batch"' in said, said
        assert "gpupoc rbac" in said and classify(refused.value) == ERROR
    finally:
        role.replace_namespaced_role("gpupoc-runner", tenant, client.V1Role(
            metadata=client.V1ObjectMeta(name="gpupoc-runner", namespace=tenant), rules=original.rules))


def test_in_cluster_the_runner_is_its_pods_service_account(runner: Runner, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-cluster loader reads the pod's token and CA: here the runner's, written where a pod has them."""
    admin = yaml.safe_load(cluster.layout().kubeconfig.read_text())["clusters"][0]["cluster"]
    mounted = tmp_path / "serviceaccount"
    mounted.mkdir()
    (mounted / "token").write_text(runner.token)
    (mounted / "ca.crt").write_text(Path(admin["certificate-authority"]).read_text())
    host, port = admin["server"].removeprefix("https://").rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    monkeypatch.setattr(harness_config, "SERVICE_ACCOUNT_DIR", mounted)
    cfg = resolve({"queue_model": "keep", "prometheus_url": cluster.prometheus_url()})
    assert not cfg.targets_sim
    target = connect(cfg)
    assert target.kind == "in-cluster" and target.context == "in-cluster"
    review = client.AuthenticationV1Api(target.api).create_self_subject_review({})
    assert review.status.user_info.username == "system:serviceaccount:gpupoc-lp:gpupoc-runner"
    checks = run_preflight(target, cfg)
    assert not blocked(checks), "\n".join(c.line() for c in checks if c.status == MISSING)
    assert in_cluster_client(mounted).configuration.host == admin["server"]
    assert all(runner.token not in c.line() for c in checks)


def test_the_in_cluster_manifests_pass_a_server_side_dry_run(runner: Runner, sim_api: client.ApiClient) -> None:
    """manifests/in-cluster/ as the API server would take them (in the runner's namespace here; nothing stays)."""
    from kubernetes.dynamic import DynamicClient
    dynamic, namespace = DynamicClient(sim_api), ACCOUNT.split("/")[0]
    docs = [d for f in sorted((REPO_ROOT / "manifests" / "in-cluster").glob("*.yaml"))
            for d in yaml.safe_load_all(f.read_text()) if d]
    assert {d["kind"] for d in docs} == {"Namespace", "ServiceAccount", "ConfigMap", "PersistentVolumeClaim", "Job"}
    job = next(d for d in docs if d["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "gpupoc-runner"
    for doc in docs:
        if doc["kind"] != "Namespace":
            doc["metadata"]["namespace"] = namespace
        resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        resource.server_side_apply(body=doc, name=doc["metadata"]["name"], namespace=doc["metadata"].get("namespace"),
                                   field_manager="gpupoc-test", dry_run="All")


def test_on_the_sim_the_run_is_the_runner_and_a_role_one_verb_short_stops_it(
        sim_api: client.ApiClient, queue_model: Profile, tmp_path: Path) -> None:
    """`gpupoc run` on the sim runs as the runner's own ServiceAccount (targets/identity.py). Its role without
    `watch` on Jobs: the preflight names the missing permission and no case starts; nothing of the run is left;
    the refused request itself is one line naming the verb and the resource, an ERROR."""
    tenant = queue_model.tenants[0].namespace
    env = {**os.environ, ROLE_DROP_ENV: "watch batch/jobs"}
    env.pop("GPUPOC_IDENTITY", None)  # the default: the runner
    run = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--backends=kueue", "--run-id=one-verb-short",
                          f"--reports-dir={tmp_path}", "--", "suites/training/test_gang_admission.py", "-q",
                          "-p", "no:cacheprovider"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                         env=env)
    said = run.stdout + run.stderr
    try:
        assert run.returncode == 2 and f"may not watch batch/jobs in namespace {tenant}" in said, said[-3000:]
        assert "▶" not in run.stdout, "no case started"
        left = client.CoreV1Api(sim_api).list_namespace(label_selector=f"{RUN_LABEL}=one-verb-short").items
        assert not left, [n.metadata.name for n in left]
        runner = runner_client(sim_api, queue_model, LOCK, dropped=["watch batch/jobs"])
        with pytest.raises(client.ApiException) as refused:
            client.BatchV1Api(runner).list_namespaced_job(tenant, watch=True, timeout_seconds=1)
        said = json.loads(refused.value.body)["message"]
        assert refused.value.status == 403 and 'cannot watch resource "jobs" in API group "batch"' in said, said
        whoami = client.AuthenticationV1Api(runner).create_self_subject_review({})
        assert whoami.status.user_info.username == f"system:serviceaccount:{RUNNER_ACCOUNT.replace('/', ':')}"
    finally:
        runner_client(sim_api, queue_model, LOCK)  # the whole role back, for the session's own runner
