"""Names -> things, one shape for every plug-in point: sandbox backends, harnesses, wire protocols, task
families, GUI kinds and task suites each keep one `Registry`.

A registry holds entries by name, aliases for some of them, and the plug-ins installed under an
entry-point group (or listed as built-in modules), which are imported only when a name is not found
yet or every name is asked for; so a command that uses one backend never imports the others.
Registering a name twice is an error (pass `replace=True` to mean it), and an unknown name is one
line naming the nearest registered name and the known ones.

This module imports nothing of openforgerl above `errors`, so every layer can keep a registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from types import ModuleType
from typing import Generic, TypeVar

from openforgerl.errors import UnknownNameError

__all__ = ["DuplicateNameError", "Registry", "nearest"]

T = TypeVar("T")


class DuplicateNameError(ValueError):
    """A name (or alias) registered twice without `replace=True`: two plug-ins claim one name."""


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to `name`, when one is close enough to be the likely typo."""
    import difflib  # here: only an unknown name pays for it (in-sandbox services import registries)

    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else None


def _self_registering(loaded: object) -> None:
    """The default plug-in shape: an entry point names a module that registers itself on import."""
    return None


@dataclass
class _State(Generic[T]):
    entries: dict[str, T] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    plugins: set[str] = field(default_factory=set)  # names registered while plug-ins were loading
    loaded: set[str] = field(default_factory=set)  # entry points and modules imported (or being imported)
    loading: int = 0
    complete: bool = False


@dataclass(frozen=True)
class Registry(Generic[T]):
    kind: str
    """The noun in messages: "harness", "sandbox backend", "GUI environment kind"."""
    group: str | None = None
    """Entry-point group whose plug-ins are loaded lazily (pyproject's `[project.entry-points.<group>]`)."""
    modules: tuple[str, ...] = ()
    """Built-in modules imported lazily like plug-ins; each registers its entries on import."""
    adopt: Callable[[object], T | None] = _self_registering
    """An entry point's loaded object -> the entry registered under the point's name; None when the
    loaded module registered itself."""
    error: type[UnknownNameError] = UnknownNameError
    """What an unknown name raises (a subclass keeps callers' `except` clauses working)."""
    _state: _State[T] = field(default_factory=_State, init=False, repr=False, compare=False)

    def register(self, name: str, entry: T, *, aliases: Iterable[str] = (), replace: bool = False) -> T:
        """Serve `name` (and `aliases`) with `entry`; a name already taken is a `DuplicateNameError`
        unless `replace`."""
        state = self._state
        aliases = tuple(aliases)
        if not replace:
            for taken in (name, *aliases):
                if taken in state.entries or taken in state.aliases:
                    raise DuplicateNameError(
                        f"{self.kind} {taken!r} is registered twice (pass replace=True to replace it)"
                    )
        state.entries.pop(name, None)  # re-inserted last: registration order is iteration order
        state.entries[name] = entry
        state.aliases.pop(name, None)
        state.aliases.update(dict.fromkeys(aliases, name))
        if state.loading:
            state.plugins.add(name)
        else:
            state.plugins.discard(name)
        return entry

    def unregister(self, name: str) -> None:
        """Forget `name` and its aliases (a test's own entries)."""
        state = self._state
        state.entries.pop(name, None)
        state.plugins.discard(name)
        for alias in [a for a, target in state.aliases.items() if target == name]:
            del state.aliases[alias]

    def canonical(self, name: str) -> str | None:
        """The registered name `name` is or is an alias of, loading plug-ins as needed; None if unknown."""
        state = self._state
        if name not in state.entries and name not in state.aliases:
            self._load(name)
        if name not in state.entries and name not in state.aliases:
            self._load_all()
        key = state.aliases.get(name, name)
        return key if key in state.entries else None

    def get(self, name: str) -> T:
        key = self.canonical(name)
        if key is None:
            raise self.unknown(name)
        return self._state.entries[key]

    def unknown(self, name: str) -> UnknownNameError:
        """The error for `name`: one line with the nearest registered name (or alias) and the known ones."""
        known = self.names()
        close = nearest(name, [*known, *self._state.aliases])
        hint = f"; did you mean {close!r}?" if close is not None else ""
        return self.error(f"unknown {self.kind} {name!r}{hint} (known: {' | '.join(known) or 'none'})")

    def names(self) -> list[str]:
        """Every registered name (plug-ins loaded), in registration order."""
        self._load_all()
        return list(self._state.entries)

    def items(self) -> list[tuple[str, T]]:
        """(name, entry), plug-ins first, then what code registered, each in registration order; so a
        lookup that lets later entries win lets code registered by the user win over plug-ins."""
        self._load_all()
        entries, plugins = self._state.entries, self._state.plugins
        return [(n, e) for n, e in entries.items() if n in plugins] + [
            (n, e) for n, e in entries.items() if n not in plugins
        ]

    def aliases(self) -> dict[str, str]:
        self._load_all()
        return dict(self._state.aliases)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.canonical(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def _import(self, key: str, load: Callable[[], object], name: str) -> None:
        state = self._state
        if key in state.loaded:
            return
        state.loaded.add(
            key
        )  # first: a plug-in that looks names up while it loads does not load itself again
        state.loading += 1
        try:
            loaded = load()
            if not isinstance(loaded, ModuleType) and (entry := self.adopt(loaded)) is not None:
                self.register(name, entry)
        finally:
            state.loading -= 1

    def _points(self) -> list[tuple[str, Callable[[], object]]]:
        if self.group is None:
            return []
        from importlib.metadata import entry_points  # here: importing a registry stays cheap

        return [(point.name, point.load) for point in entry_points(group=self.group)]

    def _load(self, name: str) -> None:
        """Import only the plug-in whose entry point is `name`, if there is one."""
        for point_name, load in self._points():
            if point_name == name:
                self._import(f"point:{point_name}", load, point_name)

    def _load_all(self) -> None:
        state = self._state
        if state.complete:
            return
        state.complete = True
        for module in self.modules:
            self._import(f"module:{module}", partial(importlib.import_module, module), module)
        for point_name, load in self._points():
            self._import(f"point:{point_name}", load, point_name)
