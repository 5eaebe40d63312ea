"""The cluster workload algorithm, one step at a time: each test varies one attribute among otherwise equal
candidates and checks that exactly the step meant for it eliminated what it should."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from app.routing.algorithm import (
    Candidate,
    Decision,
    Link,
    LinkState,
    LocalQueueManager,
    SequenceState,
    UseQueue,
    after_choice,
    choose,
    with_sequence,
)

A, B, C = Candidate("A"), Candidate("B"), Candidate("C")


def eliminations(decision: Decision) -> dict[str, list[str]]:
    """The steps that eliminated something: step → eliminated nodes."""
    return {s.step: [e.node for e in s.eliminated] for s in decision.steps if s.eliminated}


def linked(candidate: Candidate, state: LinkState) -> Candidate:
    """`candidate` with its one link in `state`."""
    return replace(candidate, links=(Link(candidate.node, state=state),))


def reasons(decision: Decision, step: str) -> list[tuple[str, str | None, str]]:
    """What one step eliminated: (node, link or None for the whole node, reason)."""
    return next([(e.node, e.link, e.reason) for e in s.eliminated] for s in decision.steps if s.step == step)


def remaining_after(decision: Decision, step: str) -> tuple[str, ...]:
    return next(s.remaining for s in decision.steps if s.step == step)


NO_LOCAL_QUEUE_MANAGER = LocalQueueManager()


def route(candidates: list[Candidate], count: int, local: LocalQueueManager = NO_LOCAL_QUEUE_MANAGER) -> list[str]:
    """`count` choices in a row, keeping the sequence state as the service does."""
    state = SequenceState({}, {})
    weights = {c.node: c.weight for c in candidates}
    chosen = []
    for _ in range(count):
        node = choose(with_sequence(candidates, state), local).chosen
        assert node is not None
        state = after_choice(state, node, weights[node])
        chosen.append(node)
    return chosen


def test_step_1_put_disabled_instances_are_eliminated() -> None:
    decision = choose([replace(A, put_enabled=False), B])
    assert decision.chosen == "B"
    assert eliminations(decision) == {"1.1": ["A"]}
    assert decision.steps[0].eliminated[0].reason == "put disabled"


def test_step_1_no_put_enabled_instance_chooses_nothing() -> None:
    decision = choose([replace(A, put_enabled=False), replace(B, put_enabled=False)])
    assert decision.chosen is None
    assert "put enabled" in decision.reason


@pytest.mark.parametrize(
    ("instance", "node", "stays_local"),
    [
        (UseQueue.LOCAL, UseQueue.ANY, True),
        (UseQueue.QMGR, UseQueue.LOCAL, True),
        (UseQueue.QMGR, UseQueue.ANY, False),
        (UseQueue.ANY, UseQueue.LOCAL, False),
    ],
)
def test_step_3_the_local_instance_under_use_queue(instance: UseQueue, node: UseQueue, stays_local: bool) -> None:
    # B is the local instance, and the least recently used would otherwise be A (listed first).
    decision = choose([A, replace(B, use_queue=instance)], LocalQueueManager("B", node))
    if stays_local:
        assert decision.chosen == "B"
        assert eliminations(decision) == {"3": ["A"]}
    else:
        assert decision.chosen == "A"
        assert "3" not in eliminations(decision)


def test_step_3_needs_the_local_instance_to_be_put_enabled() -> None:
    decision = choose([A, replace(B, put_enabled=False, use_queue=UseQueue.LOCAL)], LocalQueueManager("B"))
    assert decision.chosen == "A"
    assert eliminations(decision) == {"1.1": ["B"]}


def test_step_5_links_below_the_highest_rank_are_eliminated() -> None:
    decision = choose([replace(A, link_rank=1), replace(B, link_rank=3), replace(C, link_rank=3)])
    assert eliminations(decision)["5"] == ["A"]
    assert decision.chosen == "B"


def test_step_5_does_not_rank_the_local_instance_which_has_no_link() -> None:
    local = LocalQueueManager("A", UseQueue.ANY)
    decision = choose([A, replace(B, link_rank=3)], local)
    assert "5" not in eliminations(decision)


def test_step_6_instances_below_the_highest_rank_are_eliminated() -> None:
    decision = choose([replace(A, rank=0), replace(B, rank=5), replace(C, rank=2)])
    assert eliminations(decision) == {"6": ["A", "C"]}
    assert decision.chosen == "B"


def test_step_7_resumed_nodes_are_preferred_to_suspended_ones() -> None:
    decision = choose([replace(A, suspended=True), B, replace(C, suspended=True)])
    assert eliminations(decision) == {"7": ["A", "C"]}
    assert decision.chosen == "B"


def test_step_7_suspended_nodes_are_used_when_all_are_suspended() -> None:
    decision = choose([replace(A, suspended=True), replace(B, suspended=True)])
    assert decision.chosen == "A"
    assert "7" not in eliminations(decision)


def test_step_7_applies_only_when_no_local_instance_remains() -> None:
    local = LocalQueueManager("A", UseQueue.ANY)
    decision = choose([A, replace(B, suspended=True)], local)
    assert "7" not in eliminations(decision)


@pytest.mark.parametrize(
    ("worse", "better"),
    [
        (LinkState.STARTING, LinkState.RUNNING),
        (LinkState.STOPPED, LinkState.INACTIVE),
        (LinkState.RETRYING, LinkState.STARTING),
        (LinkState.STOPPED, LinkState.RETRYING),
        (LinkState.PAUSED, LinkState.BINDING),
        (LinkState.REQUESTING, LinkState.STOPPING),
    ],
)
def test_steps_8_to_11_links_in_a_worse_state_group_are_eliminated(worse: LinkState, better: LinkState) -> None:
    decision = choose([linked(A, worse), linked(B, better)])
    assert eliminations(decision) == {"8-11": ["A"]}
    assert decision.chosen == "B"


def test_steps_8_to_11_running_and_inactive_links_are_one_group() -> None:
    decision = choose([linked(A, LinkState.INACTIVE), linked(B, LinkState.RUNNING)])
    assert "8-11" not in eliminations(decision)


def test_steps_8_to_11_a_stopped_link_is_used_when_every_link_is_stopped() -> None:
    decision = choose([linked(A, LinkState.STOPPED), linked(B, LinkState.STOPPED)])
    assert decision.chosen == "A"


def test_steps_8_to_11_the_local_instance_counts_as_the_best_group() -> None:
    local = LocalQueueManager("A", UseQueue.ANY)
    decision = choose([linked(A, LinkState.STOPPED), linked(B, LinkState.STARTING)], local)
    assert eliminations(decision) == {"8-11": ["B"]}


def test_steps_8_to_11_keep_a_node_by_its_links_in_the_best_group_and_drop_the_others() -> None:
    a = replace(A, links=(Link("A1", state=LinkState.STOPPED), Link("A2", state=LinkState.RUNNING)))
    decision = choose([a, linked(B, LinkState.INACTIVE)])
    assert reasons(decision, "8-11") == [("A", "A1", "link stopped")]
    assert remaining_after(decision, "8-11") == ("A", "B")
    assert (decision.chosen, decision.link) == ("A", "A2")


def test_steps_8_to_11_a_node_none_of_whose_links_is_in_the_best_group_is_eliminated() -> None:
    a = replace(A, links=(Link("A1", state=LinkState.STOPPED), Link("A2", state=LinkState.RETRYING)))
    decision = choose([a, linked(B, LinkState.RUNNING)])
    assert reasons(decision, "8-11") == [("A", None, "A1: link stopped; A2: link retrying")]
    assert decision.chosen == "B"


def test_step_13_with_one_link_per_node_eliminates_nothing() -> None:
    # IBM MQ's algorithm compares NETPRTY among the channels to one queue manager: a node with 0 beside one with 9 gets work.
    candidates = [replace(A, links=(Link("A", 0),)), replace(B, links=(Link("B", 9),))]
    decision = choose(candidates)
    assert reasons(decision, "13") == []
    assert decision.steps[-1].step == "17" and decision.chosen == "A"
    assert route(candidates, 6) == ["A", "B"] * 3


def test_step_13_keeps_each_nodes_links_with_its_highest_network_priority() -> None:
    a = replace(A, links=(Link("A1", 3), Link("A2", 7), Link("A3", 7)))
    b = replace(B, links=(Link("B1", 0), Link("B2", 2)))
    decision = choose([a, b, replace(C, links=(Link("C1", 9),))])
    assert reasons(decision, "13") == [("A", "A1", "link NETPRTY 3 < 7"), ("B", "B1", "link NETPRTY 0 < 2")]
    assert remaining_after(decision, "13") == ("A", "B", "C")
    # Of A's two links with NETPRTY 7, the first in order is named.
    assert (decision.chosen, decision.link) == ("A", "A2")


def test_step_13_looks_at_the_links_left_by_steps_8_to_11() -> None:
    # A's NETPRTY 9 link is stopped: its running NETPRTY 1 link is the one used, and step 13 has nothing to do.
    a = replace(A, links=(Link("A1", 9, LinkState.STOPPED), Link("A2", 1, LinkState.RUNNING)))
    decision = choose([a, linked(B, LinkState.RUNNING)])
    assert reasons(decision, "8-11") == [("A", "A1", "link stopped")]
    assert reasons(decision, "13") == []
    assert (decision.chosen, decision.link) == ("A", "A2")


def test_step_13_shares_no_work_by_network_priority() -> None:
    # NETPRTY picks a node's link, never the node: equal weights still share equally.
    a = replace(A, links=(Link("A1", 9), Link("A2", 0)))
    assert Counter(route([a, B, C], 300)) == {"A": 100, "B": 100, "C": 100}


def test_step_13_leaves_the_links_of_the_local_instance_which_uses_none() -> None:
    local = LocalQueueManager("A", UseQueue.LOCAL)
    decision = choose([replace(A, links=(Link("A1", 0), Link("A2", 9))), B], local)
    assert reasons(decision, "13") == []
    assert (decision.chosen, decision.link) == ("A", None)


def test_step_15_instances_below_the_highest_priority_are_eliminated() -> None:
    decision = choose([replace(A, priority=9), replace(B, priority=4), replace(C, priority=9)])
    assert eliminations(decision)["15"] == ["B"]


def test_step_16_only_the_most_recently_used_are_kept() -> None:
    candidates = [replace(A, sequence_number=3), replace(B, sequence_number=9), replace(C, sequence_number=5)]
    decision = choose(candidates, LocalQueueManager(most_recently_used_cap=2))
    assert eliminations(decision)["16"] == ["A"]
    # Of the two kept, C was used less recently.
    assert decision.chosen == "C"


def test_step_17_the_lowest_sequence_factor_wins_then_the_lowest_sequence_number() -> None:
    assert choose([replace(A, sequence_factor=40), replace(B, sequence_factor=20)]).chosen == "B"
    tied = choose([replace(A, sequence_factor=20, sequence_number=8), replace(B, sequence_factor=20, sequence_number=2)])
    assert tied.chosen == "B"
    assert [e.node for e in tied.steps[-1].eliminated] == ["A"]


def test_step_17_explains_a_higher_factor_a_later_use_and_a_tie_broken_by_order() -> None:
    decision = choose([replace(A, sequence_factor=40, sequence_number=1), replace(B, sequence_factor=20, sequence_number=2)])
    assert reasons(decision, "17") == [("A", None, "sequence factor 40 > 20")]
    decision = choose([replace(A, sequence_factor=20, sequence_number=8), replace(B, sequence_factor=20, sequence_number=2)])
    assert reasons(decision, "17") == [("A", None, "equal sequence factor 20, used more recently (number 8 > 2)")]
    # Nothing used yet: no candidate was used more recently, the order breaks the tie.
    decision = choose([A, B, C])
    tie = "a tie (sequence factor 0, number 0) broken by order: A comes first"
    assert reasons(decision, "17") == [("B", None, tie), ("C", None, tie)]
    assert not any("recently" in reason for _, _, reason in reasons(decision, "17"))


def test_steps_run_in_the_seeds_order_and_every_candidate_has_a_reason() -> None:
    candidates = [
        replace(A, put_enabled=False),
        replace(B, rank=1),
        linked(replace(C, rank=2), LinkState.STOPPED),
        Candidate("D", rank=2, suspended=True),
        Candidate("E", rank=2),
        Candidate("F", rank=2, priority=3, links=(Link("F1", 1), Link("F2", 4))),
        Candidate("G", rank=2, priority=3, sequence_factor=5),
    ]
    decision = choose(candidates)
    assert [s.step for s in decision.steps] == ["1.1", "3", "5", "6", "7", "8-11", "13", "15", "16", "17"]
    assert eliminations(decision) == {"1.1": ["A"], "6": ["B"], "7": ["D"], "8-11": ["C"], "13": ["F"], "15": ["E"], "17": ["G"]}
    assert (decision.chosen, decision.link) == ("F", "F2")
    eliminated = {e.node for s in decision.steps for e in s.eliminated}
    assert eliminated | {"F"} == {c.node for c in candidates}


def test_weights_20_30_50_share_10000_requests_within_one_point() -> None:
    candidates = [replace(A, weight=20), replace(B, weight=30), replace(C, weight=50)]
    shares = Counter(route(candidates, 10_000))
    for node, weight in (("A", 20), ("B", 30), ("C", 50)):
        assert abs(shares[node] / 100 - weight) <= 1, shares


def test_equal_weights_are_a_perfect_round_robin() -> None:
    chosen = route([A, B, C], 300)
    assert chosen == ["A", "B", "C"] * 100


def test_the_sequence_state_after_alternate_choices() -> None:
    state = SequenceState({}, {})
    for _ in range(10):
        node = choose(with_sequence([A, B], state)).chosen
        assert node is not None
        state = after_choice(state, node, 50)
    assert state.factors == {"A": 100.0, "B": 100.0}
    assert state.numbers == {"A": 9, "B": 10}


def test_after_choice_counts_a_batch_as_its_requests() -> None:
    state = after_choice(SequenceState({}, {}), "A", 20, count=5)
    assert state.factors == {"A": 250.0}
    assert state.numbers == {"A": 1}


@pytest.mark.parametrize("put_enabled", [True, False])
@pytest.mark.parametrize("local", [LocalQueueManager(), LocalQueueManager("A"), LocalQueueManager("A", UseQueue.ANY, 1)])
@pytest.mark.parametrize("link", list(LinkState))
@pytest.mark.parametrize("suspended", [True, False])
def test_one_candidates_decision_does_not_depend_on_the_sequence(
    put_enabled: bool, local: LocalQueueManager, link: LinkState, suspended: bool
) -> None:
    """What lets the router work out an environment on one node once (Router's sole decisions): any sequence
    state gives the same decision, trace and all."""
    sole = replace(linked(A, link), put_enabled=put_enabled, suspended=suspended)
    states = [SequenceState({}, {}), SequenceState({"A": 5000.0}, {"A": 7}, 7), after_choice(SequenceState({}, {}), "A", 3, 40)]
    decisions = {choose(with_sequence([sole], state), local) for state in states}
    assert len(decisions) == 1
    assert decisions.pop().chosen == ("A" if put_enabled else None)
