"""The acceptance record of real sim runs: contents, offline HTML in Chromium, JSON schema, comparison,
interrupted runs, and no secret anywhere in it."""

from __future__ import annotations

import copy
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client

from harness.record.compare import compare
from harness.record.model import load_record, validate
from harness.sim import cluster
from harness.core.paths import REPO_ROOT
from tests.fixtures.interrupt import interruptible

ARTIFACTS = REPO_ROOT / "reports" / "ci-artifacts"


def pytest_run(tmp_path: Path, *args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args,
                           f"--reports-dir={tmp_path}"], cwd=cwd, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def gang_run(tmp_path_factory: pytest.TempPathFactory, sim_api: client.ApiClient) -> Path:
    reports = tmp_path_factory.mktemp("reports")
    result = pytest_run(reports, "suites/training/test_gang_admission.py", "--backends=volcano,default",
                        "--run-id=record-test")
    assert "1 failed, 1 passed" in result.stdout, result.stdout[-2000:]
    return reports / "record-test"


def test_record_of_a_sim_run_has_gpus_matrix_and_evidence(gang_run: Path) -> None:
    data = json.loads((gang_run / "record.json").read_text())
    assert validate(data) == []
    assert {n["model"] for n in data["nodes"]} == {"NVIDIA-H100-80GB-HBM3"}
    assert {n["driver_version"] for n in data["nodes"]} == {"550.90.07"}
    assert data["runner"].startswith("Python 3.") and ", pytest " in data["runner"]  # pytest-html's table is hidden
    record = load_record(gang_run / "record.json")
    criteria, backends, cells = record.matrix()
    assert criteria == ["training.gang_admission"] and backends == ["default", "volcano"]
    assert [r.outcome for r in cells[("training.gang_admission", "volcano")]] == ["PASS"]
    default = cells[("training.gang_admission", "default")][0]
    assert default.outcome == "FAIL" and "max_partial_pods: 3 pods" in default.message
    events = default.evidence[0]["diagnostics"]
    assert any("FailedScheduling" in line or "Scheduled" in line for line in events), events
    assert all(r.evidence and r.evidence[0]["checks"] for r in record.results)
    assert (gang_run / "junit.xml").exists() and "testcase" in (gang_run / "junit.xml").read_text()


def test_record_opens_with_the_verdict_and_keeps_samples_and_operations(gang_run: Path) -> None:
    """The page is titled by run and target and opens with the verdict; each case keeps what it submitted; each
    backend has its operations table (versions from the sim, CRDs by group, CPU and memory from Prometheus)."""
    data = json.loads((gang_run / "record.json").read_text())
    assert data["schema_version"] == 3
    assert all(r["samples"] and r["samples"][0]["manifest"]["kind"] for r in data["results"])
    volcano = data["operations"]["volcano"]
    assert volcano["components"][0]["name"] == "volcano-scheduler"
    assert volcano["components"][0]["version"].startswith("volcano v")
    assert "scheduling.volcano.sh" in volcano["crds"]
    assert isinstance(volcano["usage"][0]["memory peak (MiB)"], float)  # the sim's Prometheus scrapes it
    html = (gang_run / "record.html").read_text()
    assert '<title id="head-title">gpupoc run record-test on sim gpupoc-sim</title>' in html
    assert html.index('id="gpupoc-verdict"') < html.index('id="gpupoc-environment"')


PROBE = ("<script>window.addEventListener('load', () => setTimeout(() => document.body.setAttribute("
         "'data-resources', JSON.stringify(performance.getEntriesByType('resource').map(e => e.name))), 500));"
         "</script>")


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_record_opens_offline_in_chromium(gang_run: Path, tmp_path: Path) -> None:
    """The page from disk shows the matrix and the GPU inventory, and loads nothing over the network:
    the page's own resource timing is read back (the browser's background traffic is not the page's)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    html = (gang_run / "record.html").read_text()
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']https?://", html)
    probed = tmp_path / "record.html"
    probed.write_text(html.replace("</body>", PROBE + "</body>"))
    common = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1300,2400",
              "--no-first-run", "--virtual-time-budget=5000"]
    dom = subprocess.run([*common, "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert "Matrix: criterion × backend" in dom and "GPU inventory" in dom and "NVIDIA-H100-80GB-HBM3" in dom
    loaded = re.search(r'data-resources="([^"]*)"', dom)
    assert loaded is not None, "the resource probe did not run"
    resources = json.loads(loaded.group(1).replace("&quot;", '"'))
    assert [r for r in resources if r.startswith(("http://", "https://"))] == [], resources
    subprocess.run([*common, f"--screenshot={ARTIFACTS / 'record.png'}", (gang_run / "record.html").as_uri()],
                   capture_output=True, timeout=120)
    assert (ARTIFACTS / "record.png").stat().st_size > 10_000


def test_compare_flags_a_changed_value(gang_run: Path, tmp_path: Path) -> None:
    first = json.loads((gang_run / "record.json").read_text())
    second = copy.deepcopy(first)
    second["run_id"] = "record-test-2"
    for result in second["results"]:
        for evidence in result["evidence"]:
            for check in evidence["checks"]:
                if check["name"] == "all_bound_within_s":
                    check["measured"] = check["measured"] + 20
    (tmp_path / "a.json").write_text(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(second))
    page = compare([tmp_path / "a.json", tmp_path / "b.json"])
    assert page.count("class='regressed'") == 2  # all_bound_within_s of both backends got worse
    assert "record-test-2" in page and "mean" in page


def test_interrupted_run_leaves_a_readable_record(tmp_path: Path, sim_api: client.ApiClient) -> None:
    (tmp_path / "test_slow.py").write_text("import time\nCRITERION = 'training.queue_wait'\n"
                                           "def test_first(api):\n    pass\n"
                                           "def test_slow(api):\n    open('ready', 'w').close()\n    time.sleep(300)\n"
                                           "def test_never(api):\n    pass\n")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "harness.plugin", "-p", "no:cacheprovider",
                             "--run-id=interrupted", f"--reports-dir={tmp_path}", "test_slow.py"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    record = load_record(tmp_path / "interrupted" / "record.json")
    assert record.interrupted
    outcomes = {r.nodeid.split("::")[1]: r.outcome for r in record.results}
    assert outcomes == {"test_first": "PASS", "test_slow": "UNFINISHED", "test_never": "UNFINISHED"}
    assert "UNFINISHED" in (tmp_path / "interrupted" / "record.html").read_text()


def test_planted_secrets_never_reach_the_record(tmp_path: Path, sim_api: client.ApiClient) -> None:
    admin_token = (cluster.layout().root / "admin.token").read_text().strip()
    planted = "s3cr3t-planted-value-123456"
    (tmp_path / "test_leaky.py").write_text(f"""
import base64
from kubernetes import client
def test_leaks(api, namespace):
    core = client.CoreV1Api(api)
    core.create_namespaced_secret(namespace, {{"metadata": {{"name": "db"}}, "stringData": {{"password": "{planted}"}}}})
    secret = core.read_namespaced_secret("db", namespace)
    print("secret data:", secret.data, base64.b64decode(secret.data["password"]).decode())
    print(open({str(cluster.layout().kubeconfig)!r}).read())
    assert False, "token: " + {admin_token!r} + " password: {planted}"
""")
    # as the sim's admin: planting a Secret is no part of the runner's role
    pytest_run(tmp_path, "-p", "harness.plugin", "--run-id=leaky", "--identity=admin", "test_leaky.py", cwd=tmp_path)
    written = {p.name: p.read_text() for p in (tmp_path / "leaky").iterdir()}
    assert set(written) == {"record.json", "record.html", "junit.xml", "requests.json"}
    for name, text in written.items():
        assert admin_token not in text, name
        assert planted not in text, name
        assert "BEGIN CERTIFICATE" not in text and "BEGIN PRIVATE KEY" not in text, name
    assert "[REDACTED]" in written["record.json"]
