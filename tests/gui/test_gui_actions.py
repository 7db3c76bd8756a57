"""The action API's one validation point (`actions.apply`) and the computer service over real
loopback HTTP, against a fake `Computer` (no browser)."""

from __future__ import annotations

import threading

import pytest

from openforgerl.env.computer.actions import ACTIONS, ActionError, apply, parse_keys
from openforgerl.env.computer.client import ComputerUnavailable, HttpComputer
from openforgerl.env.computer.service import serve_computer


def test_click_runs_with_pixel_coordinates(fake_computer):
    assert apply(fake_computer, {"action": "click", "x": 10, "y": 719})["x"] == 10
    assert fake_computer.calls == [("click", (10, 719), {"button": "left"})]


@pytest.mark.parametrize(
    "body",
    [
        {"action": "click", "x": 1280, "y": 0},  # off the screen: refused, never clamped
        {"action": "click", "x": -1, "y": 5},
        {"action": "click", "x": 1.5, "y": 5},
        {"action": "click", "x": True, "y": 5},
        {"action": "click", "x": 5, "y": 5, "button": "fourth"},
        {"action": "type", "text": ""},
        {"action": "type", "text": "x" * 2001},
        {"action": "key", "keys": "ctrl+hyper"},
        {"action": "scroll", "x": 5, "y": 5, "dy": 100},
        {"action": "wait", "seconds": 11},
        {"action": "teleport"},
        ["click"],
    ],
)
def test_bad_actions_are_the_agents_error(fake_computer, body):
    with pytest.raises(ActionError):
        apply(fake_computer, body)
    assert fake_computer.calls == []


def test_every_action_name_dispatches(fake_computer):
    bodies = {
        "click": {"x": 1, "y": 1},
        "double_click": {"x": 1, "y": 1},
        "right_click": {"x": 1, "y": 1},
        "drag": {"x": 1, "y": 1, "to_x": 5, "to_y": 6},
        "type": {"text": "hi"},
        "key": {"keys": "Ctrl+S"},
        "scroll": {"x": 3, "y": 3, "dy": -2},
        "wait": {"seconds": 0},
    }
    assert set(bodies) == set(ACTIONS)
    for name, args in bodies.items():
        apply(fake_computer, {"action": name, **args})
    names = [c[0] for c in fake_computer.calls]
    assert names == ["click", "click", "click", "drag", "type", "key", "scroll"]
    assert fake_computer.calls[1][2] == {"count": 2} and fake_computer.calls[2][2] == {"button": "right"}


def test_key_names_are_normalised():
    assert parse_keys("Ctrl+Shift+T") == ["ctrl", "shift", "t"]
    assert parse_keys("Return") == ["enter"]
    assert parse_keys("+") == ["+"]


@pytest.fixture
def service(fake_computer):
    server = serve_computer(
        fake_computer,
        0,
        token="s3cret",
        locate=lambda sel: {"cx": 7, "cy": 9, "x": 0, "y": 0, "width": 14, "height": 18},
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", fake_computer
    server.shutdown()
    server.server_close()


def test_http_client_round_trip(service):
    url, fake = service
    c = HttpComputer(url)
    assert c.wait_ready(5).width == 1280
    c.click(3, 4)
    c.key(["ctrl", "a"])
    assert c.act({"action": "type", "text": "x"}, screenshot=True).startswith(b"\x89PNG")
    assert [x[0] for x in fake.calls] == ["click", "key", "type"]
    with pytest.raises(ActionError, match="off the screen"):
        c.click(5000, 4)


def test_locate_needs_the_token(service):
    url, _ = service
    with pytest.raises(ComputerUnavailable, match="404"):
        HttpComputer(url).locate("#x")
    with pytest.raises(ComputerUnavailable, match="404"):
        HttpComputer(url, token="guess").locate("#x")
    assert HttpComputer(url, token="s3cret").locate("#x")["cx"] == 7


class _Boxes(HttpComputer):
    """The oracle's lookup without a server: every selector sits at one fixed box."""

    def locate(self, selector: str) -> dict[str, int]:
        return {"x": 100, "y": 50, "width": 40, "height": 20, "cx": 120, "cy": 60}


def test_oracle_targets_resolve_to_pixels():
    from openforgerl.envs.gui.oracle import resolve

    c = _Boxes()
    assert resolve(c, {"action": "click", "target": "#go"}) == {"action": "click", "x": 120, "y": 60}
    drag = resolve(c, {"action": "drag", "target": "#s", "at": "left", "to_target": "#s", "to_at": "right"})
    assert drag == {"action": "drag", "x": 104, "y": 60, "to_x": 136, "to_y": 60}
    assert resolve(c, {"action": "key", "keys": "enter"}) == {"action": "key", "keys": "enter"}
