"""Trajectory reconstruction: a rollout's CallRecords -> training Samples (pure, no I/O)."""

from openforgerl.trajectory.breaks import BreakCause, BreakEvent, ExcludeCause
from openforgerl.trajectory.metrics import HarnessMetrics, RolloutMetrics, aggregate_by_harness
from openforgerl.trajectory.options import OverflowPolicy, ReconstructionOptions
from openforgerl.trajectory.reconstruct import ReconstructionResult, reconstruct_samples
from openforgerl.trajectory.trainable import TRAINABLE_STATUSES, infra_reason, trainable, untrainable_reason

__all__ = [
    "TRAINABLE_STATUSES",
    "BreakCause",
    "BreakEvent",
    "ExcludeCause",
    "HarnessMetrics",
    "OverflowPolicy",
    "ReconstructionOptions",
    "ReconstructionResult",
    "RolloutMetrics",
    "aggregate_by_harness",
    "infra_reason",
    "reconstruct_samples",
    "trainable",
    "untrainable_reason",
]
