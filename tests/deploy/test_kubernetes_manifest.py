"""deploy/kubernetes/sail-cluster.yaml rendered as its header says (envsubst): valid YAML, Sail
in kubernetes-cluster mode with the image and lake as parameters, and the Spark Connect port
(no authentication) reachable only inside the cluster."""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

import yaml

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "sail-cluster.yaml"
VALUES = {"NAMESPACE": "tl-test", "SAIL_IMAGE": "example/sail:9", "TRACELAKE_IMAGE": "example/tracelake:9",
          "LAKE_ROOT": "s3://bucket/lake", "RAW_ROOT": "s3://bucket/raw", "SOURCE": "itp"}


def test_every_placeholder_is_a_parameter_and_the_documents_parse():
    text = MANIFEST.read_text()
    assert set(re.findall(r"\$\{(\w+)\}", text)) == set(VALUES)
    docs = list(yaml.safe_load_all(Template(text).substitute(VALUES)))
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["Deployment", "Job", "Namespace", "Role", "RoleBinding", "Service", "ServiceAccount"]
    by_kind = {d["kind"]: d for d in docs}
    server = by_kind["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in server["env"]}
    assert env["SAIL_MODE"] == "kubernetes-cluster" and env["SAIL_KUBERNETES__IMAGE"] == "example/sail:9"
    assert server["image"] == "example/sail:9" and env["SAIL_KUBERNETES__NAMESPACE"] == "tl-test"
    service = by_kind["Service"]["spec"]
    assert service["type"] == "ClusterIP" and "nodePort" not in str(service)
    job = by_kind["Job"]["spec"]["template"]["spec"]["containers"][0]
    assert job["image"] == "example/tracelake:9"
    assert job["args"][:6] == ["ingest", "itp", "--raw", "s3://bucket/raw/itp", "--lake", "s3://bucket/lake"]
    # the lake and raw in a bucket; the keys from the Secret, in the engine's and the Job's environment
    for container in (server, job):
        assert {"secretRef": {"name": "lake-credentials", "optional": True}} in container["envFrom"]
    assert "sc://sail-spark-server.tl-test.svc:50051" in job["args"]
    assert not re.search(r"(?i)(aws_secret_access_key|password|token)\s*[:=]", text)  # no credential in the file
