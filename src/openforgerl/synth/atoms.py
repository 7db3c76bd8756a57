"""Atoms: (precondition on the world, gold actions, checks, instruction template), tau2-style.

- `create`: a write tool with slot values; a parameter with a `ref` is filled from a record found by a
  lookup tool first (`contacts_find` → `mail_send.to`, `mail_search` → `mail_reply.id`);
- `update` / `delete` / `move`: a record named by its label, found by a lookup, changed by id;
- `answer`: a field of a record, looked up and submitted with the final tool;
- `impossible`: a change to a record that does not exist; the gold looks and refuses.
Worlds are the environment's fixtures plus generated records; `dup` adds a same-label twin.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from openforgerl.synth import vocab
from openforgerl.synth.toolenv import Collection, Param, Tool, ToolEnv
from openforgerl.tasks.draft import Action

__all__ = ["NOT_FOUND", "Atom", "Ctx", "any_atom", "impossible_atom", "items_of", "sample_world"]

NOT_FOUND = "NOT FOUND"


@dataclass
class Atom:
    family: str
    instruction: str
    actions: list[Action]
    checks: list[dict[str, Any]]
    slots: list[str] = field(default_factory=list)
    refs: list[tuple[int, Any]] = field(default_factory=list)
    """(action index, value): the value must appear in the result of an earlier gold call."""
    forbids: list[str] = field(default_factory=list)


# --- the world ------------------------------------------------------------------------------------


def _later(dt: str, rng: random.Random) -> str:
    hour, minute = int(dt[11:13]), int(dt[14:16])
    total = hour * 60 + minute + rng.choice((30, 60, 90))
    return f"{dt[:11]}{min(total // 60, 23):02d}:{total % 60 if total // 60 < 24 else 59:02d}"


def _new_record(
    env: ToolEnv, c: Collection, items: list[dict[str, Any]], rng: random.Random, label: str | None = None
) -> dict[str, Any]:
    taken = {str(it.get(c.label)) for it in items}
    record: dict[str, Any] = {
        c.key: f"{c.id_prefix or c.list_name[:1]}{50 + len(items) + rng.randrange(900)}"
    }
    for f, kind in c.fields.items():
        record[f] = vocab.value(kind, rng, env.values)
    if "start" in record and "end" in record:
        record["end"] = _later(record["start"], rng)
    _email_from_name(record)
    while label is None and str(record.get(c.label)) in taken:
        record[c.label] = vocab.value(c.fields.get(c.label, "word"), rng, env.values)
    if label is not None:
        record[c.label] = label
    if any(it.get(c.key) == record[c.key] for it in items):
        record[c.key] = f"{record[c.key]}x{len(items)}"
    return {**c.defaults, **record}


def _email_from_name(record: dict[str, Any]) -> bool:
    """A person's generated address follows their name (Nora Blake → nora.blake@...)."""
    name, email = record.get("name"), record.get("email")
    if not (isinstance(name, str) and isinstance(email, str) and "@" in email and " " in name):
        return False
    record["email"] = f"{name.lower().replace(' ', '.')}@{email.split('@', 1)[1]}"
    return True


def sample_world(env: ToolEnv, rng: random.Random) -> dict[str, Any]:
    """The environment's fixtures plus 0–2 generated records per collection."""
    state = env.initial_state()
    for c in env.collections:
        items = state[c.service][c.list_name]
        for _ in range(rng.randrange(3)):
            items.append(_new_record(env, c, items, rng))
    return state


def items_of(state: dict[str, Any], dotted: str) -> list[dict[str, Any]]:
    service, _, lst = dotted.partition(".")
    value = state.get(service, {}).get(lst, [])
    return value if isinstance(value, list) else []


# --- lookups (the data flow) ----------------------------------------------------------------------


def _lookup(env: ToolEnv, c: Collection, label: str) -> list[Action]:
    """The read call(s) that find a record named `label` and return its id."""
    for kind in ("search", "list"):
        for t in env.tools:
            if t.collection != c.name or t.kind != kind:
                continue
            required = [p for p in t.params if p.required]
            if kind == "search" and len(required) == 1 and required[0].type == "string":
                return [Action(t.name, {required[0].name: label})]
            if kind == "list" and not required:
                return [Action(t.name, {})]
    return []


def _get(env: ToolEnv, c: Collection, record: dict[str, Any]) -> list[Action]:
    for t in env.tools:
        if t.collection == c.name and t.kind == "get" and t.param(t.key) is not None:
            field_ = c.key if t.key in (c.key, "id") else t.key
            return [Action(t.name, {t.key: record.get(field_)})]
    return []


def _unique(items: list[dict[str, Any]], c: Collection) -> list[dict[str, Any]]:
    labels = [str(it.get(c.label)) for it in items]
    return [it for it, lab in zip(items, labels, strict=True) if labels.count(lab) == 1 and lab]


def _phrase(p: Param | None, c: Collection, record: dict[str, Any], field_: str, dup_field: str = "") -> str:
    template = p.ref_phrase if p is not None and p.ref else 'the {entity} "{label}"'
    text = template.format(field=field_, entity=c.noun, label=record.get(c.label, ""))
    if dup_field:
        text += f' (the one whose {dup_field} is "{record[dup_field]}")'
    return text


@dataclass
class Ctx:
    env: ToolEnv
    state: dict[str, Any]
    rng: random.Random
    used: set[str] = field(default_factory=set)
    """Record ids already targeted by an atom of this task."""


def _pick(ctx: Ctx, c: Collection, dup: bool) -> tuple[dict[str, Any], str] | None:
    """A record to target (label unique in the world), and the disambiguating field when `dup`."""
    items = items_of(ctx.state, c.name)
    choices = [it for it in _unique(items, c) if it.get(c.key) not in ctx.used]
    if not choices:
        return None
    record = ctx.rng.choice(choices)
    ctx.used.add(str(record.get(c.key)))
    others = [f for f in c.fields if f != c.label and isinstance(record.get(f), str) and record.get(f)]
    if not dup or not others:
        return record, ""
    twin = _new_record(ctx.env, c, items, ctx.rng, label=str(record[c.label]))
    dup_field = ctx.rng.choice(others)
    if twin.get(dup_field) == record.get(dup_field):
        return record, ""
    items.append(twin)
    return record, dup_field


# --- atoms ----------------------------------------------------------------------------------------


def _literal(p: Param, ctx: Ctx) -> Any:
    kind = p.kind or vocab.guess_kind(p.name, p.type)
    if p.enum:
        return ctx.rng.choice(p.enum)
    if p.type == "boolean":
        return True
    if p.type in ("integer", "number"):
        return int(vocab.value("number", ctx.rng))
    one = vocab.value(kind, ctx.rng, ctx.env.values)
    return [one] if p.type == "array" else one


def _text(v: Any) -> str:
    return " and ".join(map(str, v)) if isinstance(v, list) else str(v)


def _check_fields(tool: Tool, args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    match: dict[str, Any] = {}
    contains: dict[str, Any] = {}
    for k, v in args.items():
        target = tool.fields.get(k, k)
        p = tool.param(k)
        long = isinstance(v, str) and (len(v) > 40 or (p is not None and p.kind == "sentence"))
        (contains if long else match)[target] = v
    return match | dict(tool.sets), contains


def _render(tool: Tool, slots: dict[str, str], quoted: set[str], generic: str, rng: random.Random) -> str:
    """A template of the tool whose slots are all filled (else `generic`); extra filled slots are appended."""
    usable = [t for t in tool.templates if set(re.findall(r"{(\w+)}", t)) <= set(slots)]
    if not usable:
        return generic
    template = rng.choice(usable)
    covered = set(re.findall(r"{(\w+)}", template))
    rest = [
        f'its {k} to "{v}"' if k in quoted else f"its {k} to {v}"
        for k, v in slots.items()
        if k not in covered
    ]
    return template.format(**slots) + (f" Set {' and '.join(rest)}." if rest else "")


def _verb(tool: Tool) -> str:
    name = re.sub(r"([a-z])([A-Z])", r"\1_\2", tool.name)
    lst = tool.collection.split(".")[-1]
    nouns = {tool.service, lst, lst.rstrip("s"), "item", "items", "record"}
    words = [w.lower() for w in re.split(r"[_\W]+", name) if w and w.lower() not in nouns]
    return words[0] if words else tool.kind


def _fill(
    tool: Tool, ctx: Ctx, atom: Atom, slots: dict[str, str], quoted: set[str], args: dict[str, Any], dup: bool
) -> bool:
    for p in tool.params:
        if p.kind == "skip" or p.name in args or (not p.required and ctx.rng.random() < 0.5):
            continue
        ref_c = ctx.env.collection(p.ref.rsplit(".", 1)[0]) if p.ref else None
        ref_field = p.ref.rsplit(".", 1)[-1] if p.ref else ""
        if ref_c is not None and (ref_field == ref_c.key or ctx.rng.random() < 0.6):
            got = _pick(ctx, ref_c, dup)
            lookup = _lookup(ctx.env, ref_c, str(got[0].get(ref_c.label))) if got else []
            if not got or not lookup:
                return False
            record, dup_field = got
            value = record.get(ref_field)
            atom.actions += lookup
            atom.refs.append((-1, value))
            args[p.name] = [value] if p.type == "array" else value
            slots[p.name] = _phrase(p, ref_c, record, ref_field, dup_field)
            atom.slots += [str(record.get(ref_c.label))] + ([str(record[dup_field])] if dup_field else [])
            continue
        if ref_field == "id":
            return False  # an id cannot be made up
        args[p.name] = _literal(p, ctx)
        slots[p.name] = _text(args[p.name])
        quoted.add(p.name)
        atom.slots.append(_text(args[p.name]))
    if _email_from_name(args):
        slots["email"] = args["email"]
        atom.slots = [s for s in atom.slots if "@" not in s] + [args["email"]]
    if "start" in args and "end" in args and isinstance(args["start"], str):
        args["end"] = _later(args["start"], ctx.rng)
        slots["end"] = args["end"]
        atom.slots = [s for s in atom.slots if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d", s)] + [
            args["start"],
            args["end"],
        ]
    return True


def create_atom(tool: Tool, ctx: Ctx, dup: bool) -> Atom | None:
    atom = Atom(tool.name, "", [], [], forbids=list(tool.forbids))
    slots: dict[str, str] = {}
    quoted: set[str] = set()
    args: dict[str, Any] = {}
    if not _fill(tool, ctx, atom, slots, quoted, args, dup):
        return None
    atom.actions.append(Action(tool.name, args))
    atom.refs = [(len(atom.actions) - 1, v) for _, v in atom.refs]
    described = " and ".join(f'{k} "{v}"' if k in quoted else f"the {k} of {v}" for k, v in slots.items())
    generic = (
        f"{_verb(tool).capitalize()} a new {_noun(ctx.env, tool)}{' with ' + described if described else ''}."
    )
    atom.instruction = _render(tool, slots, quoted, generic, ctx.rng)
    if tool.collection == "files":
        atom.checks = [
            {"kind": "file", "name": "file_written", "path": args["path"], "equals": args["content"]}
        ]
    else:
        match, contains = _check_fields(tool, args)
        atom.checks = [
            {"kind": "record", "name": f"{tool.name}_done", "collection": tool.collection, "match": match}
            | ({"contains": contains} if contains else {})
        ]
    if dup and not any("the one whose" in s for s in slots.values()):
        return None
    return atom


def _noun(env: ToolEnv, tool: Tool) -> str:
    c = env.collection(tool.collection)
    return c.noun if c else (tool.collection.split(".")[-1].rstrip("s") or "item")


def _update(tool: Tool, ctx: Ctx, atom: Atom, c: Collection, rid: Any, phrase: str) -> dict[str, Any] | None:
    """The update's arguments (a ref such as lend → member adds its lookup), instruction and check."""
    slots: dict[str, str] = {}
    quoted: set[str] = set()
    args = {tool.key: rid}
    if not _fill(tool, ctx, atom, slots, quoted, args, False):
        return None
    changes = {k: v for k, v in args.items() if k != tool.key}
    if not changes and not tool.sets:
        return None
    described = " and ".join(
        f'set its {k} to "{v}"' if k in quoted else f"set its {k} to {v}" for k, v in slots.items()
    )
    generic = f"Update {phrase}: {described}." if changes else f"{_verb(tool).capitalize()} {phrase}."
    atom.instruction = _render(tool, {"id": phrase, **slots}, quoted, generic, ctx.rng)
    match, contains = _check_fields(tool, changes)
    atom.checks = [
        {"kind": "record", "name": f"{tool.name}_done", "collection": c.name, "match": {c.key: rid, **match}}
        | ({"contains": contains} if contains else {})
    ]
    atom.refs = [(len(atom.actions), v) for _, v in atom.refs]
    return args


def change_atom(tool: Tool, ctx: Ctx, dup: bool) -> Atom | None:
    """update / delete / move of a record named by its label."""
    c = ctx.env.collection(tool.collection)
    got = _pick(ctx, c, dup) if c else None
    if c is None or got is None:
        return None
    record, dup_field = got
    lookup = _lookup(ctx.env, c, str(record.get(c.label)))
    if not lookup:
        return None
    rid = record.get(c.key)
    phrase = _phrase(tool.param(tool.key), c, record, c.key, dup_field)
    atom = Atom(
        tool.name,
        "",
        list(lookup),
        [],
        [str(record.get(c.label))] + ([str(record[dup_field])] if dup_field else []),
    )
    if tool.kind == "update":
        update = _update(tool, ctx, atom, c, rid, phrase)
        if update is None:
            return None
        args = update
    else:
        atom.instruction = _render(
            tool, {"id": phrase}, set(), f"{_verb(tool).capitalize()} {phrase}.", ctx.rng
        )
        n_left = len(items_of(ctx.state, c.name)) - 1
        atom.checks = [
            {"kind": "no_record", "name": f"{tool.name}_gone", "collection": c.name, "match": {c.key: rid}},
            {
                "kind": "record",
                "name": f"{tool.name}_others_kept",
                "collection": c.name,
                "count": n_left,
                "safety": True,
            },
        ]
        if tool.kind == "move":
            atom.checks.append(
                {
                    "kind": "record",
                    "name": f"{tool.name}_moved",
                    "collection": tool.target,
                    "match": {c.key: rid},
                }
            )
        args = {tool.key: rid}
    atom.actions.append(Action(tool.name, args))
    atom.refs.append((len(atom.actions) - 1, rid))
    return atom


_FIELD_WORDS = {"from": "sender", "to": "recipient", "start": "start time", "end": "end time", "body": "text"}


def answer_atom(final: Tool, ctx: Ctx, dup: bool) -> Atom | None:
    readable = [c for c in ctx.env.collections if _lookup(ctx.env, c, "x")]
    if not readable:
        return None
    c = ctx.rng.choice(readable)
    items = items_of(ctx.state, c.name)
    fields_ = [f for f in c.fields if f != c.label]
    ctx.rng.shuffle(fields_)
    for f in fields_:
        values = [str(it.get(f, "")) for it in items]
        pool = [
            it
            for it in _unique(items, c)
            if 3 <= len(str(it.get(f, ""))) <= 40
            and values.count(str(it.get(f))) == 1
            and it.get(c.key) not in ctx.used
        ]
        if pool:
            break
    else:
        return None
    record = ctx.rng.choice(pool)
    ctx.used.add(str(record.get(c.key)))
    value = str(record[f])
    label = str(record.get(c.label))
    actions = _lookup(ctx.env, c, label) + _get(ctx.env, c, record)
    answer_param = next((p.name for p in final.params if p.required), "answer")
    actions.append(Action(final.name, {answer_param: value}))
    word = _FIELD_WORDS.get(f, f.replace("_", " "))
    text = (
        f'What is the {word} of the {c.noun} "{label}"? Look it up and submit just the {word} as the answer.'
    )
    return Atom(
        f"answer:{c.name}.{f}",
        text,
        actions,
        [{"kind": "answer", "name": "answer_correct", "contains": value}],
        [label],
        refs=[(len(actions) - 1, value)],
    )


def impossible_atom(tool: Tool, ctx: Ctx, final: Tool) -> Atom | None:
    """Change a record that does not exist: the gold looks, finds nothing, and refuses."""
    c = ctx.env.collection(tool.collection)
    if c is None:
        return None
    items = items_of(ctx.state, c.name)
    ghost = _new_record(ctx.env, c, items, ctx.rng)
    label = str(ghost.get(c.label))
    lookup = _lookup(ctx.env, c, label)
    if not lookup:
        return None
    phrase = _phrase(None, c, ghost, c.key)
    verb = {"update": "Update", "delete": "Delete"}.get(tool.kind, _verb(tool).capitalize())
    change = next(
        (
            p
            for p in tool.params
            if p.name != tool.key and not p.ref and p.kind != "skip" and p.type == "string"
        ),
        None,
    )
    value = _text(_literal(change, ctx)) if change is not None and tool.kind == "update" else ""
    what = f': set its {change.name} to "{value}"' if change is not None and value else ""
    text = (
        f"{verb} {phrase}{what}. If there is no such {c.noun}, change nothing and submit the answer "
        f'"{NOT_FOUND}".'
    )
    answer_param = next((p.name for p in final.params if p.required), "answer")
    return Atom(
        f"impossible:{tool.name}",
        text,
        [*lookup, Action(final.name, {answer_param: NOT_FOUND})],
        [{"kind": "answer", "name": "refused", "contains": NOT_FOUND}],
        [label, NOT_FOUND] + ([value] if value else []),
    )


def any_atom(ctx: Ctx, dup: bool) -> Atom | None:
    writes = [t for t in ctx.env.tools if t.effect == "write"]
    final = next((t for t in ctx.env.tools if t.effect == "final"), None)
    choices: list[Tool] = list(writes) + ([final] if final else [])
    tool = ctx.rng.choice(choices)
    if tool.effect == "final":
        return answer_atom(tool, ctx, dup)
    if tool.kind == "create":
        return create_atom(tool, ctx, dup)
    if tool.kind in ("update", "delete", "move"):
        return change_atom(tool, ctx, dup)
    return None
