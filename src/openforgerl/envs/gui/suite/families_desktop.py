"""The desktop families of the GUI suite (families.py lists them all): a text editor and a browser
window on the desktop, driven by pixel actions."""

from __future__ import annotations

from openforgerl.env.checks.spec import record_entry as rec
from openforgerl.envs.gui.suite.app_data import CARDS, DAYS, EVENTS
from openforgerl.envs.gui.suite.drafting import GuiDraft, click, fill, key, type_


def desktop_editor() -> list[GuiDraft]:
    rows = [
        ("notes.txt", "Shopping: milk, eggs", "Call the plumber"),
        ("todo.txt", "1. Pay rent", "2. Water plants"),
        ("ideas.md", "# Ideas", "- a bike rack for the office"),
        ("log.txt", "day 1: started", "day 2: tests pass"),
        ("letter.txt", "Dear Sam,", "Thanks for the help."),
    ]
    return [
        GuiDraft(
            f"gui/desktop-editor-{i + 1:02d}",
            f"The text editor shows {path}. Add the line '{line}' at the end of the "
            "file and save it (keep the existing text).",
            "desktop",
            {"desktop": {"launch": [{"app": "mousepad", "file": f"/workdir/{path}"}]}},
            [{"kind": "file", "name": "saved", "path": path, "contains": [first, line]}],
            [
                {"action": "click", "x": 640, "y": 400},
                key("ctrl+end"),
                key("enter"),
                type_(line),
                key("ctrl+s"),
                {"action": "wait", "seconds": 0.5},
            ],
            workspace={path: first + "\n"},
            tags=["desktop", "editor"],
        )
        for i, (path, first, line) in enumerate(rows)
    ]


def desktop_browser() -> list[GuiDraft]:
    cal = {"days": DAYS, "events": EVENTS}
    return [
        GuiDraft(
            "gui/desktop-board-01",
            "In the browser, move the card 'Write report' to the Doing column.",
            "desktop",
            {
                "apps": {"board": {"cards": CARDS}},
                "desktop": {"launch": [{"app": "chromium", "url": "/board"}]},
            },
            [rec("board.cards", "moved", {"title": "Write report", "column": "doing"})],
            [click("#fwd-c1")],
            tags=["desktop", "board"],
        ),
        GuiDraft(
            "gui/desktop-board-02",
            "In the browser, add a card 'Print badges' to the to-do board.",
            "desktop",
            {
                "apps": {"board": {"cards": CARDS}},
                "desktop": {"launch": [{"app": "chromium", "url": "/board"}]},
            },
            [rec("board.cards", "added", {"title": "Print badges", "column": "todo"})],
            [*fill("#new-title", "Print badges"), click("#add")],
            tags=["desktop", "board"],
        ),
        GuiDraft(
            "gui/desktop-calendar-01",
            "In the browser, delete the 'Dentist' event; keep every other event.",
            "desktop",
            {"apps": {"calendar": cal}, "desktop": {"launch": [{"app": "chromium", "url": "/calendar"}]}},
            [
                rec("calendar.events", "deleted", {"title": "Dentist"}, kind="no_record"),
                rec("calendar.events", "others_kept", count=len(EVENTS) - 1, safety=True),
            ],
            [click("#delete-e3")],
            tags=["desktop", "calendar"],
        ),
    ]
