"""The web apps over real loopback HTTP (no browser): flows change state, and the state route is
hidden without the rollout's token."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from openforgerl.env.world_data import base_fixtures
from openforgerl.envs.gui.suite.app_data import CARDS, FORMS, PRODUCTS


def post(url: str, **form: str) -> str:
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST")) as r:
        return r.read().decode()


def state(base: str, token: str = "t0ken") -> dict:
    req = urllib.request.Request(base + "/__state", headers={"X-Openforgerl-Token": token})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def test_state_route_is_hidden_without_the_token(apps_server):
    _, base = apps_server({"board": {"cards": CARDS}})
    for headers in ({}, {"X-Openforgerl-Token": "wrong"}, {"X-Openforgerl-Token": ""}):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(urllib.request.Request(base + "/__state", headers=headers))
        assert err.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as err:  # no route writes state directly
        post(base + "/__state", board="{}")
    assert err.value.code == 404
    assert state(base)["board"]["cards"][0]["title"] == "Write report"


def test_shop_search_cart_checkout(apps_server):
    _, base = apps_server({"shop": {"products": PRODUCTS}})
    assert "Blue Mug" in urllib.request.urlopen(base + "/shop?q=mug").read().decode()
    post(base + "/shop/cart/add", id="p1")
    post(base + "/shop/cart/add", id="p1")
    assert state(base)["shop"]["cart"] == [{"id": "p1", "name": "Blue Mug", "qty": 2}]
    assert "Order o1 placed" in post(
        base + "/shop/checkout", name="Ana", address="1 Road", shipping="express"
    )
    order = state(base)["shop"]["orders"][0]
    assert (
        order["items"] == ["Blue Mug", "Blue Mug"]
        and order["shipping"] == "express"
        and order["total"] == 19.0
    )


def test_webmail_uses_the_claw_mail_world(apps_server):
    _, base = apps_server({"mail": base_fixtures("mail")["mail"]})
    assert "Q2 budget numbers" in urllib.request.urlopen(base + "/mail").read().decode()
    post(base + "/mail/m/m2/reply", body="Sure.")
    post(base + "/mail/send", to="bob.chen@acme.io", subject="Hi", body="Hello")
    post(base + "/mail/m/m3/archive")
    mail = state(base)["mail"]
    assert [m["to"] for m in mail["sent"]] == ["carol.diaz@acme.io", "bob.chen@acme.io"]
    assert mail["sent"][0]["in_reply_to"] == "m2" and [m["id"] for m in mail["archive"]] == ["m3"]


def test_forms_board_wiki_calendar(apps_server):
    cal = {"days": ["2026-03-02"], "events": []}
    wiki = {"pages": [{"slug": "a", "title": "A", "body": "one"}]}
    _, base = apps_server(
        {"forms": {"forms": FORMS}, "board": {"cards": CARDS}, "wiki": wiki, "calendar": cal}
    )
    post(base + "/forms/signup", name="Jo", plan="Pro", newsletter="on")
    post(base + "/forms/settings", volume="100", device="x")
    post(base + "/board/c/c1/move", to="done")
    post(base + "/wiki/p/a/edit", body="one two")
    post(base + "/wiki/new", title="New Page", body="b")
    post(base + "/calendar/new", title="Gym", date="2026-03-02", time="18:00")
    s = state(base)
    assert s["forms"]["submissions"] == [
        {"form": "signup", "name": "Jo", "plan": "Pro", "newsletter": True},
        {"form": "settings", "volume": 100, "device": "x"},
    ]
    assert s["board"]["cards"][0]["column"] == "done"
    assert [p["slug"] for p in s["wiki"]["pages"]] == ["a", "new-page"] and s["wiki"]["pages"][0][
        "body"
    ] == "one two"
    assert s["calendar"]["events"][0]["title"] == "Gym"
