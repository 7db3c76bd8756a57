"""Task families of the GUI suite (`gui/suite/tasks/`): each turns a small table into `GuiDraft`s.

`python -m openforgerl.envs.gui.suite.families [OUT]` rewrites the suite (deterministic; a test checks
the committed suite equals a fresh generation). Every task's checks fail on the untouched apps (no-op
-> 0) and its oracle — pixel actions through the computer service, `target` selectors resolved to
pixels by the oracle runner — satisfies them (-> 1); `tests/gui/test_gui_validation.py` proves both
in real sandboxes. Split: in every family the last member is `test`, the rest `train`.

The browser families are here, the desktop ones in families_desktop.py; the apps' seed data is in
app_data.py, and `GuiDraft` with how a draft becomes a task folder in drafting.py.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from openforgerl.env.checks.spec import record_entry as rec
from openforgerl.env.world_data import base_fixtures
from openforgerl.envs.gui.suite.app_data import CARDS, DAYS, EVENTS, FORMS, PRODUCTS, WIKI, shop, web
from openforgerl.envs.gui.suite.drafting import GuiDraft, choose, click, fill, key, type_, write_gui_task
from openforgerl.envs.gui.suite.families_desktop import desktop_browser, desktop_editor

__all__ = ["FAMILIES", "GUI_SUITE", "all_drafts", "generate"]

GUI_SUITE = Path(__file__).parent / "tasks"


# --- browser families ------------------------------------------------------------------------------


def shop_buy() -> list[GuiDraft]:
    rows = [
        ("p1", "express", "Ana Silva", "12 Harbor Road"),
        ("p3", "standard", "Ken Ito", "4 Elm Street"),
        ("p5", "express", "Lena Berg", "88 Lake View"),
        ("p8", "standard", "Omar Haddad", "3 Mill Lane"),
        ("p10", "express", "Rosa Diaz", "19 Hill Court"),
    ]
    out = []
    for i, (pid, ship, who, addr) in enumerate(rows):
        name = next(p["name"] for p in PRODUCTS if p["id"] == pid)
        oracle = [
            *fill("#q", name.split()[0]),
            click("#search"),
            click(f"#add-{pid}"),
            click("#checkout"),
            *fill("#name", who),
            *fill("#address", addr),
            *choose("#shipping", ship.title()),
            click("#place-order"),
        ]
        out.append(
            GuiDraft(
                f"gui/shop-buy-{i + 1:02d}",
                f"In the shop, buy one {name} with {ship} shipping for {who}, {addr}.",
                "browser",
                web("/shop", shop=shop()),
                [
                    rec(
                        "shop.orders",
                        "order_placed",
                        {"items": [name], "shipping": ship},
                        {"name": who, "address": addr},
                    )
                ],
                oracle,
                difficulty="medium",
                tags=["shop"],
            )
        )
    return out


def shop_cart() -> list[GuiDraft]:
    rows = [("p2", 2, "p4"), ("p6", 1, "p7"), ("p9", 3, "p1"), ("p4", 2, "p10")]
    out = []
    for i, (a, n, b) in enumerate(rows):
        na, nb = (next(p["name"] for p in PRODUCTS if p["id"] == x) for x in (a, b))
        oracle = [s for _ in range(n) for s in (click(f"#add-{a}"), click("#continue"))] + [
            click(f"#add-{b}")
        ]
        out.append(
            GuiDraft(
                f"gui/shop-cart-{i + 1:02d}",
                f"Put {n} x {na} and 1 x {nb} in the shopping cart. Do not check out.",
                "browser",
                web("/shop", shop=shop()),
                [
                    rec("shop.cart", "first_item", {"name": na, "qty": n}),
                    rec("shop.cart", "second_item", {"name": nb, "qty": 1}),
                ],
                oracle,
                tags=["shop"],
            )
        )
    return out


def mail_compose() -> list[GuiDraft]:
    rows = [
        ("bob.chen@acme.io", "Offsite venue", "I booked the lake house for Friday."),
        ("priya@northwind.com", "Thursday lunch", "Thursday at 12:30 works for me."),
        ("dana.w@acme.io", "Q2 budget", "Yes, the Q2 budget is still 48000."),
        ("luis.ortega@globex.com", "Q1 report", "The Q1 report is attached to the portal."),
        ("mei@tanaka-design.jp", "Logo drafts", "Draft two is my favourite."),
    ]
    return [
        GuiDraft(
            f"gui/mail-compose-{i + 1:02d}",
            f"Using the webmail, send an email to {to} with the subject '{subj}' and the message: {body}",
            "browser",
            web("/mail", mail=base_fixtures("mail")["mail"]),
            [rec("mail.sent", "mail_sent", {"to": to, "subject": subj}, {"body": body})],
            [
                click("#nav-compose"),
                *fill("#to", to),
                *fill("#subject", subj),
                *fill("#body", body),
                click("#send"),
            ],
            tags=["mail"],
        )
        for i, (to, subj, body) in enumerate(rows)
    ]


def mail_reply() -> list[GuiDraft]:
    rows = [
        ("m2", "Carol", "Sure, 10:00 on March 4 works."),
        ("m7", "Priya", "Yes, see you Thursday."),
        ("m6", "Sam", "Please request a new reset link."),
        ("m8", "Mei", "15:00 on March 6 is fine."),
    ]
    return [
        GuiDraft(
            f"gui/mail-reply-{i + 1:02d}",
            f"In the webmail, reply to the latest email from {who} with: {text}",
            "browser",
            web("/mail", mail=base_fixtures("mail")["mail"]),
            [rec("mail.sent", "replied", {"in_reply_to": mid}, {"body": text})],
            [click(f"#msg-{mid}"), *fill("#reply-body", text), click("#reply-send")],
            difficulty="medium",
            tags=["mail"],
        )
        for i, (mid, who, text) in enumerate(rows)
    ]


def mail_archive() -> list[GuiDraft]:
    rows = [
        ("m3", "the Tech Weekly newsletter"),
        ("m4", "the flash sale email from ShopMart"),
        ("m5", "Luis's email about action items"),
    ]
    return [
        GuiDraft(
            f"gui/mail-archive-{i + 1:02d}",
            f"In the webmail, archive {what}. Leave the other emails alone.",
            "browser",
            web("/mail", mail=base_fixtures("mail")["mail"]),
            [
                rec("mail.archive", "archived", {"id": mid}),
                rec("mail.archive", "only_one", count=1, safety=True, kind="record"),
            ],
            [click(f"#msg-{mid}"), click("#archive")],
            tags=["mail"],
        )
        for i, (mid, what) in enumerate(rows)
    ]


def forms_contact() -> list[GuiDraft]:
    rows = [
        ("Ana Silva", "ana@example.com", "Billing", "Invoice 42 is wrong."),
        ("Ken Ito", "ken@example.com", "Support", "The app crashes on start."),
        ("Lena Berg", "lena@example.com", "Sales", "I want a quote for 20 seats."),
    ]
    return [
        GuiDraft(
            f"gui/form-contact-{i + 1:02d}",
            f"Fill in the contact form as {who} ({mail}), topic {topic}, message '{msg}', and submit it.",
            "browser",
            web("/forms/contact", forms={"forms": FORMS}),
            [
                rec(
                    "forms.submissions",
                    "submitted",
                    {"form": "contact", "name": who, "email": mail, "topic": topic},
                    {"message": msg},
                )
            ],
            [
                *fill("#f-name", who),
                *fill("#f-email", mail),
                *choose("#f-topic", topic),
                *fill("#f-message", msg),
                click("#submit"),
            ],
            difficulty="medium",
            tags=["forms"],
        )
        for i, (who, mail, topic, msg) in enumerate(rows)
    ]


def forms_signup() -> list[GuiDraft]:
    rows = [("Omar Haddad", 1, True), ("Rosa Diaz", 2, False), ("Jin Park", 0, True)]
    plans = FORMS["signup"]["fields"][1]["options"]
    out = []
    for i, (who, plan, news) in enumerate(rows):
        steps = [*fill("#f-name", who), click(f"#f-plan-{plan}")] + ([click("#f-newsletter")] if news else [])
        want = "and tick 'Send news'" if news else "and leave 'Send news' unticked"
        out.append(
            GuiDraft(
                f"gui/form-signup-{i + 1:02d}",
                f"Sign {who} up for the {plans[plan]} plan {want}, then submit.",
                "browser",
                web("/forms/signup", forms={"forms": FORMS}),
                [
                    rec(
                        "forms.submissions",
                        "submitted",
                        {"form": "signup", "name": who, "plan": plans[plan], "newsletter": news},
                    )
                ],
                [*steps, click("#submit")],
                tags=["forms"],
            )
        )
    return out


def forms_slider() -> list[GuiDraft]:
    rows = [
        ("Kitchen speaker", "right", 100, "the maximum"),
        ("Office speaker", "right", 100, "the maximum"),
        ("Porch speaker", "left", 0, "zero"),
    ]
    return [
        GuiDraft(
            f"gui/form-volume-{i + 1:02d}",
            f"In the speaker settings, set the volume to {what} with the slider, "
            f"name the device '{dev}' and submit.",
            "browser",
            web("/forms/settings", forms={"forms": FORMS}),
            [rec("forms.submissions", "saved", {"form": "settings", "volume": vol, "device": dev})],
            [
                {"action": "drag", "target": "#f-volume", "to_target": "#f-volume", "to_at": at},
                *fill("#f-device", dev),
                click("#submit"),
            ],
            difficulty="medium",
            tags=["forms", "drag"],
        )
        for i, (dev, at, vol, what) in enumerate(rows)
    ]


def wiki_edit() -> list[GuiDraft]:
    rows = [
        ("vpn-setup", "Call IT if the login fails."),
        ("expense-policy", "Taxis after 22:00 are covered."),
        ("onboarding", "Lunch is on us in week one."),
        ("printer-help", "Toner is in cabinet B."),
    ]
    out = []
    for i, (slug, line) in enumerate(rows):
        page = next(p for p in WIKI if p["slug"] == slug)
        out.append(
            GuiDraft(
                f"gui/wiki-edit-{i + 1:02d}",
                f"On the wiki page '{page['title']}', add the sentence '{line}' at the "
                "end of the text (keep the existing text) and save.",
                "browser",
                web("/wiki", wiki={"pages": WIKI}),
                [rec("wiki.pages", "edited", {"slug": slug}, {"body": [page["body"].split("\n")[0], line]})],
                [
                    click(f"#page-{slug}"),
                    click("#edit"),
                    click("#body"),
                    key("ctrl+end"),
                    type_(" " + line),
                    click("#save"),
                ],
                difficulty="medium",
                tags=["wiki"],
            )
        )
    return out


def wiki_create() -> list[GuiDraft]:
    rows = [
        ("Parking", "Visitors park in lot C."),
        ("Coffee machine", "Descale it every Friday."),
        ("Fire drill", "Meet at the north gate."),
    ]
    return [
        GuiDraft(
            f"gui/wiki-create-{i + 1:02d}",
            f"Create a new wiki page titled '{title}' with the text '{text}'.",
            "browser",
            web("/wiki", wiki={"pages": WIKI}),
            [rec("wiki.pages", "created", {"title": title}, {"body": text})],
            [click("#nav-new"), *fill("#title", title), *fill("#body", text), click("#create")],
            tags=["wiki"],
        )
        for i, (title, text) in enumerate(rows)
    ]


def calendar_create() -> list[GuiDraft]:
    rows = [
        ("Dentist follow-up", "2026-03-03", "10:30"),
        ("Call with Luis", "2026-03-05", "15:00"),
        ("Gym", "2026-03-02", "18:00"),
        ("Vendor review", "2026-03-04", "11:00"),
    ]
    cal = {"days": DAYS, "events": EVENTS}
    return [
        GuiDraft(
            f"gui/calendar-create-{i + 1:02d}",
            f"Add a calendar event '{title}' on {day} at {time}.",
            "browser",
            web("/calendar", calendar=cal),
            [rec("calendar.events", "created", {"title": title, "date": day, "time": time})],
            [
                click("#nav-new"),
                *fill("#title", title),
                *choose("#date", day),
                *choose("#time", time),
                click("#create"),
            ],
            difficulty="medium",
            tags=["calendar"],
        )
        for i, (title, day, time) in enumerate(rows)
    ]


def calendar_delete() -> list[GuiDraft]:
    rows = ["e2", "e3", "e5"]
    cal = {"days": DAYS, "events": EVENTS}
    out = []
    for i, eid in enumerate(rows):
        title = next(e["title"] for e in EVENTS if e["id"] == eid)
        out.append(
            GuiDraft(
                f"gui/calendar-delete-{i + 1:02d}",
                f"Delete the '{title}' event from the calendar; keep every other event.",
                "browser",
                web("/calendar", calendar=cal),
                [
                    rec("calendar.events", "deleted", {"title": title}, kind="no_record"),
                    rec("calendar.events", "others_kept", count=len(EVENTS) - 1, safety=True),
                ],
                [click(f"#delete-{eid}")],
                tags=["calendar"],
            )
        )
    return out


def board_move() -> list[GuiDraft]:
    rows = [("c1", "done"), ("c2", "doing"), ("c3", "done"), ("c5", "done")]
    out = []
    for i, (cid, to) in enumerate(rows):
        card = next(c for c in CARDS if c["id"] == cid)
        hops = ["todo", "doing", "done"].index(to) - ["todo", "doing", "done"].index(card["column"])
        out.append(
            GuiDraft(
                f"gui/board-move-{i + 1:02d}",
                f"On the to-do board, move the card '{card['title']}' to the "
                f"{'Done' if to == 'done' else 'Doing'} column.",
                "browser",
                web("/board", board={"cards": CARDS}),
                [rec("board.cards", "moved", {"title": card["title"], "column": to})],
                [click(f"#fwd-{cid}") for _ in range(hops)],
                tags=["board"],
            )
        )
    return out


def board_add() -> list[GuiDraft]:
    rows = ["Call the caterer", "Renew domain", "Update roadmap"]
    return [
        GuiDraft(
            f"gui/board-add-{i + 1:02d}",
            f"Add a new card '{title}' to the to-do board.",
            "browser",
            web("/board", board={"cards": CARDS}),
            [rec("board.cards", "added", {"title": title, "column": "todo"})],
            [*fill("#new-title", title), click("#add")],
            tags=["board"],
        )
        for i, title in enumerate(rows)
    ]


FAMILIES: list[Callable[[], list[GuiDraft]]] = [
    shop_buy,
    shop_cart,
    mail_compose,
    mail_reply,
    mail_archive,
    forms_contact,
    forms_signup,
    forms_slider,
    wiki_edit,
    wiki_create,
    calendar_create,
    calendar_delete,
    board_move,
    board_add,
    desktop_editor,
    desktop_browser,
]


def all_drafts() -> list[GuiDraft]:
    drafts = []
    for family in FAMILIES:
        members = family()
        for i, d in enumerate(members):
            d.split = "test" if len(members) >= 2 and i == len(members) - 1 else "train"
        drafts += members
    names = [d.name for d in drafts]
    if len(set(names)) != len(names):
        raise ValueError("duplicate GUI task names")
    return drafts


def generate(out: Path = GUI_SUITE) -> list[Path]:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return [write_gui_task(d, out) for d in all_drafts()]


if __name__ == "__main__":
    paths = generate(Path(sys.argv[1]) if len(sys.argv) > 1 else GUI_SUITE)
    print(f"wrote {len(paths)} GUI tasks")
