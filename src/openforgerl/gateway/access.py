"""How a holder of the admin credential reaches a gateway: admin URL, admin token, model URL.

The gateway serves two listeners. The model listener (`/r/<rollout>/...`)
is the only one a sandbox's forwarder or a Kubernetes sandbox Pod can reach; the admin listener
(`/rollouts...`, `/admin/...`, `/metrics`) is on its own port and also requires
`Authorization: Bearer <admin token>`. This module has no heavy imports, so the orchestrator,
trainer, eval and CLI can hold a `GatewayAccess` without importing the server.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ADMIN_TOKEN_ENV", "GatewayAccess", "read_admin_token"]

ADMIN_TOKEN_ENV = "OPENFORGERL_ADMIN_TOKEN"


@dataclass(frozen=True)
class GatewayAccess:
    """Everything an admin client needs; `model_url` None means "ask the admin plane"."""

    admin_url: str
    admin_token: str
    model_url: str | None = None

    def __repr__(self) -> str:  # never print the token into logs
        return f"GatewayAccess(admin_url={self.admin_url!r}, model_url={self.model_url!r})"

    @classmethod
    def from_env(
        cls, admin_url: str, *, token: str | None = None, token_file: Path | None = None
    ) -> GatewayAccess:
        """Access to an already running gateway: the token given, else read from `token_file`,
        else from `$OPENFORGERL_ADMIN_TOKEN`."""
        found = token or read_admin_token(token_file)
        if not found:
            raise ValueError(
                f"no admin token for {admin_url}: pass one, a token file or set ${ADMIN_TOKEN_ENV}"
            )
        return cls(admin_url.rstrip("/"), found)


def read_admin_token(token_file: Path | None = None) -> str | None:
    """The admin token from a file (first line) or the environment, or None."""
    if token_file is not None:
        return token_file.read_text().strip() or None
    return os.environ.get(ADMIN_TOKEN_ENV) or None
