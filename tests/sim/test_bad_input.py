"""Bad input, in one place: every user-facing input ends with one line naming what is wrong and how to fix it,
exit status 2, no traceback, and nothing created in the cluster. (The sim's own flags: tests/unit/sim/test_sim_config.py.)
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from harness.cli import main
from harness.cluster.manifests import MANAGED_LABEL, MANAGER
from harness.sim import cluster
from harness.core.paths import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "bad_input"
SIM_PROFILE = REPO_ROOT / "profiles" / "sim.yaml"


def profile_with(tmp_path: Path, change: Callable[[dict[str, object]], None]) -> str:
    data = yaml.safe_load(SIM_PROFILE.read_text())
    change(data)
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def unknown_field(d: dict[str, object]) -> None:
    d["frobnicate"] = 1


def threshold_not_a_number(d: dict[str, object]) -> None:
    d["thresholds"]["training.queue_wait"]["p95_s"] = "fast"  # type: ignore[index]


def missing_namespace(d: dict[str, object]) -> None:
    d["tenants"][1]["namespace"] = "no-such-namespace"  # type: ignore[index]


def missing_queue(d: dict[str, object]) -> None:
    d["tenants"][0]["queues"]["volcano"] = "no-such-queue"  # type: ignore[index]


CASES: list[tuple[str, list[str], dict[str, str], str]] = [  # id, argv, environment, what the line must say
    ("no command", [], {}, "the following arguments are required: command"),
    ("unknown command", ["frobnicate"], {}, "invalid choice: 'frobnicate'"),
    ("repeat zero", ["run", "--repeat", "0"], {}, "--repeat must be at least 1"),
    ("profile missing", ["run", "--profile", "/no/such/profile.yaml"], {}, "cannot read it"),
    ("profile syntax", ["run", "--profile", str(FIXTURES / "syntax.yaml")], {}, "not valid YAML"),
    ("profile schema", ["run", "--profile", "{unknown_field}"], {}, "frobnicate: unknown field"),
    ("profile value", ["run", "--profile", "{threshold_not_a_number}"], {}, "p95_s: must be a number"),
    ("profile namespace", ["run", "--queue-model", "keep", "--profile", "{missing_namespace}"], {},
     "namespace no-such-namespace (tenant team-b)"),
    ("profile queue", ["run", "--queue-model", "keep", "--backends", "volcano", "--profile", "{missing_queue}"], {},
     "volcano Queue no-such-queue (tenant team-a)"),
    ("backend unknown", ["run", "--backends", "slurmish"], {}, "--backends: unknown slurmish"),
    ("backend from env", ["run"], {"GPUPOC_BACKENDS": "slurmish"}, "GPUPOC_BACKENDS: unknown slurmish"),
    ("kubeconfig missing", ["run", "--kubeconfig", "/no/such/kubeconfig"], {}, "no such file"),
    ("kubeconfig not one", ["run", "--kubeconfig", str(FIXTURES / "not-json.txt")], {}, "cannot read it as a kubeconfig"),
    ("context unknown", ["run", "--kubeconfig", "{sim_kubeconfig}", "--context", "staging"], {},
     "'staging' is not in kubeconfig"),
    ("prometheus url", ["run", "--prometheus-url", "prometheus:9090"], {}, "give an http(s) URL"),
    ("prometheus not prometheus", ["run", "--prometheus-url", "{not_prometheus}"], {},
     "does not answer as Prometheus"),
    ("credentials refused", ["run", "--kubeconfig", "{refused_kubeconfig}"], {}, "refuses the credentials: 401"),
    ("destructive elsewhere", ["run", "--allow-destructive", "staging-1"], {},
     "names staging-1, but the context under test is gpupoc-sim"),
    ("backend not installed", ["run", "--backends", "kai"], {"GPUPOC_TEST_HIDE": "kai"}, "names kai, which this "
     "cluster lacks"),
    ("run id", ["run", "--run-id", "my run!"], {}, "letters, digits and '-' only"),
    ("queue model", ["run", "--queue-model", "maybe"], {}, "choose from apply, keep"),
    ("wait lock", ["run"], {"GPUPOC_WAIT_LOCK": "soon"}, "GPUPOC_WAIT_LOCK 'soon': give a number of seconds"),
    ("run lock", ["run", "--run-lock", "no-slash"], {}, "give NAMESPACE/NAME of a Lease"),
    ("pytest option", ["run", "--", "--no-such-pytest-option"], {}, ""),
    ("compare missing", ["compare", "/no/such/record.json"], {}, "cannot read it"),
    ("compare not json", ["compare", str(FIXTURES / "not-json.txt")], {}, "not JSON"),
    ("compare not a record", ["compare", str(FIXTURES / "partial-record.json")], {}, "missing or unknown fields"),
    ("check-designed missing", ["check-designed", "/no/such/record.json"], {}, "give the record.json of a run"),
    ("sim component", ["sim", "stop", "kube-dns"], {}, "no sim component 'kube-dns'"),
    ("sim freeze time", ["sim", "freeze", "kueue", "--for", "0"], {}, "--for must be a positive number of seconds"),
    ("sim schedulers", ["sim", "up", "--schedulers", "lsf"], {}, "--schedulers: unknown lsf"),
    ("sim schedulers env", ["sim", "up"], {"GPUPOC_SIM_SCHEDULERS": "lsf"}, "unknown lsf"),
]


def refused_kubeconfig(tmp_path: Path) -> str:
    """The sim's kubeconfig with a token the API server does not know."""
    data = yaml.safe_load(cluster.layout().kubeconfig.read_text())
    data["users"][0]["user"] = {"token": "not-a-token-the-api-server-knows"}
    path = tmp_path / "refused.kubeconfig"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def not_prometheus(request: pytest.FixtureRequest) -> str:
    """An HTTP server on 127.0.0.1 that is not Prometheus (404 for every path), for this test only."""
    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    request.addfinalizer(server.shutdown)
    return f"http://127.0.0.1:{server.server_address[1]}"


def ours(api: client.ApiClient) -> list[str]:
    """gpupoc's namespaces, less those an earlier test's teardown is deleting (gone by the session's end)."""
    return sorted(n.metadata.name for n in client.CoreV1Api(api).list_namespace(
        label_selector=f"{MANAGED_LABEL}={MANAGER}").items if n.status.phase != "Terminating")


@pytest.mark.parametrize("argv, env, says", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(argv: list[str], env: dict[str, str], says: str,
                                                          tmp_path: Path, sim_api: client.ApiClient,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capfd: pytest.CaptureFixture[str],
                                                          request: pytest.FixtureRequest) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    changes = {"{unknown_field}": unknown_field, "{threshold_not_a_number}": threshold_not_a_number,
               "{missing_namespace}": missing_namespace, "{missing_queue}": missing_queue}
    places = {"{sim_kubeconfig}": lambda: str(cluster.layout().kubeconfig),
              "{refused_kubeconfig}": lambda: refused_kubeconfig(tmp_path),
              "{not_prometheus}": lambda: not_prometheus(request)}
    argv = [profile_with(tmp_path, changes[a]) if a in changes else places[a]() if a in places else a for a in argv]
    if env.get("GPUPOC_TEST_HIDE"):  # a backend this cluster lacks: its CRDs not served (as on a cluster without it)
        from harness import backends
        monkeypatch.setattr(backends.ALL[env["GPUPOC_TEST_HIDE"]], "unavailable_reason",
                            lambda api: "kai: CRD podgroups.scheduling.run.ai not served")
    before = ours(sim_api)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    out, err = capfd.readouterr()
    assert code == 2, out + err
    assert "Traceback" not in out + err
    if argv[:2] != ["run", "--"]:  # pytest words its own usage errors
        lines = err.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], err
    assert ours(sim_api) == before
