"""`dagster dev -w workspace.yaml` on loopback, asked through its GraphQL API for the asset
graph, the checks, sensors and schedules; and a `dagster asset materialize` of one asset and
one month, launched from the command line, seen by the same instance the UI serves."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest

from tests.support.dagster_home import new_dagster_home

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
READY_SECONDS = 60

GRAPH = """{
  assetNodes { assetKey { path } groupName description owners { ... on TeamAssetOwner { team } }
               assetChecksOrError { ... on AssetChecks { checks { name blocking } } } }
  repositoriesOrError { ... on RepositoryConnection { nodes {
    sensors { name minIntervalSeconds } schedules { name cronSchedule } } } }
}"""
BILLING_JULY = """{
  assetOrError(assetKey: {path: ["billing_facts"]}) { ... on Asset {
    assetMaterializations(partitions: ["2026-07-01"], limit: 1) { partition runId
      metadataEntries { label ... on IntMetadataEntry { intValue }
                              ... on FloatMetadataEntry { floatValue } } } } }
  assetCheckExecutions(assetKey: {path: ["billing_facts"]}, checkName: "billing_complete",
                       limit: 5) { runId status partition }
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = json.loads(response.read())
    assert "errors" not in body, body["errors"]
    return body["data"]


@pytest.fixture
def instance_env(tmp_path) -> dict:
    from cost_pipeline.demo.generate import generate_demo

    home = new_dagster_home(tmp_path / "dagster_home")
    # create the instance's SQLite storages once: the two processes started below would
    # otherwise race to create the same tables
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.get_runs(limit=1)
    config = generate_demo(tmp_path / "demo")
    return {**os.environ, "DAGSTER_HOME": str(home), "COST_PIPELINE_CONFIG": str(config),
            "DAGSTER_DISABLE_TELEMETRY": "1", "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def test_dagster_dev_serves_the_graph_and_sees_a_cli_materialization(instance_env, tmp_path):
    port = free_port()
    started = time.monotonic()
    # its own session: `dagster dev` ignores SIGTERM in the background, so the whole
    # process group (webserver, daemon, code server) is killed at the end
    server = subprocess.Popen(
        ["dagster", "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env=instance_env, start_new_session=True,
        stdout=open(tmp_path / "dev.log", "w"), stderr=subprocess.STDOUT)
    try:
        # meanwhile, one asset of one month from the command line, into the same instance
        materialize = subprocess.run(
            ["dagster", "asset", "materialize", "-m", "cost_pipeline.definitions",
             "--select", "billing_facts", "--partition", "2026-07-01"],
            cwd=ROOT, env=instance_env, capture_output=True, text=True, timeout=120)
        assert materialize.returncode == 0, materialize.stderr[-2000:]

        graph = None
        while time.monotonic() - started < READY_SECONDS:
            assert server.poll() is None, (tmp_path / "dev.log").read_text()[-3000:]
            try:
                graph = graphql(port, GRAPH)
                if graph["assetNodes"]:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert graph and graph["assetNodes"], f"not ready in {READY_SECONDS} s"
        ready = time.monotonic() - started

        nodes = {"/".join(n["assetKey"]["path"]): n for n in graph["assetNodes"]}
        assert {"billing_facts", "tracker_runs", "checkpoint_inventory", "attribution",
                "reconciliation", "retention_violations"} <= set(nodes)
        assert nodes["billing_facts"]["groupName"] == "billing"
        assert nodes["tracker_runs"]["groupName"] == "tracker"
        assert nodes["reconciliation"]["groupName"] == "attribution"
        assert nodes["retention_violations"]["groupName"] == "decisions"
        assert all(n["description"] and n["owners"] for n in nodes.values())
        checks = {(key, c["name"]): c["blocking"] for key, n in nodes.items()
                  for c in n["assetChecksOrError"]["checks"]}
        assert {("billing_facts", "billing_complete"), ("attribution", "cost_conserved"),
                ("reconciliation", "reconciliation_within_threshold"),
                ("reconciliation", "tracker_claims_billed"),
                ("retention_violations", "retention_within_budget")} <= set(checks)
        assert not any(checks.values())  # no check blocks downstream assets
        [repo] = graph["repositoriesOrError"]["nodes"]
        sensors = {s["name"]: s["minIntervalSeconds"] for s in repo["sensors"]}
        assert sensors["check_failure_alerts"] <= 60
        assert sensors["scheduled_run_failure_alerts"] <= 60
        schedules = {s["name"]: s["cronSchedule"] for s in repo["schedules"]}
        assert schedules == {"monthly_close": "0 6 3 * *", "daily_refresh": "0 5 * * *"}

        july = graphql(port, BILLING_JULY)
        [event] = july["assetOrError"]["assetMaterializations"]
        assert event["partition"] == "2026-07-01"
        figures = {e["label"]: e.get("intValue", e.get("floatValue"))
                   for e in event["metadataEntries"]}
        assert figures["rows"] > 0 and figures["total_effective_cost"] > 0
        # the SQLite instance lists the planned row beside the evaluated one
        executions = july["assetCheckExecutions"]
        assert {c["runId"] for c in executions} == {event["runId"]}
        assert "SUCCEEDED" in {c["status"] for c in executions}, executions
        print(f"dagster dev ready in {ready:.1f} s")
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
