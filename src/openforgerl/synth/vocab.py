"""Value pools for slots: every generated value is drawn from here, by kind, with a seeded RNG.

Kinds are guessed from a parameter's name when the environment does not say (`guess_kind`). Values
are plain strings a checker can match verbatim, and the pools are large enough that 600 tasks rarely
repeat a combination.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

__all__ = ["POOLS", "guess_kind", "value"]

_FIRST = [
    "Nora",
    "Omar",
    "Yuki",
    "Ines",
    "Tomas",
    "Leila",
    "Marta",
    "Kofi",
    "Anya",
    "Ravi",
    "Sofia",
    "Jonas",
    "Amara",
    "Felix",
    "Hana",
    "Diego",
    "Elena",
    "Kenji",
    "Zara",
    "Pavel",
    "Lena",
    "Mateo",
    "Aisha",
    "Oskar",
]
_LAST = [
    "Blake",
    "Haddad",
    "Sato",
    "Moreau",
    "Novak",
    "Rahimi",
    "Kowalski",
    "Mensah",
    "Ivanova",
    "Iyer",
    "Lindqvist",
    "Okafor",
    "Brandt",
    "Costa",
    "Quinn",
    "Varga",
    "Silva",
    "Tanaka",
    "Hughes",
    "Weber",
]
_DOMAINS = ["initech.com", "umbrella.co", "hooli.io", "vandelay.net", "stark.dev", "wayne.org", "acme.io"]
_COMPANIES = [
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Stark Labs",
    "Wayne Group",
    "Globex",
    "Soylent",
    "Cyberdyne",
    "Tyrell",
    "Wonka",
    "Oscorp",
]
_TOPICS = [
    "budget review",
    "launch plan",
    "vendor shortlist",
    "hiring update",
    "offsite agenda",
    "Q3 roadmap",
    "security audit",
    "design critique",
    "customer feedback",
    "release notes",
    "travel plans",
    "board deck",
    "onboarding checklist",
    "pricing proposal",
    "sprint retro",
    "data migration",
    "holiday schedule",
    "support backlog",
    "contract renewal",
    "team dinner",
    "quarterly report",
    "API changes",
    "office move",
    "training session",
    "partner meeting",
    "user study",
]
_SENTENCES = [
    "The numbers are final and attached.",
    "Please review the draft by Friday.",
    "I moved the meeting to next week.",
    "The venue is booked for 40 people.",
    "Can you send me the latest figures?",
    "The release went out this morning.",
    "We agreed to ship version 2 in April.",
    "Thanks for the quick turnaround.",
    "The invoice was paid today.",
    "Let us sync after the demo.",
    "I added two items to the list.",
    "The contract needs one more signature.",
    "Lunch is on me this time.",
    "The server migration is complete.",
    "Please bring the printed handouts.",
    "I will be out of office on Monday.",
    "The client approved the mockups.",
    "Room booking confirmed for 3 pm.",
    "Budget is capped at 12,000 dollars.",
    "The survey closes on the 15th.",
    "Notes from the call are in the shared folder.",
    "Parking passes are at reception.",
    "Ticket 4821 is resolved.",
    "The new hire starts on the 9th.",
]
_TODOS = [
    "Renew passport",
    "Order printer toner",
    "Book dentist appointment",
    "Send thank-you cards",
    "Review pull request 88",
    "Back up laptop",
    "Call the insurance company",
    "Update the wiki page",
    "Pick up dry cleaning",
    "Schedule car service",
    "Pay electricity bill",
    "Water the garden",
    "File expense report",
    "Buy birthday gift",
    "Cancel old subscription",
    "Refill prescription",
    "Prepare slides for Monday",
    "Clean out the inbox",
    "Return library books",
    "Fix the bike brakes",
]
_PLACES = ["Room Maple", "Room Oak", "Cafe Roma", "Zoom", "Lobby", "Room Cedar", "Rooftop", "Library"]
_WORDS = ["alpha", "river", "cloud", "garden", "harbor", "maple", "orbit", "signal", "summit", "willow"]

POOLS: dict[str, list[str]] = {
    "person": [f"{f} {last}" for f in _FIRST for last in _LAST],
    "company": _COMPANIES,
    "subject": [t.capitalize() for t in _TOPICS],
    "title": [t.title() for t in _TOPICS],
    "sentence": _SENTENCES,
    "todo": _TODOS,
    "place": _PLACES,
    "word": _WORDS,
    "path": [
        f"{w}_{t.split()[0].lower()}.{ext}" for w in _WORDS for t in _TOPICS[:8] for ext in ("txt", "md")
    ],
    "phone": [f"+1-555-{n:04d}" for n in range(200, 400)],
    "date": [f"2026-03-{d:02d}" for d in range(3, 28)],
    "time": [f"{h:02d}:{m:02d}" for h in range(8, 18) for m in (0, 30)],
    "number": [str(n) for n in range(2, 200)],
}

_HINTS: Sequence[tuple[tuple[str, ...], str]] = (
    (("email", "to", "from", "address", "attendee", "recipient"), "email"),
    (("phone", "tel", "mobile"), "phone"),
    (("company", "org", "employer"), "company"),
    (("name", "author", "owner", "borrower", "user", "customer"), "person"),
    (("subject",), "subject"),
    (("title", "label", "tag", "category"), "title"),
    (("body", "content", "text", "message", "note", "description", "comment"), "sentence"),
    (("path", "file"), "path"),
    (("start", "end", "when", "time", "datetime", "due", "date"), "datetime"),
    (("place", "location", "room", "city"), "place"),
    (("count", "quantity", "amount", "price", "age", "size"), "number"),
)


def guess_kind(name: str, type_: str = "string") -> str:
    if type_ in ("integer", "number"):
        return "number"
    low = name.lower()
    for hints, kind in _HINTS:
        if any(h == low or low.endswith(h) or low.startswith(h) for h in hints):
            return kind
    return "word"


def value(kind: str, rng: random.Random, extra: Mapping[str, Sequence[str]] | None = None) -> str:
    """One value of `kind` (emails and datetimes are composed, the rest drawn from a pool)."""
    if extra and kind in extra:
        return str(rng.choice(list(extra[kind])))
    if kind == "email":
        first, last = rng.choice(_FIRST).lower(), rng.choice(_LAST).lower()
        return f"{first}.{last}@{rng.choice(_DOMAINS)}"
    if kind == "datetime":
        return f"{rng.choice(POOLS['date'])}T{rng.choice(POOLS['time'])}"
    return rng.choice(POOLS.get(kind, _WORDS))


# --- the tiny model's warm-up vocabulary ------------------------------------------------------------
# The same words, names, domains and extensions as `scripts/build_tiny_model.py` (WORDS, NAMES, DOMAINS,
# EXTS; `tests/synth/test_family_style.py` checks they stay equal): the 2.6 M warm-up model only copies
# values made of these tokens, so the family-style Claw environment
# (`envs.claw.synth.claw_family_env`) draws from them.
WARMUP_WORDS = (
    "alpha beta gamma delta report budget meeting lunch review draft notes plan launch sprint design "
    "invoice summary update agenda travel hotel flight ticket garden coffee music python server backup "
    "deploy release bug fix test party dinner book paper slides demo chart data city river cloud apple"
).split()
WARMUP_NAMES = (
    "alice bob carol dave erin frank grace heidi ivan judy mallory oscar peggy trent victor wendy".split()
)
WARMUP_DOMAINS = ["example.com", "corp.io", "mail.org", "team.dev"]
WARMUP_EXTS = ["txt", "md", "log", "csv"]


def warmup_pools(seed: int = 0) -> dict[str, list[str]]:
    """Value pools in the warm-up vocabulary: phrases of 1–3 words (as the warm-up data has them), file
    names `word[_word].ext`, addresses `name@domain`."""
    rng = random.Random(seed)
    one = list(WARMUP_WORDS)
    two = [f"{a} {b}" for a in WARMUP_WORDS for b in WARMUP_WORDS if a != b]
    three = [" ".join(rng.sample(WARMUP_WORDS, 3)) for _ in range(len(two))]
    phrases = one * (len(two) // len(one)) + two + three  # 1, 2 and 3 words equally often, as randint(1, 3)
    paths = [
        f"{a}{suffix}.{ext}"
        for a in WARMUP_WORDS
        for suffix in ["", *(f"_{b}" for b in WARMUP_WORDS[::3])]
        for ext in WARMUP_EXTS
    ]
    return {
        "sentence": phrases,
        "todo": phrases,
        "subject": one * (len(two) // len(one)) + two,
        "title": phrases,
        "path": paths,
        "email": [f"{n}@{d}" for n in WARMUP_NAMES for d in WARMUP_DOMAINS],
    }
