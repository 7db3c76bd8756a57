"""An environment defined only in this file
(lines up to `# --- end of the environment`) yields validated tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openforgerl.synth import Collection, Param, Tool, ToolEnv
from openforgerl.synth.toolenv import ToolFailure


def lend(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """A hand-written op: lending a book already out is refused."""
    book = next((b for b in state["library"]["books"] if b["id"] == args["id"]), None)
    if book is None:
        raise ToolFailure(f"no book {args['id']}", 404)
    if book["borrower"]:
        raise ToolFailure("already lent out", 409)
    book["borrower"] = args["borrower"]
    return {"lent": book["id"]}


BOOKS = "library.books"
# fmt: off
# (kept as a user would write it: test_the_environment_is_short measures the declaration)
ENV = ToolEnv(
    name="library",
    collections=(
        Collection(BOOKS, label="title", fields={"title": "title", "author": "person", "shelf": "place"},
                   records=({"id": "b1", "title": "Dune", "author": "Frank Herbert", "shelf": "A1",
                             "borrower": ""},
                            {"id": "b2", "title": "Emma", "author": "Jane Austen", "shelf": "B4",
                             "borrower": ""}),
                   id_prefix="b", defaults={"borrower": ""}, entity="book"),
        Collection("library.members", label="name", fields={"name": "person", "email": "email"},
                   records=({"id": "p1", "name": "Ada Byron", "email": "ada@lib.org"},),
                   id_prefix="p", entity="member"),
    ),
    tools=(
        Tool("add_book", "Add a book to the catalogue.",
             (Param("title"), Param("author", kind="person"), Param("shelf", kind="place")),
             effect="write", kind="create", collection=BOOKS, sets={"borrower": ""},
             templates=('Catalogue "{title}" by {author} on shelf {shelf}.',)),
        Tool("find_books", "Search books by any field.", (Param("query"),), kind="search", collection=BOOKS),
        Tool("find_members", "Search members.", (Param("query"),), kind="search",
             collection="library.members"),
        Tool("lend_book", "Lend a book to a member.",
             (Param("id", ref="library.books.id", ref_phrase='"{label}"'),
              Param("borrower", kind="email", ref="library.members.email",
                    ref_phrase="{label} (look up their email)")),
             effect="write", kind="update", collection=BOOKS, op=lend,
             templates=("Lend {id} to {borrower}.",)),
        Tool("move_book", "Move a book to another shelf.",
             (Param("id"), Param("shelf", required=False, kind="place")),
             effect="write", kind="update", collection=BOOKS),
        Tool("remove_book", "Remove a book.", (Param("id"),), effect="write", kind="delete",
             collection=BOOKS, destructive=True),
    ),
)
# fmt: on
# --- end of the environment


def test_the_environment_is_short() -> None:
    lines = Path(__file__).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def lend"))
    end = next(i for i, line in enumerate(lines) if line.startswith("# --- end of the environment"))
    assert end - start <= 60


def test_a_test_file_environment_produces_validated_tasks(tmp_path: Path) -> None:
    from openforgerl.synth import synthesize
    from openforgerl.tasks.format import load_task

    report, paths, _ = synthesize(ENV, 40, tmp_path, seed=3)
    assert report.kept == len(paths) >= 30
    assert report.generated == report.kept + sum(report.rejected.values())
    families = {load_task(p).config.metadata["synth"]["family"] for p in paths}
    joined = "".join(families)
    assert (
        any(f.startswith("answer:") for f in families) and "remove_book" in joined and "lend_book" in joined
    )
    task = load_task(paths[0])
    assert task.flags == ["unsupported:service:library"]  # no sandbox service speaks these tools


def test_loaded_by_path_as_the_cli_does(tmp_path: Path) -> None:
    from openforgerl.synth import load_env, synthesize

    env = load_env(Path(__file__))
    assert env.name == "library" and env.tool("submit_answer") is not None  # every env gets a final tool
    report, _, _ = synthesize(env, 10, tmp_path)
    assert report.kept == 10


def test_a_declarative_toml_environment(tmp_path: Path) -> None:
    from openforgerl.synth import load_env, synthesize

    (tmp_path / "shop.toml").write_text("""
name = "shop"
[[collections]]
name = "shop.orders"
label = "item"
fields = { item = "title", customer = "person" }
records = [ { id = "o1", item = "Desk lamp", customer = "Ravi Iyer", status = "open" } ]

[[tools]]
name = "create_order"
effect = "write"
kind = "create"
collection = "shop.orders"
[tools.parameters]
type = "object"
properties = { item = { type = "string" }, customer = { type = "string" } }
required = ["item", "customer"]

[[tools]]
name = "list_orders"
kind = "list"
collection = "shop.orders"

[[tools]]
name = "cancel_order"
effect = "write"
kind = "update"
collection = "shop.orders"
sets = { status = "cancelled" }
parameters = { type = "object", properties = { id = { type = "string" } }, required = ["id"] }
""")
    report, paths, _ = synthesize(load_env(tmp_path / "shop.toml"), 15, tmp_path / "out", seed=1)
    assert report.kept >= 10 and paths
