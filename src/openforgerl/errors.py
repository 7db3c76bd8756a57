"""User mistakes: one line naming what to fix, never a traceback.

Code that detects a mistake the user can fix (an unknown name, a file that is not there, a config key
that does not exist, a port in use) raises `UserError` (or a subclass); the CLI's entry point
(`cli.main`) prints `error: <message>` on one line and exits 2. Everything else is a bug and keeps
its traceback.
"""

from __future__ import annotations

__all__ = ["UnknownNameError", "UserError"]


class UserError(Exception):
    """A mistake in what the user asked for; the message says what to fix."""


class UnknownNameError(UserError, KeyError):
    """An unknown registry name (harness, backend, task format). Still a KeyError for callers that
    look names up; `str()` is the message itself, not KeyError's quoted repr."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
