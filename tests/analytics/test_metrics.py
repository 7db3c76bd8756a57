"""Each metric on hand-built event streams with known answers."""

from __future__ import annotations

import pytest

from analytics._streams import ev, stream
from openforgerl.analytics.bootstrap import bootstrap_mean
from openforgerl.analytics.metrics import (
    GoldAction,
    RolloutFacts,
    behaviour,
    catastrophic_first_step,
    error_recovery,
    inspect_before_act,
    longest_loop,
    plan_completion,
    repeat_ratio,
    self_verification,
    tool_coverage,
)


def test_self_verification_same_resource_read_after_write() -> None:
    s = stream(ev("write_file", path="a.txt", content="x"), ev("read_file", path="a.txt"))
    assert self_verification(s) == (1.0, 1.0)


def test_self_verification_other_resource_does_not_count() -> None:
    s = stream(ev("write_file", path="a.txt", content="x"), ev("read_file", path="b.txt"))
    assert self_verification(s) == (0.0, 0.0)


def test_self_verification_read_before_write_does_not_count() -> None:
    s = stream(ev("read_file", path="a.txt"), ev("write_file", path="a.txt", content="x"))
    assert self_verification(s) == (0.0, 0.0)


def test_self_verification_service_wide_read_and_returned_id() -> None:
    sent = ev("mail_send", to="bob@x.io", subject="s", body="b", output='{"sent": true, "id": "m9"}')
    assert self_verification(stream(sent, ev("mail_list", folder="sent"))) == (1.0, 1.0)
    assert self_verification(stream(sent, ev("mail_read", id="m9"))) == (1.0, 1.0)
    assert self_verification(stream(sent, ev("mail_read", id="m1"))) == (0.0, 0.0)


def test_self_verification_failed_write_or_read_and_reads_after_final() -> None:
    assert self_verification(stream(ev("write_file", ok=False, path="a", content=""))) == (None, None)
    s = stream(ev("notes_write", title="T", content="c"), ev("notes_read", ok=False, title="T"))
    assert self_verification(s) == (0.0, 0.0)
    s = stream(
        ev("notes_write", title="T", content="c"),
        ev("submit_answer", answer="x"),
        ev("notes_read", title="T"),
    )
    assert self_verification(s) == (0.0, 0.0)


def test_self_verification_fraction_and_shell_read_of_written_file() -> None:
    s = stream(
        ev("write_file", path="a.txt", content="1"),
        ev("write_file", path="b.txt", content="2"),
        ev("bash", command="cat a.txt"),
    )
    assert self_verification(s) == (1.0, 0.5)


def test_tool_coverage() -> None:
    s = stream(ev("mail_list"), ev("mail_read", id="m1"), ev("mail_read", id="m2"), ev("bash", command="ls"))
    tc, norm, req = tool_coverage(
        s, offered={"mail_list", "mail_read", "mail_send", "mail_reply"}, gold={"mail_read", "mail_reply"}
    )
    assert (tc, norm, req) == (3.0, 0.5, 0.5)
    assert tool_coverage((), (), ()) == (0.0, None, None)


def test_error_recovery_within_four_calls_of_the_service() -> None:
    s = stream(
        ev("calendar_create", ok=False, fault="error", title="A", start="s", end="e"),
        ev("calendar_list"),
        ev("calendar_create", title="A", start="s", end="e"),
    )
    assert error_recovery(s) == (1.0, 1)


def test_error_recovery_too_late_other_tool_and_no_error() -> None:
    late = stream(
        ev("todo_add", ok=False, title="x"),
        ev("todo_list"),
        ev("todo_list", include_done=True),
        ev("todo_list", include_done=False),
        ev("todo_complete", id="t1"),
        ev("todo_add", title="x"),
    )
    assert error_recovery(late) == (0.0, 1)
    other_service_between = stream(
        ev("todo_add", ok=False, title="x"),
        ev("mail_list"),
        ev("mail_list"),
        ev("mail_list"),
        ev("mail_list"),
        ev("todo_add", title="x"),
    )
    assert error_recovery(other_service_between) == (1.0, 1)
    assert error_recovery(stream(ev("todo_add", title="x"))) == (None, 0)
    two = stream(
        ev("todo_add", ok=False, title="x"),
        ev("mail_send", ok=False, to="a", subject="s", body="b"),
        ev("todo_add", title="x"),
    )
    assert error_recovery(two) == (0.5, 2)


GOLD_REPLY = (GoldAction("mail_read", {"id": "m1"}), GoldAction("mail_reply", {"id": "m1", "body": "ok"}))


def test_catastrophic_first_step() -> None:
    assert catastrophic_first_step(stream(ev("mail_list")), GOLD_REPLY) is None
    good = stream(ev("mail_read", id="m1"), ev("mail_reply", id="m1", body="whatever"))
    assert catastrophic_first_step(good, GOLD_REPLY) == 0.0
    wrong_resource = stream(ev("mail_reply", id="m2", body="x"))
    assert catastrophic_first_step(wrong_resource, GOLD_REPLY) == 1.0
    failed = stream(ev("mail_reply", ok=False, id="m1", body="x"))
    assert catastrophic_first_step(failed, GOLD_REPLY) == 1.0
    injected = stream(ev("mail_reply", ok=False, fault="error", id="m1", body="x"))
    assert catastrophic_first_step(injected, GOLD_REPLY) == 0.0
    forbidden = stream(ev("mail_reply", id="m1", body="x"))
    assert catastrophic_first_step(forbidden, GOLD_REPLY, [GoldAction("mail_reply", {})]) == 1.0
    assert (
        catastrophic_first_step(stream(ev("todo_add", title="x")), (GoldAction("submit_answer", {}),)) == 1.0
    )
    assert catastrophic_first_step(stream(ev("todo_add", title="x")), ()) == 0.0  # gold unknown


def test_plan_completion_in_order() -> None:
    gold = (
        GoldAction("mail_search", {"query": "Invoice"}),
        GoldAction("mail_read", {"id": "m3"}),
        GoldAction("mail_reply", {"id": "m3", "body": "paid"}),
    )
    full = stream(
        ev("mail_search", query="invoice "), ev("mail_read", id="m3"), ev("mail_reply", id="m3", body="x")
    )
    assert plan_completion(full, gold) == 1.0
    out_of_order = stream(
        ev("mail_read", id="m3"), ev("mail_search", query="invoice"), ev("mail_reply", id="m3", body="x")
    )
    # greedy: the early read matches nothing yet, the search matches step 1, the reply is not step 2
    assert plan_completion(out_of_order, gold) == pytest.approx(1 / 3)
    failed_step = stream(ev("mail_search", query="invoice"), ev("mail_read", ok=False, id="m3"))
    assert plan_completion(failed_step, gold) == pytest.approx(1 / 3)
    assert plan_completion(full, ()) is None
    lists = (GoldAction("calendar_create", {"attendees": ["b@x", "A@x"], "title": "T"}),)
    assert (
        plan_completion(
            stream(ev("calendar_create", attendees=["a@x", "b@x"], title="t", start="", end="")), lists
        )
        == 1.0
    )


def test_inspect_before_act() -> None:
    assert inspect_before_act(stream(ev("mail_list"), ev("mail_reply", id="m1", body="x"))) == 1.0
    assert inspect_before_act(stream(ev("todo_list"), ev("mail_reply", id="m1", body="x"))) == 0.0
    assert inspect_before_act(stream(ev("mail_list"))) is None


def test_longest_loop_and_repeats() -> None:
    s = stream(
        ev("mail_list"),
        ev("mail_read", id="m1"),
        ev("mail_read", id="m1"),
        ev("mail_read", id="m1"),
        ev("mail_read", id="m2"),
        ev("mail_list"),
    )
    assert longest_loop(s) == 3
    assert repeat_ratio(s) == pytest.approx(3 / 6)
    assert longest_loop(()) == 0 and repeat_ratio(()) is None


def test_behaviour_bundles_every_metric() -> None:
    facts = RolloutFacts(
        "r1",
        stream(
            ev("mail_read", id="m1"), ev("mail_reply", id="m1", body="ok"), ev("mail_list", folder="sent")
        ),
        passed=True,
        offered=frozenset({"mail_read", "mail_reply", "mail_list", "mail_send"}),
        gold=GOLD_REPLY,
        model_calls=4,
    )
    b = behaviour(facts)
    assert (b.sv, b.tc, b.tc_norm, b.tc_req, b.er, b.cfs, b.pc, b.iba, b.loop) == (
        1.0,
        3.0,
        0.75,
        1.0,
        None,
        0.0,
        1.0,
        1.0,
        1.0,
    )
    assert (b.tool_calls, b.model_calls, b.calls_to_first_write) == (3, 4, 1)


def test_bootstrap_resamples_tasks() -> None:
    est = bootstrap_mean({"a": [1.0, 1.0], "b": [0.0, 0.0]}, resamples=500, seed=1)
    assert est.value == 0.5 and est.n == 4 and est.tasks == 2
    assert est.low == 0.0 and est.high == 1.0
    one = bootstrap_mean({"a": [1.0, 0.0]})
    assert (one.value, one.low, one.high) == (0.5, 0.5, 0.5)
    assert bootstrap_mean({}).value is None
