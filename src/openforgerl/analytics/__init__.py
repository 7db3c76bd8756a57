"""Behaviour analytics over recorded runs: tool events, per-rollout metrics, `openforgerl analyze`."""

from openforgerl.analytics.effects import Effect
from openforgerl.analytics.events import ToolEvent, audit_events, call_events, rollout_events
from openforgerl.analytics.metrics import GoldAction, RolloutBehaviour, RolloutFacts, behaviour

__all__ = [
    "Effect",
    "GoldAction",
    "RolloutBehaviour",
    "RolloutFacts",
    "ToolEvent",
    "audit_events",
    "behaviour",
    "call_events",
    "rollout_events",
]
