"""Align two rollouts' tool calls for the side-by-side page (pure): LCS over tool
names, arguments as tie-break."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openforgerl.analytics.events import ToolEvent

__all__ = ["AlignedRow", "align_events"]


@dataclass(frozen=True, slots=True)
class AlignedRow:
    left: ToolEvent | None
    right: ToolEvent | None

    @property
    def kind(self) -> str:
        if self.left is None or self.right is None:
            return "gap"
        return "same" if self.left.key == self.right.key else "tool"


def align_events(a: Sequence[ToolEvent], b: Sequence[ToolEvent]) -> list[AlignedRow]:
    """Rows pairing equal tools in order (an identical call scores higher than the same tool)."""
    n, m = len(a), len(b)
    score = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            match = 0
            if a[i].tool == b[j].tool:
                match = 3 if a[i].key == b[j].key else 2
            score[i][j] = max(score[i + 1][j], score[i][j + 1], score[i + 1][j + 1] + match if match else 0)
    rows, i, j = [], 0, 0
    while i < n and j < m:
        if a[i].tool == b[j].tool and score[i][j] == score[i + 1][j + 1] + (3 if a[i].key == b[j].key else 2):
            rows.append(AlignedRow(a[i], b[j]))
            i, j = i + 1, j + 1
        elif score[i + 1][j] >= score[i][j + 1]:
            rows.append(AlignedRow(a[i], None))
            i += 1
        else:
            rows.append(AlignedRow(None, b[j]))
            j += 1
    rows += [AlignedRow(e, None) for e in a[i:]] + [AlignedRow(None, e) for e in b[j:]]
    return rows
