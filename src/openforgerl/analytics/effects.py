"""What a tool call does: its effect (read / write / final / other), its service and the resources it touches.

A static table, not a model: the Claw tools by their registry entry (`env.world_tools.TOOLS`: the command
verb decides), harness-native tools by name (Claude Code `Read`/`Edit`/`Bash`, Codex `shell` /
`apply_patch`, zero's `read_file`/`write_file`/`bash`, web fetch/search, `computer` actions), and shell
command lines by a small verb table (`cat`/`ls`/`grep`/`test` read; redirects, `sed -i`, `mv`, `rm`,
`git commit` write). A Claw tool called through an MCP prefix (`mcp__claw__mail_send`,
`claw__mail_send`, `claw.mail_send`) or through the shell CLI (`openforgerl-claw mail send --to ...`)
is normalised to the registry name, so every harness's calls land on one vocabulary.

Resources are strings `"<service>:<key>"`: the id/path/title argument (`files:notes.txt`,
`mail:m12`, `notes:Standup`), the recipient of a new mail (`mail:to:bob@x.io`), the title of a new
event; a list/search read touches `"<service>:*"` (the whole service).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from openforgerl.env.world_tools import TOOLS, ToolSpec, get_tool, normalize_tool

__all__ = ["Effect", "classify", "claw_tool_from_shell", "effect_of", "normalize_tool", "resources_of"]


class Effect(StrEnum):
    READ = "read"
    WRITE = "write"
    FINAL = "final"
    OTHER = "other"  # a tool the tables do not know (counted as a call, never as a read or a write)


_CLAW_READ_VERBS = {"read", "list", "search", "find"}
_BY_SERVICE_COMMAND = {(t.service, t.command): t for t in TOOLS}
_CLAW_PROGRAMS = ("openforgerl-claw", "openforgerl.envs.claw.cli")

# Harness-native tools, lower-cased name -> (effect, service)
_NATIVE: dict[str, tuple[Effect, str]] = {
    "read": (Effect.READ, "files"),
    "view": (Effect.READ, "files"),
    "glob": (Effect.READ, "files"),
    "grep": (Effect.READ, "files"),
    "ls": (Effect.READ, "files"),
    "list_directory": (Effect.READ, "files"),
    "read_many_files": (Effect.READ, "files"),
    "search_file_content": (Effect.READ, "files"),
    "write": (Effect.WRITE, "files"),
    "edit": (Effect.WRITE, "files"),
    "multiedit": (Effect.WRITE, "files"),
    "apply_patch": (Effect.WRITE, "files"),
    "notebookedit": (Effect.WRITE, "files"),
    "replace": (Effect.WRITE, "files"),
    "write_file": (Effect.WRITE, "files"),
    "read_file": (Effect.READ, "files"),
    "webfetch": (Effect.READ, "web"),
    "web_fetch": (Effect.READ, "web"),
    "websearch": (Effect.READ, "web"),
    "web_search": (Effect.READ, "web"),
    "google_web_search": (Effect.READ, "web"),
    "todowrite": (Effect.OTHER, "plan"),
    "update_plan": (Effect.OTHER, "plan"),
    "task": (Effect.OTHER, "agent"),
    "submit": (Effect.FINAL, "answer"),
    "final_answer": (Effect.FINAL, "answer"),
}
_SHELL_TOOLS = {
    "bash",
    "shell",
    "exec_command",
    "local_shell",
    "run_shell_command",
    "execute_bash",
    "terminal",
}
_COMPUTER_TOOLS = {"computer", "computer_use", "computer_call"}
_COMPUTER_READS = {"screenshot", "cursor_position", "wait", "zoom"}

_SHELL_READ = {
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "ls",
    "find",
    "grep",
    "rg",
    "egrep",
    "fgrep",
    "wc",
    "stat",
    "file",
    "test",
    "[",
    "diff",
    "tree",
    "pwd",
    "echo",
    "printf",
    "jq",
    "sort",
    "uniq",
    "cut",
    "awk",
    "du",
    "df",
    "which",
    "env",
    "date",
    "python",
    "python3",
    "pytest",
    "node",
    "true",
}
_SHELL_WRITE = {
    "rm",
    "mv",
    "cp",
    "mkdir",
    "touch",
    "chmod",
    "chown",
    "ln",
    "rmdir",
    "tee",
    "truncate",
    "dd",
    "install",
    "patch",
    "rsync",
}
_GIT_WRITE = {"commit", "add", "rm", "mv", "checkout", "reset", "merge", "rebase", "apply", "push", "stash"}
_REDIRECT = re.compile(r"(?<![0-9&])>>?\s*([^\s;&|]+)")
_ID_KEYS = ("id", "path", "title", "message_id", "event_id", "file_path", "filename", "notebook_path", "url")


def claw_tool_from_shell(command: str) -> tuple[str, dict[str, Any]] | None:
    """`openforgerl-claw mail send --to x --subject y` → ("mail_send", {"to": "x", "subject": "y"})."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for i, word in enumerate(words):
        if any(word.endswith(p) for p in _CLAW_PROGRAMS) and i + 2 < len(words):
            tool = _BY_SERVICE_COMMAND.get((words[i + 1], words[i + 2]))
            if tool is not None:
                return tool.name, _flags(tool, words[i + 3 :])
    return None


def _flags(tool: ToolSpec, words: list[str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    types = {p.name: p.type for p in tool.params}
    key: str | None = None
    for word in words:
        if word in ("||", "&&", ";", "|"):
            break
        if word.startswith("--"):
            key = word[2:].replace("-", "_")
            args[key] = True if types.get(key) == "boolean" else ([] if types.get(key) == "array" else "")
        elif key is not None:
            if isinstance(args[key], list):
                args[key].append(word)
            else:
                args[key] = int(word) if types.get(key) == "integer" and word.isdigit() else word
                key = None
    return args


def shell_effect(command: str) -> tuple[Effect, frozenset[str]]:
    """Effect of a shell command line (write wins over read) and the files it names."""
    targets = set(_REDIRECT.findall(command))
    effect = Effect.WRITE if targets else Effect.READ
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        words = command.split()
    segments: list[list[str]] = [[]]
    for word in words:
        if word in ("&&", "||", ";", "|"):
            segments.append([])
        else:
            segments[-1].append(word)
    for seg in segments:
        if not seg:
            continue
        verb = seg[0].rsplit("/", 1)[-1]
        if (
            verb in _SHELL_WRITE
            or (verb == "sed" and any(w.startswith("-i") for w in seg))
            or (verb == "git" and len(seg) > 1 and seg[1] in _GIT_WRITE)
        ):
            effect = Effect.WRITE
            targets.update(w for w in seg[1:] if not w.startswith("-"))
        elif verb in _SHELL_READ and verb not in ("echo", "printf"):
            targets.update(w for w in seg[1:] if not w.startswith("-") and ("/" in w or "." in w))
    return effect, frozenset(f"files:{t.lstrip('./')}" for t in targets if t and not t.startswith("$"))


def effect_of(tool: str, args: Mapping[str, Any]) -> tuple[Effect, str]:
    """(effect, service) of a normalised tool name."""
    spec = get_tool(tool)
    if spec is not None:
        if spec.service == "answer":
            return Effect.FINAL, "answer"
        return (Effect.READ if spec.command in _CLAW_READ_VERBS else Effect.WRITE), spec.service
    low = tool.lower()
    if low in _SHELL_TOOLS:
        return shell_effect(_command_text(args))[0], "shell"
    if low in _COMPUTER_TOOLS:
        action = str(args.get("action") or args.get("type") or "")
        return (Effect.READ if action in _COMPUTER_READS else Effect.WRITE), "computer"
    if low == "str_replace_based_edit_tool" or low == "str_replace_editor":
        return (Effect.READ if args.get("command") == "view" else Effect.WRITE), "files"
    return _NATIVE.get(low, (Effect.OTHER, "other"))


def _command_text(args: Mapping[str, Any]) -> str:
    cmd = args.get("command", args.get("cmd", ""))
    if isinstance(cmd, list):  # codex `shell`: ["bash", "-lc", "..."]
        return str(cmd[-1]) if cmd[:1] in (["bash"], ["sh"], ["zsh"]) else " ".join(map(str, cmd))
    return str(cmd)


def resources_of(tool: str, service: str, effect: Effect, args: Mapping[str, Any]) -> frozenset[str]:
    """The resources a call names (see the module docstring)."""
    if service == "shell":
        return shell_effect(_command_text(args))[1]
    found = {
        f"{service}:{_norm(args[k])}"
        for k in _ID_KEYS
        if isinstance(args.get(k), str | int) and args.get(k) != ""
    }
    if service == "mail" and isinstance(args.get("to"), str):
        found.add(f"mail:to:{_norm(args['to'])}")
    if not found and effect is Effect.READ and service not in ("other", "web"):
        found.add(f"{service}:*")
    return frozenset(found)


def _norm(value: object) -> str:
    return " ".join(str(value).split()).casefold().lstrip("./") if isinstance(value, str) else str(value)


def classify(tool: str, args: Mapping[str, Any]) -> tuple[Effect, str, frozenset[str]]:
    effect, service = effect_of(tool, args)
    return effect, service, resources_of(tool, service, effect, args)
