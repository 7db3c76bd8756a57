"""The shared fixture world (`world.py`'s state): one small office (mail, calendar, contacts, KB, to-dos,
notes). Every task of the Claw and GUI suites and of synthesis starts from a copy, so the distractors are
realistic and ids are stable."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["ME", "base_fixtures"]

ME = "alex.morgan@acme.io"

CONTACTS = [
    {"id": "c1", "name": "Bob Chen", "email": "bob.chen@acme.io", "phone": "+1-555-0101", "company": "Acme"},
    {
        "id": "c2",
        "name": "Priya Natarajan",
        "email": "priya@northwind.com",
        "phone": "+1-555-0142",
        "company": "Northwind",
    },
    {
        "id": "c3",
        "name": "Dana Whitfield",
        "email": "dana.w@acme.io",
        "phone": "+1-555-0177",
        "company": "Acme",
    },
    {
        "id": "c4",
        "name": "Luis Ortega",
        "email": "luis.ortega@globex.com",
        "phone": "+1-555-0199",
        "company": "Globex",
    },
    {
        "id": "c5",
        "name": "Mei Tanaka",
        "email": "mei@tanaka-design.jp",
        "phone": "+81-3-5555-0100",
        "company": "Tanaka Design",
    },
    {
        "id": "c6",
        "name": "Carol Diaz",
        "email": "carol.diaz@acme.io",
        "phone": "+1-555-0123",
        "company": "Acme",
    },
]

INBOX = [
    {
        "id": "m1",
        "from": "dana.w@acme.io",
        "to": ME,
        "subject": "Q2 budget numbers",
        "date": "2026-02-27T16:02",
        "read": False,
        "body": "Hi Alex, can you confirm the Q2 marketing budget is still $48,000? Thanks, Dana",
    },
    {
        "id": "m2",
        "from": "carol.diaz@acme.io",
        "to": ME,
        "subject": "Meeting request: vendor review",
        "date": "2026-02-28T10:15",
        "read": False,
        "body": (
            "Could we meet on 2026-03-04 from 10:00 to 11:00 to "
            "review the vendor shortlist? Room Maple works for me."
        ),
    },
    {
        "id": "m3",
        "from": "news@techweekly.com",
        "to": ME,
        "subject": "Tech Weekly #112",
        "date": "2026-03-01T07:00",
        "read": False,
        "body": "This week: chips, clouds and a new JavaScript framework. Unsubscribe any time.",
    },
    {
        "id": "m4",
        "from": "deals@shopmart.com",
        "to": ME,
        "subject": "Flash sale: 40% off",
        "date": "2026-03-01T08:30",
        "read": False,
        "body": "Our biggest flash sale of the season ends tonight. Unsubscribe any time.",
    },
    {
        "id": "m5",
        "from": "luis.ortega@globex.com",
        "to": ME,
        "subject": "Action items from Monday",
        "date": "2026-03-01T18:40",
        "read": False,
        "body": (
            "Hi Alex, action items:\n1. Update the onboarding doc\n2. Book the offsite venue\n"
            "3. Send the Q1 report to finance\nLuis"
        ),
    },
    {
        "id": "m6",
        "from": "sam.lee@example.org",
        "to": ME,
        "subject": "Password reset not working",
        "date": "2026-03-02T08:05",
        "read": False,
        "body": (
            "Hello, I tried to reset my password yesterday but "
            "the link says it expired. What should I do? Sam"
        ),
    },
    {
        "id": "m7",
        "from": "priya@northwind.com",
        "to": ME,
        "subject": "Lunch on Thursday?",
        "date": "2026-03-02T08:20",
        "read": False,
        "body": "Are you free for lunch on Thursday 2026-03-05 at 12:30? The usual place. Priya",
    },
    {
        "id": "m8",
        "from": "mei@tanaka-design.jp",
        "to": ME,
        "subject": "Logo drafts",
        "date": "2026-03-02T08:45",
        "read": False,
        "body": "Attached are three logo drafts. Could we discuss them on 2026-03-06 from 15:00 to 15:30?",
    },
]

EVENTS = [
    {
        "id": "e1",
        "title": "Team standup",
        "start": "2026-03-03T09:30",
        "end": "2026-03-03T09:45",
        "attendees": ["bob.chen@acme.io", "dana.w@acme.io"],
        "location": "Zoom",
    },
    {
        "id": "e2",
        "title": "Team lunch",
        "start": "2026-03-06T12:00",
        "end": "2026-03-06T13:00",
        "attendees": ["bob.chen@acme.io", "carol.diaz@acme.io"],
        "location": "Cafe Roma",
    },
    {
        "id": "e3",
        "title": "1:1 with Luis",
        "start": "2026-03-04T15:00",
        "end": "2026-03-04T15:30",
        "attendees": ["luis.ortega@globex.com"],
        "location": "Zoom",
    },
    {
        "id": "e4",
        "title": "Dentist",
        "start": "2026-03-05T08:00",
        "end": "2026-03-05T09:00",
        "attendees": [],
        "location": "Dr. Patel",
    },
    {
        "id": "e5",
        "title": "Quarterly planning",
        "start": "2026-03-09T13:00",
        "end": "2026-03-09T15:00",
        "attendees": ["dana.w@acme.io", "carol.diaz@acme.io", "bob.chen@acme.io"],
        "location": "Room Oak",
    },
]

ARTICLES = [
    {
        "id": "kb1",
        "title": "VPN setup",
        "tags": "network remote access",
        "body": "Install the GlobalProtect client and connect to the portal vpn.acme.io with your SSO login.",
    },
    {
        "id": "kb2",
        "title": "Password reset",
        "tags": "account login",
        "body": (
            "Use self-service at https://id.acme.io/reset. Reset links "
            "expire after 30 minutes; request a new link if it expired."
        ),
    },
    {
        "id": "kb3",
        "title": "Expense policy",
        "tags": "finance reimbursement meals",
        "body": "Meals are reimbursed up to $60 per day. Receipts are required for any expense over $25.",
    },
    {
        "id": "kb4",
        "title": "Office Wi-Fi",
        "tags": "network wireless guest",
        "body": (
            "The guest network is AcmeGuest. Its password rotates "
            "every Monday; reception has the current one."
        ),
    },
    {
        "id": "kb5",
        "title": "Parental leave",
        "tags": "hr benefits",
        "body": "Employees get 16 weeks of paid parental leave, to be taken within the first year.",
    },
    {
        "id": "kb6",
        "title": "Printer troubleshooting",
        "tags": "office hardware",
        "body": (
            "If the 3rd floor printer jams, open tray B and remove "
            "the paper, then power-cycle it. Help desk ext. 4410."
        ),
    },
]

TODOS = [
    {"id": "t1", "title": "Pay rent", "due": "2026-03-01", "done": False},
    {"id": "t2", "title": "Call the plumber", "due": "", "done": False},
    {"id": "t3", "title": "Renew gym membership", "due": "2026-03-15", "done": False},
    {"id": "t4", "title": "Water the plants", "due": "", "done": True},
]

NOTES = [
    {"id": "n1", "title": "Groceries", "content": "eggs, milk, coffee"},
    {"id": "n2", "title": "Book ideas", "content": "The Left Hand of Darkness; Piranesi"},
]


def base_fixtures(*services: str) -> dict[str, dict[str, Any]]:
    """Deep copies of the shared world for the given services (all when none are named)."""
    world: dict[str, dict[str, Any]] = {
        "mail": {"me": ME, "inbox": INBOX, "sent": [], "drafts": [], "archive": []},
        "calendar": {"events": EVENTS},
        "contacts": {"contacts": CONTACTS},
        "kb": {"articles": ARTICLES},
        "todo": {"items": TODOS},
        "notes": {"notes": NOTES},
    }
    chosen = services or tuple(world)
    return copy.deepcopy({s: world[s] for s in chosen if s in world})
