"""deploy/kubernetes/: every Kubernetes object validates (strict: unknown fields fail) against
the Kubernetes JSON schemas bundled with `kubernetes-validate`, for the oldest version the
manifests claim (gRPC probes are GA from 1.27) and the newest bundled one; the objects agree
with each other and with the server (flags parse with the server's own parser, probe paths name
the served model, the grace period covers preStop + drain).

The KServe objects are custom resources whose CRD schema ships with KServe's cluster install,
not with any PyPI package: for them this checks the fields KServe's CRDs require, the runtime
and service agreeing with each other, and the runtime's containers against the Kubernetes
Container schema (KServe's `containers` are core/v1 Containers). It is not a full CRD
validation."""
import copy
import glob
import os
import re

import kubernetes_validate
import pytest
import yaml

from serving.model_server.flags import parse_flags

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFESTS = os.path.join(REPO, "deploy", "kubernetes")
KUBERNETES_VERSIONS = ["1.27.0", kubernetes_validate.utils.latest_version()]
SERVER_DRAIN_S = 5          # the server's shutdown bound after SIGTERM (docs/serving.md)
ENTRYPOINT_FLAGS = ["--port=8500", "--rest_api_port=8501"]   # deploy/docker/entrypoint.sh


def _objects(pattern):
    found = []
    for path in sorted(glob.glob(os.path.join(MANIFESTS, pattern))):
        with open(path, encoding="utf-8") as handle:
            found += [(os.path.relpath(path, REPO), doc) for doc in yaml.safe_load_all(handle) if doc]
    return found


KUBERNETES_OBJECTS = _objects("*.yaml")
KSERVE_OBJECTS = _objects("kserve/*.yaml")


def _one(objects, kind):
    (found,) = [doc for _, doc in objects if doc["kind"] == kind]
    return found


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("path,doc", KUBERNETES_OBJECTS, ids=[p for p, _ in KUBERNETES_OBJECTS])
def test_validates_against_the_kubernetes_schema(path, doc, version):
    kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_rejects_a_misspelt_field():
    bad = copy.deepcopy(_one(KUBERNETES_OBJECTS, "Deployment"))
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grcp"] = {"port": 8500}
    with pytest.raises(kubernetes_validate.ValidationError, match="grcp"):
        kubernetes_validate.validate(bad, KUBERNETES_VERSIONS[-1], strict=True)


def test_every_kind_is_there():
    kinds = sorted(doc["kind"] for _, doc in KUBERNETES_OBJECTS)
    assert kinds == ["Deployment", "HorizontalPodAutoscaler", "Service"]
    assert _one(KUBERNETES_OBJECTS, "HorizontalPodAutoscaler")["apiVersion"] == "autoscaling/v2"


def test_deployment_fits_the_server():
    deployment = _one(KUBERNETES_OBJECTS, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    # The image's entrypoint builds these flags, then appends the container's args.
    options = parse_flags(ENTRYPOINT_FLAGS + [
        f"--model_name={env['MODEL_NAME']}",
        f"--model_base_path={env['MODEL_BASE_PATH']}/{env['MODEL_NAME']}"] + container["args"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": options.port, "http": options.rest_api_port}
    assert {p["containerPort"] for p in container["ports"]} == {8500, 8501}

    probes = [container[k] for k in ("startupProbe", "readinessProbe", "livenessProbe")]
    for probe in probes:
        if "grpc" in probe:
            assert probe["grpc"]["port"] == options.port
            assert options.enable_grpc_healthcheck_service, "grpc probe without the health service"
        else:
            assert probe["httpGet"] == {"path": f"/v1/models/{options.model_name}", "port": "http"}
    assert "grpc" in container["readinessProbe"], "readiness must follow health (NOT_SERVING at SIGTERM)"

    (sleep,) = [int(a) for a in container["lifecycle"]["preStop"]["exec"]["command"][1:]]
    assert pod["terminationGracePeriodSeconds"] >= sleep + SERVER_DRAIN_S + 5
    assert pod["terminationGracePeriodSeconds"] <= 30     # Kubernetes' default; no needless wait
    for key in ("requests", "limits"):
        assert set(container["resources"][key]) == {"cpu", "memory"}
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] != 0
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert env["MODEL_BASE_PATH"] in mounts


def test_service_and_autoscaler_point_at_the_deployment():
    deployment = _one(KUBERNETES_OBJECTS, "Deployment")
    service = _one(KUBERNETES_OBJECTS, "Service")
    hpa = _one(KUBERNETES_OBJECTS, "HorizontalPodAutoscaler")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert {p["port"]: named[p["targetPort"]] for p in service["spec"]["ports"]} == {
        8500: 8500, 8501: 8501}
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert hpa["spec"]["minReplicas"] >= 2 and hpa["spec"]["maxReplicas"] > hpa["spec"]["minReplicas"]


def test_kserve_objects_have_the_fields_kserve_requires_and_agree():
    runtime = _one(KSERVE_OBJECTS, "ServingRuntime")
    services = [doc for _, doc in KSERVE_OBJECTS if doc["kind"] == "InferenceService"]
    assert runtime["apiVersion"] == "serving.kserve.io/v1alpha1" and runtime["metadata"]["name"]
    assert runtime["spec"]["containers"] and all(f["name"] for f in runtime["spec"]["supportedModelFormats"])
    assert set(runtime["spec"]["protocolVersions"]) == {"v1", "v2", "grpc-v1", "grpc-v2"}
    assert {s["spec"]["predictor"]["model"]["protocolVersion"] for s in services} == {"v1", "v2"}

    formats = {(f["name"], f.get("version")) for f in runtime["spec"]["supportedModelFormats"]}
    for service in services:
        assert service["apiVersion"] == "serving.kserve.io/v1beta1" and service["metadata"]["name"]
        model = service["spec"]["predictor"]["model"]
        assert model["runtime"] == runtime["metadata"]["name"]
        assert (model["modelFormat"]["name"], model["modelFormat"].get("version")) in formats
        assert model["protocolVersion"] in runtime["spec"]["protocolVersions"]
        assert re.match(r"^[a-z]+://", model["storageUri"])

    # The runtime's containers are core/v1 Containers: validate them in a Pod.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kserve-runtime"},
           "spec": {"containers": copy.deepcopy(runtime["spec"]["containers"])}}
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(pod, version, strict=True)
    (container,) = runtime["spec"]["containers"]
    assert container["name"] == "kserve-container"    # the name KServe looks for
    name = services[0]["metadata"]["name"]
    flags = [a.replace("{{.Name}}", name) for a in container["args"]]
    options = parse_flags(flags)
    assert options.model_base_path == "/mnt/models"   # where KServe mounts storageUri
    assert options.model_name == name
    assert {p["containerPort"] for p in container["ports"]} == {options.port, options.rest_api_port}
    assert container["command"] == ["/usr/local/bin/tensorflow_model_server"]
