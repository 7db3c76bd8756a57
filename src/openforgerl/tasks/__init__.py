"""Tasks, apart from any environment: the task folder format (Harbor-compatible `task.toml`,
`instruction.md`, `environment/`, `tests/`, `solution/`), its types (`schema`) and its loader (`format`),
the family registry that says which runtime runs a folder (`families`), folder -> runtime (`loader`),
drafts written out as folders (`draft`), no-op/oracle validation (`validate`), run flags (`flags`),
verifier outputs (`verdicts`), the host side a verifier may use (`host_side`, `transcript`; the judge
client is the SDK's `env.judge`) and the runtime of Harbor-style folders that carry their own verifier
(`harbor`).

Nothing here imports an environment package (`openforgerl.envs.*`): environments register their families
themselves and are found through entry points (`families`). Kept import-light: the in-sandbox tools of
the environments import `families`. The task-format error, `TaskFormatError`, is the SDK's
(`env.errors`), so the SDK's check parser raises it without importing this package.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Task",
    "TaskFamily",
    "TaskFormatError",
    "find_tasks",
    "load_runtime",
    "load_runtimes",
    "load_task",
    "register_family",
]

_WHERE = {
    "Task": "schema",
    "TaskFormatError": "openforgerl.env.errors",
    "find_tasks": "format",
    "load_task": "format",
    "TaskFamily": "families",
    "register_family": "families",
    "load_runtime": "loader",
    "load_runtimes": "loader",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(name)
    import importlib

    where = _WHERE[name]
    return getattr(importlib.import_module(where if "." in where else f"{__name__}.{where}"), name)
