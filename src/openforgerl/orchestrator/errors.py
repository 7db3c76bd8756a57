"""Rollout faults, named after the boundary they crossed, and the `boundary` that re-types them.

Every step of a rollout runs inside `boundary(<Fault>)`: whatever escapes it (except cancellation
and faults already typed) becomes that fault, so the outcome is decided once, by type, where the
error crossed into the orchestrator — never by matching strings later. Each fault carries the
`RolloutStatus` it stands for; all of them are infrastructure faults (dropped, retried, never
trained as reward 0). Agent failures and timeouts are not exceptions: they are data.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import ClassVar

from openforgerl.records import RolloutStatus

__all__ = [
    "EngineFault",
    "GatewayFault",
    "HarnessStartFault",
    "RolloutFault",
    "SandboxFault",
    "VerifierFault",
    "boundary",
]


class RolloutFault(Exception):
    """An infrastructure fault that ends a rollout; `status` is how it is recorded."""

    status: ClassVar[RolloutStatus]


class SandboxFault(RolloutFault):
    status = RolloutStatus.INFRA_SANDBOX


class EngineFault(RolloutFault):
    status = RolloutStatus.INFRA_ENGINE


class GatewayFault(RolloutFault):
    status = RolloutStatus.INFRA_GATEWAY


class VerifierFault(RolloutFault):
    status = RolloutStatus.INFRA_VERIFIER


class HarnessStartFault(RolloutFault):
    status = RolloutStatus.INFRA_HARNESS_START


FAULT_BY_STATUS: Mapping[RolloutStatus, type[RolloutFault]] = {
    cls.status: cls for cls in (SandboxFault, EngineFault, GatewayFault, VerifierFault, HarnessStartFault)
}


@contextmanager
def boundary(
    fault: type[RolloutFault], special: Mapping[type[BaseException], type[RolloutFault]] | None = None
) -> Iterator[None]:
    """Re-type any `Exception` escaping the block as `fault` (or per `special`, checked first)."""
    try:
        yield
    except RolloutFault:
        raise
    except Exception as exc:
        for exc_type, target in (special or {}).items():
            if isinstance(exc, exc_type):
                raise target(f"{type(exc).__name__}: {exc}") from exc
        raise fault(f"{type(exc).__name__}: {exc}") from exc
