"""`python -m doctor --outputs FILE` as users run it, against a loopback API that requires
the admin's client certificate and serves the recorded cluster: the real collector, the
table, the JSON and the exit codes."""

import datetime
import json
import os
import re
import subprocess
import sys


from components.kubernetes.kubeconfig import client_kubeconfig
from tests.builders import PROJECT_DIR
from tests.doctor.apiserver import LIST_PATHS, ApiServer
from tests.doctor.cluster import FIXTURES, PLUGIN_PODS, nvml_log, stamp, token_secret
from tests.pki import Authority, pem


def run_doctor(*args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DOCTOR_")}
    return subprocess.run([sys.executable, "-m", "doctor", *args], cwd=PROJECT_DIR, env=env,
                          capture_output=True, text=True, timeout=120)


def write_outputs(tmp_path, cluster, authority, server_url, client=None):
    cert, key = client or authority.client(days=300)
    kubeconfig = client_kubeconfig("lab", server_url, pem(authority.cert), "lab-admin",
                                   pem(cert), key)
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(cluster.outputs(kubeconfig)))
    return path, key


def test_healthy_cluster(served, cluster, authority, tmp_path):
    outputs, key = write_outputs(tmp_path, cluster, authority, served.url)
    hosts = str(FIXTURES / "hosts")
    table = run_doctor("--outputs", str(outputs), "--host-outputs", hosts)
    assert table.returncode == 0, table.stdout + table.stderr
    assert table.stdout.startswith(f"cluster at {served.url} (outputs file '{outputs}')")
    # 3 nodes x (registered, ready, address, GPUs, device plugin), the class, the claims,
    # 2 MySQL pods, the namespaces, 2 certificates, the tokens, moscow's 6 host checks, the
    # control plane's one line.
    assert table.stdout.endswith("\n\nnothing wrong found\n\n0 problem, 0 could not check, "
                                 "0 warning, 30 ok (--all shows the ok ones)\n")

    every = run_doctor("--outputs", str(outputs), "--host-outputs", hosts, "--all")
    assert re.search(r"\nok +gpu-allocatable +node madrid\n    4 nvidia.com/gpu allocatable\n",
                     every.stdout)
    assert "node madrid" in every.stdout and "host moscow" in every.stdout

    report = run_doctor("--outputs", str(outputs), "--host-outputs", hosts, "--json")
    assert report.returncode == 0, report.stderr
    document = json.loads(report.stdout)
    assert document["exitCode"] == 0 and document["server"] == served.url
    assert document["counts"] == {"problem": 0, "could-not-check": 0, "warning": 0, "ok": 30}
    checks = {f["check"] for f in document["findings"]}
    assert {"gpu-device-plugin", "join-tokens", "host-mtu"} <= checks

    # Read-only, every list read (all pages), each plugin's log read.
    assert {method for method, _ in served.requests} == {"GET"}
    paths = [path for _, path in served.requests]
    for path in LIST_PATHS:
        assert any(p.split("?")[0] == path for p in paths), path
    assert any("continue=2" in p for p in paths)
    for pod in PLUGIN_PODS.values():
        assert (f"/api/v1/namespaces/kube-system/pods/{pod}/log?container=nvidia-device-plugin"
                f"&tailLines=300") in paths
    key_line = key.splitlines()[1]
    for run in (table, every, report):
        assert key_line not in run.stdout + run.stderr


def test_broken_cluster(served, cluster, authority, tmp_path, now):
    del cluster.find("nodes", "madrid")["status"]["allocatable"]["nvidia.com/gpu"]
    plugin = cluster.find("pods", PLUGIN_PODS["madrid"])["status"]["containerStatuses"][0]
    plugin.update(restartCount=5, state={"waiting": {"reason": "CrashLoopBackOff"}})
    cluster.logs[("kube-system", PLUGIN_PODS["madrid"], "nvidia-device-plugin", True)] = \
        nvml_log()
    mysql = cluster.find("pods", "katib-mysql-7c5b9d8f6-x2r4m")["status"]["containerStatuses"][0]
    mysql.update(restartCount=31, state={"waiting": {"reason": "CrashLoopBackOff"}})
    namespace = cluster.find("namespaces", "kubeflow")
    namespace["metadata"]["deletionTimestamp"] = stamp(now - datetime.timedelta(hours=3))
    namespace["status"] = {"phase": "Terminating", "conditions": [
        {"type": "NamespaceFinalizersRemaining", "status": "True",
         "reason": "SomeFinalizersRemain", "lastTransitionTime": stamp(now),
         "message": "Some content in the namespace has finalizers remaining: "
                    "profile-finalizer in 1 resource instances"}]}
    cluster.items("bootstrap-tokens").append(
        token_secret("abc123", stamp(now - datetime.timedelta(days=2)), now))
    outputs, _ = write_outputs(tmp_path, cluster, authority, served.url)

    table = run_doctor("--outputs", str(outputs))
    assert table.returncode == 1, table.stdout + table.stderr
    rows = [line for line in table.stdout.splitlines() if line.startswith(("PROBLEM", "WARNING"))]
    assert [row.split()[:4] for row in rows] == [
        ["PROBLEM", "gpu-allocatable", "node", "madrid"],
        ["PROBLEM", "gpu-device-plugin", "pod", "kube-system/nvidia-device-plugin-9lmzp"],
        ["PROBLEM", "mysql", "pod", "kubeflow/katib-mysql-7c5b9d8f6-x2r4m"],
        ["PROBLEM", "namespace-terminating", "namespace", "kubeflow"],
        ["WARNING", "join-tokens", "secret", "kube-system/bootstrap-token-abc123"]]
    assert "fix: " in table.stdout

    report = json.loads(run_doctor("--outputs", str(outputs), "--json").stdout)
    assert report["exitCode"] == 1 and report["counts"]["problem"] == 4
    nvml = next(f for f in report["findings"] if f["check"] == "gpu-device-plugin")
    assert nvml["message"] == "on node madrid: Failed to initialize NVML: ERROR_DRIVER_NOT_LOADED"
    assert nvml["subject"] == "pod kube-system/nvidia-device-plugin-9lmzp" and nvml["fix"]


def test_refused_list_is_could_not_check(served, cluster, authority, tmp_path):
    del cluster.lists["bootstrap-tokens"]
    outputs, _ = write_outputs(tmp_path, cluster, authority, served.url)
    done = run_doctor("--outputs", str(outputs), "--json")
    assert done.returncode == 2
    [finding] = [f for f in json.loads(done.stdout)["findings"]
                 if f["verdict"] == "could-not-check"]
    assert finding["check"] == "join-tokens" and "HTTP 403" in finding["message"]


def test_api_unreachable(cluster, authority, tmp_path):
    with ApiServer(authority, cluster.lists, cluster.logs) as server:
        url = server.url
    outputs, _ = write_outputs(tmp_path, cluster, authority, url)
    done = run_doctor("--outputs", str(outputs))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(f"error: the cluster's API: cannot reach {url}")
    # A machine reading --json still gets the report: why nothing could be checked.
    as_json = run_doctor("--outputs", str(outputs), "--json")
    assert as_json.returncode == 2 and as_json.stderr == done.stderr
    document = json.loads(as_json.stdout)
    assert (document["exitCode"], document["server"]) == (2, url)
    assert document["source"] == f"outputs file '{outputs}'"
    assert document["counts"] == {"problem": 0, "could-not-check": 1, "warning": 0, "ok": 0}
    [finding] = document["findings"]
    assert (finding["check"], finding["verdict"], finding["subject"]) == (
        "doctor", "could-not-check", "cluster")
    assert finding["message"].startswith(f"the cluster's API: cannot reach {url}")


def test_client_certificate_of_another_cluster_is_refused(served, cluster, authority, tmp_path):
    other = Authority.create("other-ca")
    outputs, _ = write_outputs(tmp_path, cluster, authority, served.url,
                               client=other.client(days=300))
    done = run_doctor("--outputs", str(outputs))
    assert done.returncode == 2
    assert "error: the cluster's API: " in done.stderr and "Traceback" not in done.stderr


def test_outputs_unreadable(tmp_path):
    missing = run_doctor("--outputs", str(tmp_path / "nothing.json"))
    assert (missing.returncode, missing.stderr) == (
        2, f"error: outputs file '{tmp_path / 'nothing.json'}' does not exist\n")
    (tmp_path / "redacted.json").write_text(json.dumps({"kubeconfig": "[secret]", "nodes": []}))
    redacted = run_doctor("--outputs", str(tmp_path / "redacted.json"))
    assert redacted.returncode == 2 and "--show-secrets" in redacted.stderr
    neither = run_doctor()
    assert neither.returncode == 2 and "name a STACK or give --outputs" in neither.stderr
    as_json = run_doctor("--outputs", str(tmp_path / "nothing.json"), "--json")
    assert (as_json.returncode, as_json.stderr) == (missing.returncode, missing.stderr)
    document = json.loads(as_json.stdout)
    assert (document["exitCode"], document["server"]) == (2, "")
    assert [(f["verdict"], f["subject"], f["message"]) for f in document["findings"]] == [
        ("could-not-check", "stack outputs",
         f"outputs file '{tmp_path / 'nothing.json'}' does not exist")]


def test_host_outputs_collected_over_ssh(served, cluster, authority, tmp_path, fake_ssh):
    outputs, _ = write_outputs(tmp_path, cluster, authority, served.url)
    record = tmp_path / "recorded"
    done = run_doctor("--outputs", str(outputs), "--json", "--ssh", "--ssh-user", "ubuntu",
                      "--host-outputs", str(record))
    report = json.loads(done.stdout)
    host = [f for f in report["findings"] if f["check"].startswith("host-")]
    # moscow collected and healthy; the others not reached, said per host and check.
    assert {(f["subject"], f["verdict"]) for f in host} == {
        ("host moscow", "ok"), *(((f"host {name}", "could-not-check")
                                  for name in ("controller", "madrid", "campos")))}
    unreached = next(f for f in host if f["subject"] == "host madrid")
    assert unreached["message"] == ("ssh ubuntu@192.168.2.3 failed: ssh: connect to host "
                                    "192.168.2.3 port 22: Connection timed out")
    assert done.returncode == 2
    calls = (tmp_path / "ssh.log").read_text().splitlines()
    assert all(call.startswith("-o BatchMode=yes -o ConnectTimeout=10") for call in calls)
    assert len([c for c in calls if "ubuntu@192.168.2.2" in c]) == 6
    # What was collected is recorded for a later run with --host-outputs alone.
    for file in ("ip-addr.json", "ip-route.json", "nvidia-smi.csv"):
        assert (record / "moscow" / file).read_text() == \
            (FIXTURES / "hosts" / "moscow" / file).read_text()
    again = run_doctor("--outputs", str(outputs), "--host-outputs", str(record))
    assert again.returncode == 0, again.stdout
