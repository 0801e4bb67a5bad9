"""The Dockerfile, its entrypoint, the manifests and the docs say the same thing: the
`podman build`/`podman run` commands in README.md, docs/serving.md and the Dockerfile's header
build the tag the manifests run, publish the ports the image EXPOSEs, and mount the model where
MODEL_BASE_PATH/MODEL_NAME puts it; the image follows tensorflow/serving's conventions."""
import glob
import os
import re
import shlex

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = ["README.md", os.path.join("docs", "serving.md")]


def _read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as handle:
        return handle.read()


def _dockerfile_stages():
    """[(FROM line, [(INSTRUCTION, arguments)])] with continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", _read("Dockerfile"))
    stages, preamble = [], []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, arguments = line.partition(" ")
        if instruction == "FROM":
            stages.append((arguments, []))
        (stages[-1][1] if stages else preamble).append((instruction, arguments.strip()))
    return preamble, stages


def _shell_commands(text, program):
    """`program ...` command lines of the fenced code blocks (and `#   ` comment lines) of text,
    continuations joined, split like the shell does."""
    text = re.sub(r"\\\n[#\s]*", " ", text)
    found = []
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line.startswith(program + " "):
            found.append(shlex.split(line.replace("[extra server flags]", "")))
    return found


def _final_stage():
    _, stages = _dockerfile_stages()
    return stages[-1][1]


def _env():
    env = {}
    for instruction, arguments in _final_stage():
        if instruction == "ENV":
            env.update(dict(item.split("=", 1) for item in shlex.split(arguments)))
    return env


def _exposed():
    return {int(p) for i, a in _final_stage() if i == "EXPOSE" for p in a.split()}


def test_image_follows_tensorflow_serving_conventions():
    preamble, stages = _dockerfile_stages()
    assert ("ARG", "BASE_IMAGE=python:3.11-slim") in preamble
    assert [base.split()[0] for base, _ in stages] == ["${BASE_IMAGE}", "${BASE_IMAGE}"]
    final = _final_stage()
    env = _env()
    assert (env["MODEL_NAME"], env["MODEL_BASE_PATH"]) == ("model", "/models")
    assert _exposed() == {8500, 8501}
    assert ("ENTRYPOINT", '["/usr/bin/tf_serving_entrypoint.sh"]') in final
    assert ("COPY", "deploy/docker/entrypoint.sh /usr/bin/tf_serving_entrypoint.sh") in final
    (user,) = [a for i, a in final if i == "USER"]
    assert not user.startswith(("0", "root"))
    # No compiler in the runtime stage: only the build stage installs one.
    assert not any("g++" in a or "gcc" in a for i, a in final if i == "RUN")
    assert any("g++" in a for i, a in stages[0][1] if i == "RUN")
    # The entrypoint's defaults are the image's.
    entrypoint = _read(os.path.join("deploy", "docker", "entrypoint.sh"))
    assert 'MODEL_NAME="${MODEL_NAME:-model}"' in entrypoint
    assert 'MODEL_BASE_PATH="${MODEL_BASE_PATH:-/models}"' in entrypoint


def _build_tag(command):
    assert command[:2] == ["podman", "build"] and command[-1] == ".", command
    return command[command.index("-t") + 1]


def test_documented_build_and_run_commands_match_the_image():
    dockerfile_builds = _shell_commands(_read("Dockerfile"), "podman build")
    (tag,) = {_build_tag(c) for c in dockerfile_builds}
    runs = _shell_commands(_read("Dockerfile"), "podman run")
    for doc in DOCS:
        builds = _shell_commands(_read(doc), "podman build")
        assert builds, f"{doc} has no podman build command"
        assert {_build_tag(c) for c in builds} == {tag}, doc
        doc_runs = _shell_commands(_read(doc), "podman run")
        assert doc_runs, f"{doc} has no podman run command"
        runs += doc_runs
    env = _env()
    for run in runs:
        options = run[2:run.index(tag)]
        published = {int(options[i + 1].split(":")[1]) for i, o in enumerate(options) if o == "-p"}
        assert published == _exposed(), run
        names = [options[i + 1].split("=", 1)[1] for i, o in enumerate(options)
                 if o == "-e" and options[i + 1].startswith("MODEL_NAME=")]
        name = names[-1] if names else env["MODEL_NAME"]
        mounts = [options[i + 1].split(":")[1] for i, o in enumerate(options) if o == "-v"]
        assert f"{env['MODEL_BASE_PATH']}/{name}" in mounts, run


def test_manifests_run_the_documented_image():
    (tag,) = {_build_tag(c) for c in _shell_commands(_read("Dockerfile"), "podman build")}
    images = set()
    for path in glob.glob(os.path.join(REPO, "deploy", "kubernetes", "**", "*.yaml"), recursive=True):
        with open(path, encoding="utf-8") as handle:
            for doc in filter(None, yaml.safe_load_all(handle)):
                spec = doc["spec"].get("template", {}).get("spec", doc["spec"])
                images |= {c["image"] for c in spec.get("containers", [])}
    assert images == {f"{tag}:latest"}
