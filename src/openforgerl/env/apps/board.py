"""To-do board: three columns (todo, doing, done), cards moved by buttons, added by a form, deleted.
State `board`: `cards` [{id, title, column}]."""

from __future__ import annotations

from typing import Any

from openforgerl.env.apps._web import Page, Request, Route, WebApp, esc, page, redirect

__all__ = ["BoardApp"]

COLUMNS = ("todo", "doing", "done")
TITLES = {"todo": "To do", "doing": "Doing", "done": "Done"}


class BoardApp(WebApp):
    name, prefix = "board", "/board"

    def initial(self, fixtures: dict[str, Any]) -> Any:
        return {"cards": fixtures.get("cards", []), "next": 100}

    def routes(self) -> list[Route]:
        return [
            ("GET", "", self.show),
            ("POST", "/add", self.add),
            ("POST", r"/c/([\w-]+)/move", self.move),
            ("POST", r"/c/([\w-]+)/delete", self.delete),
        ]

    def _card(self, c: dict[str, Any]) -> str:
        cid = esc(c["id"])
        i = COLUMNS.index(c["column"])
        back = f"<button id='back-{cid}' name='to' value='{COLUMNS[i - 1]}'>&larr;</button>" if i > 0 else ""
        fwd = f"<button id='fwd-{cid}' name='to' value='{COLUMNS[i + 1]}'>&rarr;</button>" if i < 2 else ""
        return (
            f"<div class='card'>{esc(c['title'])}<br><form method='post' action='/board/c/{cid}/move' "
            f"style='display:inline'>{back}{fwd}</form><form method='post' action='/board/c/{cid}/delete' "
            f"style='display:inline'><button id='del-{cid}'>Delete</button></form></div>"
        )

    def show(self, req: Request) -> Page:
        cols = "".join(
            f"<div class='col'><b>{TITLES[col]}</b>"
            + "".join(self._card(c) for c in self.state["cards"] if c["column"] == col)
            + "</div>"
            for col in COLUMNS
        )
        add = (
            "<form method='post' action='/board/add'><input type='text' id='new-title' name='title' "
            "placeholder='New card'><button id='add'>Add card</button></form>"
        )
        return page("Board", add + cols)

    def add(self, req: Request) -> Page:
        if req.get("title"):
            self.state["next"] += 1
            self.state["cards"].append(
                {"id": f"c{self.state['next']}", "title": req.get("title"), "column": "todo"}
            )
        return redirect("/board")

    def move(self, req: Request, cid: str) -> Page:
        for c in self.state["cards"]:
            if c["id"] == cid and req.get("to") in COLUMNS:
                c["column"] = req.get("to")
        return redirect("/board")

    def delete(self, req: Request, cid: str) -> Page:
        self.state["cards"] = [c for c in self.state["cards"] if c["id"] != cid]
        return redirect("/board")
