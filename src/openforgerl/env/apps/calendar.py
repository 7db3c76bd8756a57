"""Calendar: a week of days with events, a new-event form, delete. State `calendar`: `days` (ISO dates
shown), `events` [{id, title, date, time}]."""

from __future__ import annotations

from typing import Any

from openforgerl.env.apps._web import Page, Request, Route, WebApp, esc, page, redirect

__all__ = ["CalendarApp"]

TIMES = [f"{h:02d}:{m:02d}" for h in range(8, 19) for m in (0, 30)]


class CalendarApp(WebApp):
    name, prefix = "calendar", "/calendar"

    def initial(self, fixtures: dict[str, Any]) -> Any:
        return {"days": fixtures.get("days", []), "events": fixtures.get("events", []), "next": 100}

    def routes(self) -> list[Route]:
        return [
            ("GET", "", self.week),
            ("GET", "/new", self.new),
            ("POST", "/new", self.create),
            ("POST", r"/e/([\w-]+)/delete", self.delete),
        ]

    def nav(self) -> str:
        return "<a id='nav-week' href='/calendar'>Week</a><a id='nav-new' href='/calendar/new'>New event</a>"

    def week(self, req: Request) -> Page:
        cols = []
        for day in self.state["days"]:
            evs = sorted((e for e in self.state["events"] if e["date"] == day), key=lambda e: e["time"])
            cards = "".join(
                f"<div class='card'>{esc(e['time'])} {esc(e['title'])}<form method='post' "
                f"action='/calendar/e/{esc(e['id'])}/delete'>"
                f"<button id='delete-{esc(e['id'])}'>Delete</button></form>"
                "</div>"
                for e in evs
            )
            cols.append(
                f"<div class='col' style='width:160px;margin-right:8px'><b>{esc(day)}</b>{cards}</div>"
            )
        return page("Calendar", "".join(cols), self.nav())

    def new(self, req: Request) -> Page:
        days = "".join(f"<option>{esc(d)}</option>" for d in self.state["days"])
        times = "".join(f"<option>{t}</option>" for t in TIMES)
        return page(
            "Calendar",
            "<h1>New event</h1><form method='post' action='/calendar/new'>"
            "<div class='row'><label>Title</label><input type='text' id='title' name='title'></div>"
            f"<div class='row'><label>Day</label><select id='date' name='date'>{days}</select></div>"
            f"<div class='row'><label>Time</label><select id='time' name='time'>{times}</select></div>"
            "<button id='create'>Create event</button></form>",
            self.nav(),
        )

    def create(self, req: Request) -> Page:
        if req.get("title") and req.get("date") in self.state["days"]:
            self.state["next"] += 1
            self.state["events"].append(
                {
                    "id": f"e{self.state['next']}",
                    "title": req.get("title"),
                    "date": req.get("date"),
                    "time": req.get("time", TIMES[0]),
                }
            )
        return redirect("/calendar")

    def delete(self, req: Request, eid: str) -> Page:
        self.state["events"] = [e for e in self.state["events"] if e["id"] != eid]
        return redirect("/calendar")
