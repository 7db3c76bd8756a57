"""Sandbox backends behind one contract (base.py): `local` (bubblewrap, default), `podman`,
`kubernetes` (sandbox/kubernetes/). Import a backend from its module; this package imports only
the contract so that `import openforgerl.sandbox` stays cheap.
"""

from openforgerl.sandbox.base import (
    WORKDIR,
    CommandNotFoundError,
    ExecResult,
    Limits,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxSpec,
    TamperError,
    VerifierRun,
)

__all__ = [
    "WORKDIR",
    "CommandNotFoundError",
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "SandboxSpec",
    "TamperError",
    "VerifierRun",
]
