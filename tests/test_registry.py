"""The one `Registry` every plug-in point uses: names, aliases, entry-point plug-ins imported only when
needed, duplicates refused, and an unknown name as one line naming the nearest registered one. The
plug-ins here are real distributions (a `.dist-info` with `entry_points.txt` on `sys.path`), found by
`importlib.metadata` as an installed package's are."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openforgerl.errors import UnknownNameError, UserError
from openforgerl.registry import DuplicateNameError, Registry, nearest


def test_names_and_aliases_resolve_to_one_entry() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("alpha", 1, aliases=("a", "first"))
    reg.register("beta", 2)
    assert [reg.get(n) for n in ("alpha", "a", "first", "beta")] == [1, 1, 1, 2]
    assert reg.names() == ["alpha", "beta"] and reg.aliases() == {"a": "alpha", "first": "alpha"}
    assert "a" in reg and "gamma" not in reg and 3 not in reg
    reg.unregister("alpha")
    assert "a" not in reg and reg.names() == ["beta"]


@pytest.mark.parametrize(
    ("name", "aliases"), [("alpha", ()), ("gamma", ("a",)), ("a", ()), ("gamma", ("alpha",))]
)
def test_a_name_or_alias_taken_twice_is_refused(name: str, aliases: tuple[str, ...]) -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("alpha", 1, aliases=("a",))
    with pytest.raises(DuplicateNameError, match=r"widget .* is registered twice"):
        reg.register(name, 2, aliases=aliases)
    assert reg.names() == ["alpha"] and reg.get("alpha") == 1  # nothing half-registered
    reg.register(name, 2, aliases=aliases, replace=True)
    assert reg.get(name) == 2


@pytest.mark.parametrize(
    ("asked", "line"),
    [
        ("podmn", "unknown backend 'podmn'; did you mean 'podman'? (known: local | podman | kubernetes)"),
        ("k8", "unknown backend 'k8'; did you mean 'k8s'? (known: local | podman | kubernetes)"),  # an alias
        (
            "kubernets",
            "unknown backend 'kubernets'; did you mean 'kubernetes'? (known: local | podman | kubernetes)",
        ),
        ("zzz", "unknown backend 'zzz' (known: local | podman | kubernetes)"),
    ],
)
def test_an_unknown_name_is_one_line_naming_the_nearest(asked: str, line: str) -> None:
    reg: Registry[str] = Registry("backend")
    for name in ("local", "podman", "kubernetes"):
        reg.register(name, name, aliases=("k8s",) if name == "kubernetes" else ())
    with pytest.raises(UnknownNameError) as caught:
        reg.get(asked)
    assert str(caught.value) == line and "\n" not in line
    assert isinstance(caught.value, (UserError, KeyError))  # the CLI prints it as one line and exits 2


@given(
    st.lists(st.text(alphabet="abcdefgh-", min_size=1, max_size=8), min_size=1, max_size=6, unique=True),
    st.text(alphabet="abcdefgh-", min_size=1, max_size=8),
)
def test_the_error_names_only_registered_names(names: list[str], asked: str) -> None:
    reg: Registry[int] = Registry("thing")
    for i, name in enumerate(names):
        reg.register(name, i)
    if asked in names:
        assert reg.get(asked) == names.index(asked)
        return
    message = str(reg.unknown(asked))
    close = nearest(asked, names)
    assert (close is None) == ("did you mean" not in message)
    assert close is None or f"did you mean {close!r}?" in message
    assert message.endswith(f"(known: {' | '.join(names)})")


@pytest.fixture
def plugins(tmp_path: Path) -> Iterator[Path]:
    """A real installed distribution with two entry points in group `test.widgets`: one names an object
    (adopted under the point's name), one a module that registers itself; each logs its import."""
    (tmp_path / "widget_obj.py").write_text(
        "import os\nopen(os.environ['WIDGET_LOG'], 'a').write('obj\\n')\nVALUE = 41\n"
    )
    (tmp_path / "widget_mod.py").write_text(
        "import os\nopen(os.environ['WIDGET_LOG'], 'a').write('mod\\n')\n"
        "from widget_host import REG\nREG.register('self-made', 7)\n"
    )
    (tmp_path / "widget_host.py").write_text(
        "from openforgerl.registry import Registry\nREG = Registry('widget', group='test.widgets')\n"
    )
    info = tmp_path / "widgets-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: widgets\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[test.widgets]\nanswer = widget_obj:VALUE\nmaker = widget_mod\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for module in ("widget_obj", "widget_mod", "widget_host"):
            sys.modules.pop(module, None)


def test_entry_point_plugins_load_only_when_needed(plugins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = plugins / "log"
    monkeypatch.setenv("WIDGET_LOG", str(log))
    reg: Registry[int] = Registry(
        "widget", group="test.widgets", adopt=lambda obj: obj + 1 if isinstance(obj, int) else None
    )
    reg.register("local", 1)
    assert reg.get("local") == 1 and not log.exists()  # a registered name imports no plug-in
    assert reg.get("answer") == 42
    assert log.read_text() == "obj\n"  # only the point that was asked for
    with pytest.raises(UnknownNameError, match="'answr'; did you mean 'answer'"):
        reg.get("answr")  # a miss loads the rest once
    assert log.read_text() == "obj\nmod\n"
    assert reg.names() == ["local", "answer"]
    assert [n for n, _ in reg.items()] == ["answer", "local"]  # plug-ins first: code registered wins lookups


def test_a_plugin_module_registers_itself(plugins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WIDGET_LOG", str(plugins / "log"))
    host = importlib.import_module("widget_host")
    assert host.REG.get("self-made") == 7
    assert (plugins / "log").read_text().splitlines() == ["obj", "mod"]  # found by loading every point


def test_the_modules_listed_are_imported_on_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Control for the laziness above: a registry whose module is never imported does not know its name."""
    (tmp_path / "builtin_host.py").write_text(
        "from openforgerl.registry import Registry\n"
        "REG = Registry('widget', modules=('widget_builtin',))\n"
        "EMPTY = Registry('widget')\n"
    )
    (tmp_path / "widget_builtin.py").write_text("from builtin_host import REG\nREG.register('built-in', 3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    host = importlib.import_module("builtin_host")
    try:
        with pytest.raises(UnknownNameError):
            host.EMPTY.get("built-in")
        assert "widget_builtin" not in sys.modules
        assert host.REG.get("built-in") == 3
    finally:
        for module in ("widget_builtin", "builtin_host"):
            sys.modules.pop(module, None)
