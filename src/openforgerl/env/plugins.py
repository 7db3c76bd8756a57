"""What an environment offers the commands above it, found through entry points so the core names none:

- `ORACLES` (`openforgerl.oracles`): oracle policies, the test double for the model's decisions that
  `--engine scripted` / `--scripted-oracle` run (`DEFAULT_ORACLE` replays each task's gold actions);
- `GENERATORS` (`openforgerl.suite_generators`): a shipped suite's generator, under the suite's name
  (`openforgerl tasks generate` regenerates `claw`).

Each entry point names a callable of the shape below; looking one name up imports only its plug-in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from openforgerl.registry import Registry

if TYPE_CHECKING:
    from openforgerl.env.contract import TaskRuntime

__all__ = ["DEFAULT_ORACLE", "GENERATORS", "ORACLES", "OraclePolicy", "SuiteGenerator"]

DEFAULT_ORACLE = "actions"


class OraclePolicy(Protocol):
    """(task runtimes) -> a policy: one turn (`engines.scripted.Turn`, a stage above the SDK, hence `Any`)
    -> the model's reply text."""

    def __call__(
        self, runtimes: Sequence[TaskRuntime], *, success_rate: float = ..., seed: int = ...
    ) -> Callable[[Any], str]: ...


class SuiteGenerator(Protocol):
    """Writes the suite's task folders under `out` (default: where the suite ships), returns them."""

    def __call__(self, out: Path = ...) -> list[Path]: ...


def _callable(kind: str) -> Callable[[object], object]:
    def adopt(loaded: object) -> object:
        if not callable(loaded):
            raise TypeError(f"the {kind} entry point names {type(loaded).__name__}, not a callable")
        return loaded

    return adopt


def _oracle(loaded: object) -> OraclePolicy:
    return cast(OraclePolicy, _callable("oracle policy")(loaded))


def _generator(loaded: object) -> SuiteGenerator:
    return cast(SuiteGenerator, _callable("suite generator")(loaded))


ORACLES: Registry[OraclePolicy] = Registry("oracle policy", group="openforgerl.oracles", adopt=_oracle)
GENERATORS: Registry[SuiteGenerator] = Registry(
    "suite generator", group="openforgerl.suite_generators", adopt=_generator
)
