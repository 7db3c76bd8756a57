"""Checks a rendered manifest the way an API server would, without one.

`kubernetes-validate --strict` (JSON schema per Kubernetes version) catches wrong types and unknown
fields but not the server's own semantics, so `semantic_problems` adds those: DNS-1123 names, label
syntax (≤ 63), parseable quantities with requests ≤ limits, and the enum fields we set. The backend
runs the semantic checks on every Pod it renders (cheap, pure); the schema check needs the optional
`kubernetes-validate` package and runs in tests and `check_manifest(..., versions=...)`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from lightkube.utils.quantity import parse_quantity

SCHEMA_VERSIONS = ("1.30", "1.37")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
ENUMS = {
    "restartPolicy": {"Always", "OnFailure", "Never"},
    "imagePullPolicy": {"Always", "IfNotPresent", "Never"},
    "operator": {"Exists", "Equal"},
    "effect": {"NoSchedule", "PreferNoSchedule", "NoExecute"},
    "protocol": {"TCP", "UDP", "SCTP"},
    "type": {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"},
    "medium": {"", "Memory", "HugePages"},
}


class ManifestInvalid(ValueError):
    """A rendered manifest would be rejected by the API server (a template bug, not infra)."""


def is_dns_label(name: str) -> bool:
    return len(name) <= 63 and bool(DNS1123_LABEL.match(name))


def is_dns_subdomain(name: str) -> bool:
    return len(name) <= 253 and bool(DNS1123_SUBDOMAIN.match(name))


def label_key_problems(key: str) -> list[str]:
    prefix, _, name = key.rpartition("/")
    out = []
    if prefix and not is_dns_subdomain(prefix):
        out.append(f"label key prefix {prefix!r} is not a DNS-1123 subdomain")
    if len(name) > 63 or not QUALIFIED_NAME.match(name):
        out.append(f"label key name {name!r} is not a qualified name (≤ 63)")
    return out


def label_problems(labels: dict[str, str], *, values: bool = True) -> list[str]:
    out: list[str] = []
    for key, value in labels.items():
        out += label_key_problems(key)
        if values and (len(value) > 63 or not LABEL_VALUE.match(value)):
            out.append(f"label value {value!r} for {key!r} is invalid (≤ 63, alphanumeric ends)")
    return out


def metadata_problems(meta: dict[str, Any], *, name_is_label: bool) -> list[str]:
    name = meta.get("name", "")
    ok = is_dns_label(name) if name_is_label else is_dns_subdomain(name)
    out = (
        []
        if ok
        else [f"metadata.name {name!r} is not a DNS-1123 {'label' if name_is_label else 'subdomain'}"]
    )
    ns = meta.get("namespace")
    if ns is not None and not is_dns_label(ns):
        out.append(f"metadata.namespace {ns!r} is not a DNS-1123 label")
    out += label_problems(meta.get("labels", {}))
    return out + label_problems(meta.get("annotations", {}), values=False)


def parse_or_none(value: Any) -> Decimal | None:
    try:
        return parse_quantity(str(value))
    except (ValueError, ArithmeticError):
        return None


def quantity_problems(resources: dict[str, Any]) -> list[str]:
    out: list[str] = []
    parsed: dict[str, dict[str, Decimal | None]] = {}
    for kind in ("limits", "requests"):
        parsed[kind] = {k: parse_or_none(v) for k, v in resources.get(kind, {}).items()}
        out += [
            f"resources.{kind}.{k} {resources[kind][k]!r} is not a quantity"
            for k, v in parsed[kind].items()
            if v is None
        ]
    for key, req in parsed["requests"].items():
        lim = parsed["limits"].get(key)
        if req is not None and lim is not None and req > lim:
            out.append(f"resources.requests.{key} exceeds its limit")
    return out


def enum_problems(obj: Any, path: str = "") -> Iterator[str]:
    """Every string field named like one of ENUMS must hold an allowed value (walks the tree)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ENUMS and isinstance(value, str) and value not in ENUMS[key]:
                yield f"{path}{key} {value!r} not in {sorted(ENUMS[key])}"
            yield from enum_problems(value, f"{path}{key}.")
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from enum_problems(item, f"{path}{i}.")


def container_problems(ctr: dict[str, Any], volumes: set[str]) -> list[str]:
    out = [] if is_dns_label(ctr.get("name", "")) else [f"container name {ctr.get('name')!r} invalid"]
    out += quantity_problems(ctr.get("resources", {}))
    out += [f"env name {e['name']!r} invalid" for e in ctr.get("env", []) if not ENV_NAME.match(e["name"])]
    out += [
        f"volumeMount {m['name']!r} has no volume"
        for m in ctr.get("volumeMounts", [])
        if m["name"] not in volumes
    ]
    for port in ctr.get("ports", []):
        if not 0 < int(port.get("containerPort", 0)) < 65536:
            out.append(f"containerPort {port.get('containerPort')!r} out of range")
    return out


def pod_spec_problems(spec: dict[str, Any]) -> list[str]:
    volumes = {v["name"] for v in spec.get("volumes", [])}
    out = [f"volume name {v!r} invalid" for v in volumes if not is_dns_label(v)]
    for ctr in spec.get("containers", []) + spec.get("initContainers", []):
        out += container_problems(ctr, volumes)
    for vol in spec.get("volumes", []):
        limit = vol.get("emptyDir", {}).get("sizeLimit")
        if limit is not None and parse_or_none(limit) is None:
            out.append(f"volume {vol['name']!r} sizeLimit {limit!r} is not a quantity")
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not isinstance(deadline, int) or deadline <= 0):
        out.append(f"activeDeadlineSeconds {deadline!r} must be a positive integer")
    return out + label_problems(spec.get("nodeSelector", {}))


def service_problems(spec: dict[str, Any]) -> list[str]:
    out = label_problems(spec.get("selector", {}))
    for port in spec.get("ports", []):
        if not 0 < int(port.get("port", 0)) < 65536:
            out.append(f"service port {port.get('port')!r} out of range")
    return out


def semantic_problems(obj: dict[str, Any]) -> list[str]:
    """API-server-side semantics that the JSON schema cannot express."""
    kind = obj.get("kind")
    out = metadata_problems(obj.get("metadata", {}), name_is_label=kind in ("Pod", "Service"))
    out += list(enum_problems(obj.get("spec", {}), "spec."))
    spec = obj.get("spec", {})
    if kind == "Pod":
        out += pod_spec_problems(spec)
    elif kind == "Deployment":
        out += pod_spec_problems(spec.get("template", {}).get("spec", {}))
        out += label_problems(spec.get("template", {}).get("metadata", {}).get("labels", {}))
    elif kind == "Service":
        out += service_problems(spec)
    return out


def schema_problems(obj: dict[str, Any], versions: Iterable[str] = SCHEMA_VERSIONS) -> list[str]:
    """Strict JSON-schema validation per Kubernetes version (needs `kubernetes-validate`)."""
    # optional (dev) dependency, 100+ MB of schemas; it ships no type hints
    import kubernetes_validate  # type: ignore[import-untyped]

    out = []
    for version in versions:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            out.append(f"k8s {version}: {e.message} at {'.'.join(map(str, e.path))}")
    return out


def check_manifest(obj: dict[str, Any], versions: Sequence[str] = ()) -> None:
    """Raise `ManifestInvalid` listing every problem; schema checks only for the given versions."""
    problems = semantic_problems(obj) + (schema_problems(obj, versions) if versions else [])
    if problems:
        name = obj.get("metadata", {}).get("name")
        raise ManifestInvalid(f"{obj.get('kind')} {name!r}: " + "; ".join(problems))
