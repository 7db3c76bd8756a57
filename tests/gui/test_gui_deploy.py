"""deploy/gui: the Pod manifests pass strict schema validation and our semantic checks, and each names
the image its Containerfile builds and the registry's environment kind advertises."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from openforgerl.env.screens import get_environment
from openforgerl.sandbox.kubernetes.validation import schema_problems, semantic_problems

DEPLOY = Path(__file__).resolve().parents[2] / "deploy/gui"
KINDS = ("browser", "desktop")


def _pod(kind: str) -> dict:
    return yaml.safe_load((DEPLOY / f"pod-{kind}.yaml").read_text())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("version", ("1.30", "1.37"))
def test_pod_passes_strict_schema(kind, version):
    pytest.importorskip("kubernetes_validate")
    assert schema_problems(_pod(kind), [version]) == []


@pytest.mark.parametrize("kind", KINDS)
def test_pod_semantics_and_image(kind):
    pod = _pod(kind)
    assert semantic_problems(pod) == []
    image = pod["spec"]["containers"][0]["image"]
    assert image == get_environment(kind).needs.image
    assert f"-t openforgerl-gui-{kind}" in (DEPLOY / f"Containerfile.{kind}").read_text()
    mounts = {m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert {"/workdir", "/tmp", "/dev/shm"} <= mounts
