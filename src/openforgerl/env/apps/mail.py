"""Webmail over the Claw mail service's own world (`envs.world`: the same ops and state shape as the
`mail_*` tools). State `mail`: `inbox`, `sent`, `drafts`, `archive` (claw-compatible checks: `mail.sent`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openforgerl.env.apps._web import Page, Request, Route, WebApp, esc, page, redirect
from openforgerl.env.world import OPS, World

__all__ = ["MailApp"]


class MailApp(WebApp):
    name, prefix = "mail", "/mail"

    def initial(self, fixtures: dict[str, Any]) -> Any:
        mail = {"inbox": [], "sent": [], "drafts": [], "archive": [], **fixtures}
        self.world = World({"mail": mail}, Path("/nonexistent"))
        return self.world.data["mail"]

    def routes(self) -> list[Route]:
        return [
            ("GET", "", self.inbox),
            ("GET", r"/m/([\w-]+)", self.read),
            ("POST", r"/m/([\w-]+)/reply", self.reply),
            ("POST", r"/m/([\w-]+)/archive", self.archive),
            ("GET", "/compose", self.compose),
            ("POST", "/send", self.send),
        ]

    def nav(self) -> str:
        return "<a id='nav-inbox' href='/mail'>Inbox</a><a id='nav-compose' href='/mail/compose'>Compose</a>"

    def _op(self, name: str, **args: Any) -> Any:
        self.world.data["mail"] = self.state  # the store owns the dict; the world works on it
        return OPS[name](self.world, args)

    def inbox(self, req: Request) -> Page:
        rows = "".join(
            f"<tr><td>{'' if m.get('read') else '&#9679;'}</td><td>{esc(m['from'])}</td>"
            f"<td><a id='msg-{esc(m['id'])}' href='/mail/m/{esc(m['id'])}'>{esc(m['subject'])}</a></td>"
            f"<td>{esc(m.get('date', ''))}</td></tr>"
            for m in reversed(self.state["inbox"])
        )
        return page("Mail", f"<h1>Inbox</h1><table>{rows}</table>", self.nav())

    def read(self, req: Request, mid: str) -> Page:
        try:
            m = self._op("mail_read", id=mid)
        except Exception:
            return Page(404, "<h1>No such message</h1>")
        body = "<br>".join(esc(line) for line in str(m.get("body", "")).split("\n"))
        actions = (
            ""
            if m["folder"] != "inbox"
            else (
                f"<form method='post' action='/mail/m/{esc(mid)}/archive'>"
                "<button id='archive'>Archive</button></form>"
                f"<form method='post' action='/mail/m/{esc(mid)}/reply'><div class='row'>"
                "<textarea id='reply-body' name='body' placeholder='Write a reply'></textarea></div>"
                "<button id='reply-send'>Send reply</button></form>"
            )
        )
        head = (
            f"<h1>{esc(m['subject'])}</h1>"
            f"<p class='note'>From {esc(m['from'])} &middot; {esc(m.get('date', ''))}</p>"
        )
        return page("Mail", f"{head}<p id='body'>{body}</p>{actions}", self.nav())

    def reply(self, req: Request, mid: str) -> Page:
        if req.get("body"):
            self._op("mail_reply", id=mid, body=req.get("body"))
        return redirect("/mail")

    def archive(self, req: Request, mid: str) -> Page:
        try:
            self._op("mail_archive", id=mid)
        except Exception:
            pass
        return redirect("/mail")

    def compose(self, req: Request) -> Page:
        body = (
            "<h1>New message</h1><form method='post' action='/mail/send'>"
            "<div class='row'><label>To</label><input type='text' id='to' name='to'></div>"
            "<div class='row'><label>Subject</label><input type='text' id='subject' name='subject'></div>"
            "<div class='row'><label>Message</label><textarea id='body' name='body'></textarea></div>"
            "<button id='send'>Send</button></form>"
        )
        return page("Mail", body, self.nav())

    def send(self, req: Request) -> Page:
        if req.get("to") and req.get("subject"):
            self._op("mail_send", to=req.get("to"), subject=req.get("subject"), body=req.get("body"))
            return page("Mail", "<h1 id='done'>Message sent</h1>", self.nav())
        return page("Mail", "<h1>Not sent</h1><p>To and subject are required.</p>", self.nav())
