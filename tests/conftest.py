"""Suite-wide settings: hypothesis without wall-clock health checks (the CI box is 2 shared cores)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "openforgerl",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("openforgerl")
