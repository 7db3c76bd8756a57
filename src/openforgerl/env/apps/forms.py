"""Forms: generic server-rendered forms (text, select, radio, checkbox, range slider, textarea).
Fixtures `{"forms": {id: {"title", "fields": [{name, label, type, options?, min?, max?}]}}}`.
State `forms`: `forms`, `submissions` [{form, <field>: value}] (checkbox -> bool, range -> int)."""

from __future__ import annotations

from typing import Any

from openforgerl.env.apps._web import Page, Request, Route, WebApp, esc, page

__all__ = ["FormsApp"]


def _field(f: dict[str, Any]) -> str:
    name, kind, fid = f["name"], f.get("type", "text"), f"f-{f['name']}"
    if kind == "select":
        opts = "".join(f"<option value='{esc(o)}'>{esc(o)}</option>" for o in ["", *f["options"]])
        control = f"<select id='{fid}' name='{esc(name)}'>{opts}</select>"
    elif kind == "radio":
        control = "".join(
            f"<input type='radio' id='{fid}-{i}' name='{esc(name)}' value='{esc(o)}'>"
            f"<span style='margin-right:18px'>{esc(o)}</span>"
            for i, o in enumerate(f["options"])
        )
    elif kind == "checkbox":
        control = f"<input type='checkbox' id='{fid}' name='{esc(name)}' style='width:20px;height:20px'>"
    elif kind == "range":
        lo, hi = f.get("min", 0), f.get("max", 100)
        control = (
            f"<input type='range' id='{fid}' name='{esc(name)}' "
            f"min='{lo}' max='{hi}' value='{(lo + hi) // 2}' "
            "style='width:400px'>"
        )
    elif kind == "textarea":
        control = f"<textarea id='{fid}' name='{esc(name)}'></textarea>"
    else:
        control = f"<input type='text' id='{fid}' name='{esc(name)}'>"
    return f"<div class='row'><label>{esc(f['label'])}</label>{control}</div>"


def _value(f: dict[str, Any], req: Request) -> Any:
    raw = req.get(f["name"])
    if f.get("type") == "checkbox":
        return bool(req.all(f["name"]))
    if f.get("type") == "range":
        return int(raw) if raw.lstrip("-").isdigit() else None
    return raw


class FormsApp(WebApp):
    name, prefix = "forms", "/forms"

    def initial(self, fixtures: dict[str, Any]) -> Any:
        return {"forms": fixtures.get("forms", {}), "submissions": []}

    def routes(self) -> list[Route]:
        return [
            ("GET", "", self.index),
            ("GET", r"/([\w-]+)", self.show),
            ("POST", r"/([\w-]+)", self.submit),
        ]

    def index(self, req: Request) -> Page:
        links = "".join(
            f"<li><a id='form-{esc(k)}' href='/forms/{esc(k)}'>{esc(v['title'])}</a></li>"
            for k, v in self.state["forms"].items()
        )
        return page("Forms", f"<h1>Forms</h1><ul>{links}</ul>")

    def show(self, req: Request, fid: str) -> Page:
        form = self.state["forms"].get(fid)
        if form is None:
            return Page(404, "<h1>No such form</h1>")
        fields = "".join(_field(f) for f in form["fields"])
        return page(
            "Forms",
            f"<h1>{esc(form['title'])}</h1><form method='post' action='/forms/{esc(fid)}'>"
            f"{fields}<button id='submit'>Submit</button></form>",
        )

    def submit(self, req: Request, fid: str) -> Page:
        form = self.state["forms"].get(fid)
        if form is None:
            return Page(404, "<h1>No such form</h1>")
        self.state["submissions"].append({"form": fid, **{f["name"]: _value(f, req) for f in form["fields"]}})
        return page("Forms", "<h1 id='done'>Thank you, your response was recorded.</h1>")
