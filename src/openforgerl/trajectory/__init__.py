"""Trajectory reconstruction: a rollout's CallRecords -> training Samples (pure, no I/O)."""

from openforgerl.trajectory.breaks import BreakCause, BreakEvent, ExcludeCause
from openforgerl.trajectory.metrics import HarnessMetrics, RolloutMetrics, aggregate_by_harness
from openforgerl.trajectory.options import OverflowPolicy, ReconstructionOptions
from openforgerl.trajectory.reconstruct import ReconstructionResult, drop_reason, reconstruct_samples

__all__ = [
    "BreakCause",
    "BreakEvent",
    "ExcludeCause",
    "HarnessMetrics",
    "OverflowPolicy",
    "ReconstructionOptions",
    "ReconstructionResult",
    "RolloutMetrics",
    "aggregate_by_harness",
    "drop_reason",
    "reconstruct_samples",
]
