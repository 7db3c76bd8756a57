"""The task-format error, in a module of its own so in-sandbox tools can raise it import-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the in-sandbox tools import this module: no pathlib for them
    from pathlib import Path


class TaskFormatError(ValueError):
    """A task folder is malformed. `path` is the offending file, `field` a dotted name (or "")."""

    def __init__(self, path: Path, field: str, reason: str) -> None:
        self.path, self.field, self.reason = path, field, reason
        where = f"{path}: {field}: " if field else f"{path}: "
        super().__init__(where + reason)
