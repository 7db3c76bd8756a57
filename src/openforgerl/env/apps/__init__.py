"""The web apps served inside a browser/desktop sandbox, by name (the `apps` of a GUI task's config).

`APPS[name]` is the app class; `build_apps({name: fixtures}, token)` builds the shared store and
server. Adding an app = one module with a `WebApp` subclass + one line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from http.server import ThreadingHTTPServer
from typing import Any

from openforgerl.env.apps._web import APPS_PORT, STATE_PATH, Store, WebApp, serve_apps
from openforgerl.env.apps.board import BoardApp
from openforgerl.env.apps.calendar import CalendarApp
from openforgerl.env.apps.forms import FormsApp
from openforgerl.env.apps.mail import MailApp
from openforgerl.env.apps.shop import ShopApp
from openforgerl.env.apps.wiki import WikiApp

__all__ = ["APPS", "APPS_PORT", "STATE_PATH", "Store", "build_apps"]

APPS: dict[str, type[WebApp]] = {
    a.name: a for a in (ShopApp, MailApp, FormsApp, WikiApp, CalendarApp, BoardApp)
}


def build_apps(
    fixtures: Mapping[str, Mapping[str, Any]], token: str, port: int = APPS_PORT
) -> tuple[Store, ThreadingHTTPServer]:
    """A store and a bound server with one instance of each named app (unknown names: KeyError)."""
    store = Store()
    apps = [APPS[name](store, fx) for name, fx in fixtures.items()]
    return store, serve_apps(apps, store, token, port)
