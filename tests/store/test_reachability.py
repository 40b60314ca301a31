"""Partitions whose leader a consumer cannot reach have an unknown end offset."""

from __future__ import annotations

import json

from headwater.store.reachability import reachable_partitions, verdicts_to_apply


def _stats(states: dict[int, str], leaders: dict[int, int]) -> str:
    return json.dumps(
        {
            "brokers": {
                "bootstrap:9092/bootstrap": {"nodeid": -1, "state": "UP"},
                **{f"b{n}:9092/{n}": {"nodeid": n, "state": s} for n, s in states.items()},
            },
            "topics": {
                "t": {
                    "partitions": {
                        "-1": {"partition": -1, "leader": -1},
                        **{
                            str(p): {"partition": p, "leader": leader}
                            for p, leader in leaders.items()
                        },
                    }
                }
            },
        }
    )


def test_a_partition_is_reachable_while_its_leader_is_up() -> None:
    assigned = [("t", 0), ("t", 1), ("t", 2), ("t", 3)]
    answer = reachable_partitions(_stats({1: "UP", 2: "DOWN"}, {0: 1, 1: 2, 2: -1}), assigned)
    # partition 2's leader is not known yet, partition 3 is not in the statistics: nothing concluded
    assert answer == {("t", 0): True, ("t", 1): False}


def test_with_no_broker_up_every_assigned_partition_is_unreachable() -> None:
    # what librdkafka reports once the broker is gone: its bootstrap entry, no partitions
    stats = json.dumps(
        {"brokers": {"b:9092/bootstrap": {"nodeid": -1, "state": "INIT"}}, "topics": {}}
    )
    assert reachable_partitions(stats, [("t", 0), ("u", 1)]) == {("t", 0): False, ("u", 1): False}


def test_a_broker_reconnecting_is_not_up() -> None:
    for state in ("DOWN", "CONNECT", "TRY_CONNECT", "INIT", "AUTH_HANDSHAKE"):
        stats = _stats({1: state, 2: "UP"}, {0: 1})
        assert reachable_partitions(stats, [("t", 0)]) == {("t", 0): False}


def test_malformed_statistics_conclude_nothing() -> None:
    for text in ("", "[]", "{", '{"brokers": 3}'):
        assert reachable_partitions(text, [("t", 0)]) == {}


def test_an_unreachable_verdict_waits_for_the_first_fetch_or_the_grace_period() -> None:
    fresh, fetched, old = ("t", 0), ("t", 1), ("t", 2)
    verdicts = {fresh: False, fetched: False, old: False}
    assigned_at = {fresh: 99.5, fetched: 99.5, old: 96.0}
    applied = verdicts_to_apply(verdicts, {fetched}, assigned_at, now=100.0, grace_s=3.0)
    # just handed over, nothing fetched yet: its consumer may still be connecting
    assert applied == {fetched: False, old: False}
    later = verdicts_to_apply(verdicts, set(), assigned_at, now=102.5, grace_s=3.0)
    assert later == {fresh: False, fetched: False, old: False}  # Kafka down since the hand-over


def test_a_reachable_verdict_always_counts() -> None:
    applied = verdicts_to_apply({("t", 0): True}, set(), {("t", 0): 100.0}, now=100.0, grace_s=3.0)
    assert applied == {("t", 0): True}
