"""deploy/kubernetes/sail-cluster.yaml rendered as its header says (envsubst): valid YAML, every
document valid against the Kubernetes OpenAPI schemas (kubernetes-validate, offline, strict: an
unknown or misspelt field fails too), Sail in kubernetes-cluster mode with the image and lake as
parameters, and the Spark Connect port (no authentication) reachable only inside the cluster."""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

import kubernetes_validate
import pytest
import yaml

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "sail-cluster.yaml"
VALUES = {"NAMESPACE": "tl-test", "SAIL_IMAGE": "example/sail:9", "TRACELAKE_IMAGE": "example/tracelake:9",
          "LAKE_ROOT": "s3://bucket/lake", "RAW_ROOT": "s3://bucket/raw", "SOURCE": "itp"}
# the oldest Kubernetes minor a supported cloud still runs, and the newest the package has schemas of
VERSIONS = ("1.30.0", "1.37.0")


def _documents() -> list[dict]:
    return list(yaml.safe_load_all(Template(MANIFEST.read_text()).substitute(VALUES)))


def _errors(documents: list[dict], version: str) -> list[str]:
    errors = []
    for doc in documents:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            errors.append(f"{doc['kind']}/{doc['metadata']['name']}: {path}: {exc.message}")
    return errors


@pytest.mark.parametrize("version", VERSIONS)
def test_every_document_is_valid_against_the_kubernetes_schema(version):
    assert _errors(_documents(), version) == []


def test_the_schema_check_catches_a_misspelt_field():
    documents = _documents()
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    pod["serviceAcountName"] = pod.pop("serviceAccountName")
    [error] = _errors(documents, VERSIONS[-1])
    assert error.startswith("Deployment/sail-spark-server: spec.template.spec: ") and "serviceAcountName" in error


def test_every_placeholder_is_a_parameter_and_the_documents_parse():
    text = MANIFEST.read_text()
    assert set(re.findall(r"\$\{(\w+)\}", text)) == set(VALUES)
    docs = _documents()
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
