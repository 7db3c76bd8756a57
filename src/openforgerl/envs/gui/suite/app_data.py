"""The seed data the GUI suite's tasks start the apps with (shop products, wiki pages, calendar days and
events, board cards, forms), and the `gui.json` environment that starts them (`web`, `shop`)."""

from __future__ import annotations

from typing import Any

PRODUCTS: list[dict[str, Any]] = [
    {"id": f"p{i + 1}", "name": n, "price": p, "category": c}
    for i, (n, p, c) in enumerate(
        [
            ("Blue Mug", 9.5, "kitchen"),
            ("Red Lamp", 24.0, "home"),
            ("Green Notebook", 4.25, "office"),
            ("Steel Bottle", 18.0, "kitchen"),
            ("Desk Fan", 31.0, "home"),
            ("Black Pen Set", 6.75, "office"),
            ("Wool Scarf", 22.0, "clothing"),
            ("Yoga Mat", 27.5, "sport"),
            ("Tennis Balls", 8.0, "sport"),
            ("Coffee Beans", 13.0, "kitchen"),
        ]
    )
]
WIKI = [
    {"slug": s, "title": t, "body": b}
    for s, t, b in [
        (
            "vpn-setup",
            "VPN setup",
            "Install the client from the portal.\n\nUse your staff id as the user name.",
        ),
        ("expense-policy", "Expense policy", "Meals up to $40 a day are covered.\n\nKeep every receipt."),
        (
            "onboarding",
            "Onboarding",
            "New staff get a laptop on day one.\n\nThe buddy program lasts a month.",
        ),
        (
            "printer-help",
            "Printer help",
            "The office printer is on floor 2.\n\nRestart it before calling IT.",
        ),
        (
            "holiday-calendar",
            "Holiday calendar",
            "The office closes on public holidays.\n\nBook leave early.",
        ),
    ]
]
DAYS = ["2026-03-02", "2026-03-03", "2026-03-04", "2026-03-05", "2026-03-06"]
EVENTS = [
    {"id": f"e{i + 1}", "title": t, "date": d, "time": h}
    for i, (t, d, h) in enumerate(
        [
            ("Team standup", "2026-03-02", "09:00"),
            ("Budget review", "2026-03-03", "14:00"),
            ("Dentist", "2026-03-04", "08:30"),
            ("Lunch with Priya", "2026-03-05", "12:30"),
            ("Sprint demo", "2026-03-06", "16:00"),
        ]
    )
]
CARDS = [
    {"id": f"c{i + 1}", "title": t, "column": col}
    for i, (t, col) in enumerate(
        [
            ("Write report", "todo"),
            ("Book venue", "todo"),
            ("Fix login bug", "doing"),
            ("Review slides", "doing"),
            ("Order supplies", "todo"),
            ("Plan offsite", "done"),
        ]
    )
]
FORMS: dict[str, Any] = {
    "contact": {
        "title": "Contact us",
        "fields": [
            {"name": "name", "label": "Name", "type": "text"},
            {"name": "email", "label": "Email", "type": "text"},
            {"name": "topic", "label": "Topic", "type": "select", "options": ["Billing", "Support", "Sales"]},
            {"name": "message", "label": "Message", "type": "textarea"},
        ],
    },
    "signup": {
        "title": "Newsletter sign-up",
        "fields": [
            {"name": "name", "label": "Name", "type": "text"},
            {"name": "plan", "label": "Plan", "type": "radio", "options": ["Free", "Pro", "Team"]},
            {"name": "newsletter", "label": "Send news", "type": "checkbox"},
        ],
    },
    "settings": {
        "title": "Speaker settings",
        "fields": [
            {"name": "volume", "label": "Volume", "type": "range", "min": 0, "max": 100},
            {"name": "device", "label": "Device name", "type": "text"},
        ],
    },
}


def web(start: str, **apps: Any) -> dict[str, Any]:
    return {"start_url": start, "apps": apps}


def shop() -> dict[str, Any]:
    return {"products": PRODUCTS}
