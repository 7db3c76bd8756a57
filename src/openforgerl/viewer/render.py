"""Jinja2 rendering of `site.Page`s (autoescaped: every tool output is shown as text, never as HTML)."""

from __future__ import annotations

from typing import Any

import jinja2

from openforgerl.viewer.site import Links, Page, outcome, pretty

__all__ = ["Renderer"]


def fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:.3g}"
    return str(value)


class Renderer:
    def __init__(self, links: Links) -> None:
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("openforgerl.viewer", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.env.globals.update(links=links, fmt=fmt, pretty=pretty, outcome=outcome)

    def render(self, page: Page) -> str:
        return self.env.get_template(page.template).render(**page.context)
