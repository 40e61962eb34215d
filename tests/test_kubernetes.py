"""The Kubernetes base in deploy/kubernetes: every manifest is valid against the Kubernetes API's
schemas (kubernetes-validate, strict: an unknown or misspelt field fails; its schemas ship in the
wheel, so this runs offline), has the shape docs/operations.md promises, and sets only settings that
exist."""

import copy
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.test_docs import documented_settings, environment_settings

BASE_DIR = Path(__file__).resolve().parent.parent
KUBERNETES = BASE_DIR / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.37.0"
MANIFESTS = sorted(path for path in KUBERNETES.glob("*.yaml") if path.name != "kustomization.yaml")


def documents(path: Path) -> list[dict]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def resources() -> dict[tuple[str, str], dict]:
    """(kind, name) -> resource, across the manifests."""
    return {
        (document["kind"], document["metadata"]["name"]): document for path in MANIFESTS for document in documents(path)
    }


def pod_spec(resource: dict) -> dict:
    return resource["spec"]["template"]["spec"]


def test_the_kustomization_lists_every_manifest_but_the_example_secret():
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {path.name for path in MANIFESTS} - {"secret.example.yaml"}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda path: path.name)
def test_each_manifest_is_valid_against_the_kubernetes_schemas(path):
    for document in documents(path):
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_validator_refuses_a_misspelt_field():
    beat = copy.deepcopy(resources()[("Deployment", "beat")])
    probe = pod_spec(beat)["containers"][0]["livenessProbe"]
    probe["exec"] = {"cmd": probe["exec"]["command"]}
    with pytest.raises(kubernetes_validate.ValidationError, match="'cmd' was unexpected"):
        kubernetes_validate.validate(beat, KUBERNETES_VERSION, strict=True)


def test_every_process_runs_the_way_the_operations_guide_says():
    found = resources()
    for name in ("web", "mcp", "worker", "beat"):
        assert ("Deployment", name) in found, name
    assert {("Service", "web"), ("Service", "mcp"), ("Job", "migrate")} <= set(found)

    beat = found[("Deployment", "beat")]
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    assert pod_spec(found[("Job", "migrate")])["containers"][0]["command"][-2:] == ["migrate", "--noinput"]

    web = pod_spec(found[("Deployment", "web")])["containers"][0]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    mcp = pod_spec(found[("Deployment", "mcp")])["containers"][0]
    assert mcp["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for name in ("worker", "beat"):
        container = pod_spec(found[("Deployment", name)])["containers"][0]
        assert container["livenessProbe"]["exec"]["command"] == ["python", "manage.py", "heartbeat_check", name]


def test_every_container_asks_for_resources_and_caps_its_memory():
    for (kind, name), resource in resources().items():
        if kind not in ("Deployment", "Job"):
            continue
        for container in pod_spec(resource)["containers"]:
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), (kind, name)
            assert "memory" in container["resources"]["limits"], (kind, name)


def test_the_manifests_set_only_settings_that_exist_and_are_documented():
    found = resources()
    names = set(found[("ConfigMap", "memory-platform-config")]["data"])
    names |= set(found[("Secret", "memory-platform-secrets")]["stringData"])
    for resource in found.values():
        if "template" in resource.get("spec", {}):
            for container in pod_spec(resource)["containers"]:
                names |= {variable["name"] for variable in container.get("env", [])}
    assert names, "no setting found in the manifests"
    assert names - environment_settings() == set(), "not read by the settings"
    assert names - documented_settings() == set(), "not in docs/configuration.md"


def test_every_pod_reads_the_config_map_and_the_secret():
    for (kind, name), resource in resources().items():
        if kind in ("Deployment", "Job"):
            sources = pod_spec(resource)["containers"][0]["envFrom"]
            assert {"configMapRef": {"name": "memory-platform-config"}} in sources, name
            assert {"secretRef": {"name": "memory-platform-secrets"}} in sources, name
