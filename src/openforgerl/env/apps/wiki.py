"""Wiki / knowledge base: search, read, edit, create. State `wiki`: `pages` [{slug, title, body}]."""

from __future__ import annotations

import re
from typing import Any

from openforgerl.env.apps._web import Page, Request, Route, WebApp, esc, page, redirect

__all__ = ["WikiApp"]


class WikiApp(WebApp):
    name, prefix = "wiki", "/wiki"

    def initial(self, fixtures: dict[str, Any]) -> Any:
        return {"pages": fixtures.get("pages", [])}

    def routes(self) -> list[Route]:
        return [
            ("GET", "", self.index),
            ("GET", "/new", self.new),
            ("POST", "/new", self.create),
            ("GET", r"/p/([\w-]+)", self.show),
            ("GET", r"/p/([\w-]+)/edit", self.edit),
            ("POST", r"/p/([\w-]+)/edit", self.save),
        ]

    def nav(self) -> str:
        return "<a id='nav-wiki' href='/wiki'>All pages</a><a id='nav-new' href='/wiki/new'>New page</a>"

    def _page(self, slug: str) -> dict[str, Any] | None:
        return next((p for p in self.state["pages"] if p["slug"] == slug), None)

    def index(self, req: Request) -> Page:
        q = req.get("q").lower()
        hits = [p for p in self.state["pages"] if q in (p["title"] + " " + p["body"]).lower()]
        items = "".join(
            f"<li><a id='page-{esc(p['slug'])}' href='/wiki/p/{esc(p['slug'])}'>{esc(p['title'])}</a></li>"
            for p in hits
        )
        search = (
            f"<form method='get' action='/wiki'><input type='text' id='q' name='q' value='{esc(q)}' "
            "placeholder='Search the wiki'><button id='search'>Search</button></form>"
        )
        return page("Wiki", f"{search}<ul>{items}</ul>", self.nav())

    def show(self, req: Request, slug: str) -> Page:
        p = self._page(slug)
        if p is None:
            return Page(404, "<h1>No such page</h1>")
        text = "".join(f"<p>{esc(par)}</p>" for par in p["body"].split("\n\n"))
        return page(
            "Wiki",
            f"<h1>{esc(p['title'])}</h1><div id='text'>{text}</div>"
            f"<a id='edit' href='/wiki/p/{esc(slug)}/edit'><button>Edit</button></a>",
            self.nav(),
        )

    def edit(self, req: Request, slug: str) -> Page:
        p = self._page(slug)
        if p is None:
            return Page(404, "<h1>No such page</h1>")
        return page(
            "Wiki",
            f"<h1>Edit: {esc(p['title'])}</h1><form method='post' action='/wiki/p/{esc(slug)}/edit'>"
            "<textarea id='body' name='body' style='width:800px;height:240px'>"
            f"{esc(p['body'])}</textarea><br>"
            "<button id='save'>Save</button></form>",
            self.nav(),
        )

    def save(self, req: Request, slug: str) -> Page:
        p = self._page(slug)
        if p is not None:
            p["body"] = req.get("body").replace("\r\n", "\n")
        return redirect(f"/wiki/p/{slug}")

    def new(self, req: Request) -> Page:
        return page(
            "Wiki",
            "<h1>New page</h1><form method='post' action='/wiki/new'>"
            "<div class='row'><label>Title</label><input type='text' id='title' name='title'></div>"
            "<div class='row'><label>Text</label><textarea id='body' name='body'></textarea></div>"
            "<button id='create'>Create</button></form>",
            self.nav(),
        )

    def create(self, req: Request) -> Page:
        title = req.get("title")
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        if not slug or self._page(slug) is not None:
            return page("Wiki", "<h1>Not created</h1><p>A new, non-empty title is required.</p>", self.nav())
        self.state["pages"].append({"slug": slug, "title": title, "body": req.get("body")})
        return redirect(f"/wiki/p/{slug}")
