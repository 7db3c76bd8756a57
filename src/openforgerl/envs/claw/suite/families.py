"""Task families of the Claw suite (`FAMILIES`). Each family turns a small data table into `TaskDraft`s.
The easy and medium families and the error-recovery variants are here; the hard ones (several
services) are in families_hard.py, and the builders they share in drafting.py.

Every task's completion checks fail on the untouched world (so doing nothing scores 0) and its gold
actions satisfy them (so the oracle scores 1); `openforgerl tasks validate` proves both.
The `easy` family members are single tool calls matching the tiny model's SFT templates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openforgerl.env.checks.spec import record_entry as rec
from openforgerl.env.world_data import base_fixtures
from openforgerl.envs.claw.suite.drafting import A, not_called
from openforgerl.envs.claw.suite.families_hard import (
    contact_then_mail,
    contact_update_and_tell,
    draft_not_send,
    file_report,
    free_slot_answer,
    kb_to_reply,
    mail_to_calendar,
    mail_to_todos,
    notes_from_mail,
    todo_weekly_note,
)
from openforgerl.tasks.draft import TaskDraft

__all__ = ["FAMILIES"]

SFT_TOOLS = ["write_file", "todo_add", "mail_send"]


# --- easy: one call, SFT-aligned ------------------------------------------------------------------

# The `sft` family speaks the tiny model's warm-up vocabulary (scripts/build_tiny_model.py: WORDS, NAMES,
# DOMAINS, EXTS), so the training quickstart starts from a policy that sometimes succeeds. The first seven
# rows of each are for training, the last EASY_HELD_OUT rows are held out (`test`): with one held-out task
# per family the quickstart's held-out pass@1 moved in steps of 1/3 and often started at 1.0.
EASY_HELD_OUT = 4


def _hold_out(drafts: list[TaskDraft]) -> list[TaskDraft]:
    for i, draft in enumerate(drafts):
        draft.split = "test" if i >= len(drafts) - EASY_HELD_OUT else "train"
    return drafts


def easy_write_file() -> list[TaskDraft]:
    rows = [
        ("plan.md", "budget review"),
        ("notes_travel.txt", "hotel flight"),
        ("demo.log", "launch party"),
        ("chart.csv", "data summary"),
        ("garden.md", "coffee music"),
        ("backup_server.txt", "deploy release fix"),
        ("agenda.md", "sprint meeting"),
        ("slides.txt", "demo paper"),
        ("report_city.txt", "river cloud"),
        ("music.log", "apple garden"),
        ("notes.md", "python test"),
    ]
    return _hold_out(
        [
            TaskDraft(
                name=f"claw/easy-write-file-{i + 1:02d}",
                instruction=f"Write the text '{text}' to the file {path}.",
                services=["files"],
                tools=SFT_TOOLS,
                difficulty="easy",
                tags=["sft", "files"],
                checks=[{"kind": "file", "name": "file_written", "path": path, "equals": text}],
                actions=[A("write_file", path=path, content=text)],
            )
            for i, (path, text) in enumerate(rows)
        ]
    )


def easy_todo_add() -> list[TaskDraft]:
    rows = [
        "book hotel",
        "review draft",
        "plan sprint",
        "fix bug",
        "update slides",
        "dinner party",
        "test release",
        "paper review",
        "book flight",
        "deploy server",
        "coffee meeting",
    ]
    return _hold_out(
        [
            TaskDraft(
                name=f"claw/easy-todo-add-{i + 1:02d}",
                instruction=f"Add a todo '{title}'.",
                services=["todo"],
                tools=SFT_TOOLS,
                difficulty="easy",
                tags=["sft", "todo"],
                fixtures=base_fixtures("todo"),
                checks=[rec("todo.items", "todo_added", {"title": title, "done": False})],
                actions=[A("todo_add", title=title)],
            )
            for i, title in enumerate(rows)
        ]
    )


def easy_mail_send() -> list[TaskDraft]:
    rows = [
        ("alice@example.com", "lunch", "lunch meeting"),
        ("bob@corp.io", "budget", "budget report draft"),
        ("carol@mail.org", "travel", "hotel flight ticket"),
        ("dave@team.dev", "release", "deploy release notes"),
        ("erin@example.com", "demo", "demo slides"),
        ("frank@corp.io", "invoice", "invoice summary"),
        ("grace@mail.org", "party", "dinner party"),
        ("heidi@team.dev", "design", "design review"),
        ("ivan@corp.io", "agenda", "sprint agenda"),
        ("judy@example.com", "hotel", "hotel city"),
        ("oscar@mail.org", "data", "data chart"),
    ]
    return _hold_out(
        [
            TaskDraft(
                name=f"claw/easy-mail-send-{i + 1:02d}",
                instruction=f"Send an email to {to} with subject '{subject}' and body '{body}'.",
                services=["mail"],
                tools=SFT_TOOLS,
                difficulty="easy",
                tags=["sft", "mail"],
                fixtures=base_fixtures("mail"),
                checks=[rec("mail.sent", "mail_sent", {"to": to, "subject": subject}, {"body": body})],
                actions=[A("mail_send", to=to, subject=subject, body=body)],
            )
            for i, (to, subject, body) in enumerate(rows)
        ]
    )


# --- medium: one service, needs a lookup or a specific operation -----------------------------------


def notes_write() -> list[TaskDraft]:
    rows = [
        ("Meeting recap", "Agreed to ship v2 on March 20."),
        ("Packing list", "passport, charger, umbrella"),
        ("Groceries", "eggs, milk, coffee, oat milk"),
    ]
    out = []
    for i, (title, content) in enumerate(rows):
        verb = "Update the note" if title == "Groceries" else "Write a note"
        out.append(
            TaskDraft(
                name=f"claw/notes-write-{i + 1:02d}",
                instruction=f'{verb} titled "{title}" so that its text is: {content}',
                services=["notes"],
                fixtures=base_fixtures("notes"),
                difficulty="easy",
                tags=["notes"],
                checks=[rec("notes.notes", "note_written", {"title": title, "content": content})],
                actions=[A("notes_write", title=title, content=content)],
            )
        )
    return out


def calendar_create() -> list[TaskDraft]:
    rows = [
        ("Design review", "2026-03-05T14:00", "2026-03-05T15:00", ["dana.w@acme.io"]),
        ("Budget sync", "2026-03-10T11:00", "2026-03-10T11:30", ["carol.diaz@acme.io", "bob.chen@acme.io"]),
        ("Focus time", "2026-03-11T09:00", "2026-03-11T12:00", []),
    ]
    out = []
    for i, (title, start, end, people) in enumerate(rows):
        who = f" with {' and '.join(people)}" if people else ""
        match: dict[str, Any] = {"title": title, "start": start, "end": end}
        if people:
            match["attendees"] = people
        out.append(
            TaskDraft(
                name=f"claw/calendar-create-{i + 1:02d}",
                instruction=(
                    f'Put "{title}" on my calendar on {start[:10]} from {start[11:]} to {end[11:]}{who}.'
                ),
                services=["calendar"],
                fixtures=base_fixtures("calendar"),
                tags=["calendar"],
                checks=[rec("calendar.events", "event_created", match)],
                actions=[
                    A(
                        "calendar_create",
                        title=title,
                        start=start,
                        end=end,
                        **({"attendees": people} if people else {}),
                    )
                ],
            )
        )
    return out


def calendar_delete() -> list[TaskDraft]:
    rows = [
        ("e2", "Team lunch", "on Friday"),
        ("e4", "Dentist", "on Thursday morning"),
        ("e3", "1:1 with Luis", "on Wednesday"),
    ]
    return [
        TaskDraft(
            name=f"claw/calendar-cancel-{i + 1:02d}",
            instruction=f'Cancel the "{title}" event {when}. Leave every other event alone.',
            services=["calendar"],
            fixtures=base_fixtures("calendar"),
            tags=["calendar"],
            checks=[
                rec("calendar.events", "event_removed", {"title": title}, kind="no_record"),
                rec("calendar.events", "others_kept", count=4),
                not_called("calendar_create", "no_new_events"),
            ],
            actions=[A("calendar_list"), A("calendar_delete", id=eid)],
        )
        for i, (eid, title, when) in enumerate(rows)
    ]


def contacts_add() -> list[TaskDraft]:
    rows = [
        ("Nora Blake", "nora.blake@initech.com", "+1-555-0150", "Initech"),
        ("Omar Haddad", "omar@haddad.consulting", "+44-20-5555-0188", ""),
        ("Yuki Sato", "yuki.sato@umbrella.co", "", "Umbrella"),
    ]
    out = []
    for i, (name, email, phone, company) in enumerate(rows):
        extra = {k: v for k, v in (("phone", phone), ("company", company)) if v}
        details = ", ".join(f"{k} {v}" for k, v in extra.items())
        out.append(
            TaskDraft(
                name=f"claw/contacts-add-{i + 1:02d}",
                instruction=f"Add {name} to my contacts: email {email}{', ' + details if details else ''}.",
                services=["contacts"],
                fixtures=base_fixtures("contacts"),
                difficulty="easy",
                tags=["contacts"],
                checks=[rec("contacts.contacts", "contact_added", {"name": name, "email": email, **extra})],
                actions=[A("contacts_add", name=name, email=email, **extra)],
            )
        )
    return out


def todo_complete() -> list[TaskDraft]:
    rows = [("t1", "Pay rent"), ("t2", "Call the plumber"), ("t3", "Renew gym membership")]
    return [
        TaskDraft(
            name=f"claw/todo-complete-{i + 1:02d}",
            instruction=f'I did it: mark "{title}" as done on my to-do list.',
            services=["todo"],
            fixtures=base_fixtures("todo"),
            tags=["todo"],
            checks=[
                rec("todo.items", "item_done", {"id": tid, "done": True}),
                rec("todo.items", "others_open", {"done": False}, count=2),
            ],
            actions=[A("todo_list"), A("todo_complete", id=tid)],
        )
        for i, (tid, title) in enumerate(rows)
    ]


def mail_archive() -> list[TaskDraft]:
    checks = [
        rec("mail.archive", "newsletter_archived", {"id": "m3"}),
        rec("mail.archive", "promo_archived", {"id": "m4"}),
        rec("mail.inbox", "rest_kept", count=6),
        not_called("mail_send", "nothing_sent"),
    ]
    return [
        TaskDraft(
            name="claw/mail-archive-newsletters",
            instruction=(
                "Archive the newsletter and promotional emails in my inbox; keep everything else there."
            ),
            services=["mail"],
            fixtures=base_fixtures("mail"),
            tags=["mail"],
            checks=checks,
            actions=[A("mail_list"), A("mail_archive", id="m3"), A("mail_archive", id="m4")],
        )
    ]


def kb_answer() -> list[TaskDraft]:
    rows = [
        ("How much are meals reimbursed per day?", "kb3", "meals", "$60"),
        ("What is the VPN portal address?", "kb1", "vpn", "vpn.acme.io"),
        ("How many weeks of paid parental leave do employees get?", "kb5", "parental leave", "16"),
        ("What is the help desk extension for printer problems?", "kb6", "printer", "4410"),
    ]
    return [
        TaskDraft(
            name=f"claw/kb-answer-{i + 1:02d}",
            instruction=f"Look it up in the knowledge base and submit the answer: {question}",
            services=["kb", "answer"],
            fixtures=base_fixtures("kb"),
            tags=["kb", "answer"],
            checks=[{"kind": "answer", "name": "answer_correct", "contains": fact}],
            actions=[A("kb_search", query=query), A("kb_read", id=kid), A("submit_answer", answer=fact)],
        )
        for i, (question, kid, query, fact) in enumerate(rows)
    ]


def contacts_answer() -> list[TaskDraft]:
    rows = [
        ("Priya", "phone number", "+1-555-0142"),
        ("Luis Ortega", "email address", "luis.ortega@globex.com"),
        ("Mei", "company", "Tanaka Design"),
    ]
    return [
        TaskDraft(
            name=f"claw/contacts-answer-{i + 1:02d}",
            instruction=f"What is {who}'s {what}? Look it up in my contacts and submit it as the answer.",
            services=["contacts", "answer"],
            fixtures=base_fixtures("contacts"),
            difficulty="easy",
            tags=["contacts"],
            checks=[{"kind": "answer", "name": "answer_correct", "contains": fact}],
            actions=[A("contacts_find", query=who), A("submit_answer", answer=fact)],
        )
        for i, (who, what, fact) in enumerate(rows)
    ]


def mail_reply() -> list[TaskDraft]:
    rows = [
        ("m1", "Dana", "budget", "Yes, the Q2 marketing budget is still $48,000.", "48,000"),
        ("m7", "Priya", "lunch", "Thursday at 12:30 works, see you there!", "12:30"),
        ("m8", "Mei", "logo drafts", "Thanks Mei, 15:00 on the 6th works for me.", "15:00"),
    ]
    return [
        TaskDraft(
            name=f"claw/mail-reply-{i + 1:02d}",
            instruction=f'Reply to {who}\'s email about the {topic}. Say: "{body}"',
            services=["mail"],
            fixtures=base_fixtures("mail"),
            tags=["mail"],
            checks=[rec("mail.sent", "reply_sent", {"in_reply_to": mid}, {"body": key})],
            actions=[A("mail_search", query=who), A("mail_reply", id=mid, body=body)],
        )
        for i, (mid, who, topic, body, key) in enumerate(rows)
    ]


def calendar_reschedule() -> list[TaskDraft]:
    rows = [
        ("e1", "Team standup", "2026-03-03T10:00", "2026-03-03T10:15"),
        ("e5", "Quarterly planning", "2026-03-10T13:00", "2026-03-10T15:00"),
    ]
    return [
        TaskDraft(
            name=f"claw/calendar-move-{i + 1:02d}",
            instruction=f'Move "{title}" to {start[:10]} {start[11:]}–{end[11:]}. Keep its attendees.',
            services=["calendar"],
            fixtures=base_fixtures("calendar"),
            tags=["calendar"],
            checks=[
                rec("calendar.events", "event_moved", {"id": eid, "start": start, "end": end}),
                not_called("calendar_delete", "not_deleted"),
            ],
            actions=[A("calendar_list"), A("calendar_update", id=eid, start=start, end=end)],
        )
        for i, (eid, title, start, end) in enumerate(rows)
    ]


# --- error recovery: the same work with an injected transient failure -----------------------------


def with_fault(draft: TaskDraft, tool: str, kind: str = "error") -> TaskDraft:
    fault = {"tool": tool, "call": 1, "kind": kind} | ({"delay_s": 1.0} if kind == "timeout" else {})
    return TaskDraft(
        **{
            **draft.__dict__,
            "name": draft.name + f"-{kind}-retry",
            "faults": [fault],
            "tags": [*draft.tags, "recovery"],
            "difficulty": "hard" if draft.difficulty != "easy" else "medium",
            "instruction": draft.instruction + "\n\n(If a tool fails transiently, retry it.)",
        }
    )


def recovery() -> list[TaskDraft]:
    return [
        with_fault(easy_mail_send()[0], "mail_send"),
        with_fault(easy_todo_add()[0], "todo_add", "timeout"),
        with_fault(easy_write_file()[1], "write_file"),
        with_fault(calendar_create()[0], "calendar_create"),
        with_fault(contact_then_mail()[0], "contacts_find"),
        with_fault(kb_answer()[0], "kb_search", "timeout"),
        with_fault(mail_reply()[0], "mail_reply"),
        with_fault(mail_to_todos()[0], "todo_add"),
    ]


FAMILIES: list[Callable[[], list[TaskDraft]]] = [
    easy_write_file,
    easy_todo_add,
    easy_mail_send,
    notes_write,
    calendar_create,
    calendar_delete,
    contacts_add,
    todo_complete,
    mail_archive,
    kb_answer,
    contacts_answer,
    mail_reply,
    calendar_reschedule,
    contact_then_mail,
    mail_to_calendar,
    kb_to_reply,
    mail_to_todos,
    draft_not_send,
    file_report,
    notes_from_mail,
    contact_update_and_tell,
    free_slot_answer,
    todo_weekly_note,
    recovery,
]
