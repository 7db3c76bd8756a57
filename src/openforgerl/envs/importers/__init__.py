"""Kept for callers of the old path: the importers now live in the environments they feed, found through
the `openforgerl.importers` entry points by `openforgerl.tasks.importing`."""

from __future__ import annotations

from openforgerl.tasks.importing import detect_format, import_any

__all__ = ["detect_format", "import_any"]
