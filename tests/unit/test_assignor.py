"""Partition placement: balanced, sticky to local state, with standbys elsewhere."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eddy.runtime.assignor import MemberState, Plan, plan


def owners(result: Plan) -> dict[int, str]:
    return {p: m for m, ps in result.active.items() for p in ps}


@given(partitions=st.integers(1, 24), members=st.integers(1, 6), standbys=st.integers(0, 2))
def test_every_partition_has_one_owner_and_counts_are_balanced(
    partitions: int, members: int, standbys: int
) -> None:
    result = plan(partitions, [MemberState(f"m{i}") for i in range(members)], standbys)
    assigned = sorted(p for ps in result.active.values() for p in ps)
    assert assigned == list(range(partitions))
    counts = [len(ps) for ps in result.active.values()]
    assert max(counts) - min(counts) <= 1
    owner = owners(result)
    for member, ps in result.standby.items():
        assert all(owner[p] != member for p in ps), "a standby on the owner itself"
    per_partition = [sum(p in ps for ps in result.standby.values()) for p in range(partitions)]
    assert per_partition == [min(standbys, members - 1)] * partitions


@given(partitions=st.integers(1, 24), members=st.integers(1, 6))
def test_an_unchanged_group_keeps_its_assignment(partitions: int, members: int) -> None:
    first = plan(partitions, [MemberState(f"m{i}") for i in range(members)], 1)
    again = plan(
        partitions,
        [MemberState(m, frozenset(ps), dict.fromkeys(ps, 100)) for m, ps in first.active.items()],
        1,
    )
    assert again.active == first.active


@given(partitions=st.integers(2, 24), members=st.integers(2, 6), data=st.data())
def test_when_a_worker_leaves_no_survivor_loses_a_partition_to_a_cold_worker(
    partitions: int, members: int, data: st.DataObject
) -> None:
    first = plan(partitions, [MemberState(f"m{i}") for i in range(members)], 1)
    leaver = data.draw(st.sampled_from(sorted(first.active)))
    survivors = [
        MemberState(
            m,
            frozenset(first.active[m]),
            dict.fromkeys(first.active[m], 100) | dict.fromkeys(first.standby[m], 99),
        )
        for m in first.active
        if m != leaver
    ]
    second = owners(plan(partitions, survivors, 1))
    warm = {s.member_id: set(s.offsets) for s in survivors}
    for survivor in survivors:
        for p in survivor.owned:
            assert p in warm[second[p]], f"{p} moved from {survivor.member_id} to a cold worker"


def test_the_warmest_copy_wins_a_free_partition() -> None:
    members = [
        MemberState("a", frozenset(), {0: 10}),
        MemberState("b", frozenset(), {0: 500}),
    ]
    assert owners(plan(2, members, 0))[0] == "b"


def test_every_member_learns_every_partitions_owner_endpoint() -> None:
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

    from eddy.runtime.assignor import EddyAssignor

    class Cluster:
        def partitions_for_topic(self, topic: str) -> set[int]:
            return set(range(6))

    def member(url: str) -> EddyAssignor:
        return EddyAssignor(1, lambda: (frozenset(), {}), lambda: url)

    a, b = member("http://a:8000"), member("http://b:8000")
    metadata = {"m-a": a.metadata(["readings"]), "m-b": b.metadata(["readings"])}
    assignments = a.assign(Cluster(), metadata)  # type: ignore[arg-type]
    for assignor, member_id in ((a, "m-a"), (b, "m-b")):
        encoded = assignments[member_id].encode()
        assignor.on_assignment(ConsumerProtocolMemberAssignment.decode(encoded))
    expected = {
        p: ("http://a:8000" if member_id == "m-a" else "http://b:8000")
        for member_id, assignment in assignments.items()
        for _, partitions in assignment.assignment
        for p in partitions
    }
    assert sorted(expected) == list(range(6))
    assert a.owners == b.owners == expected
    assert set(expected.values()) == {"http://a:8000", "http://b:8000"}


def test_stages_sharing_a_group_each_get_every_partition_of_their_own_topics() -> None:
    """Two agents with one ``group_id`` (as Kafka Streams' sub-topologies share an
    application id): a worker's consumer of ``data`` is never handed ``repartition``."""
    from eddy.runtime.assignor import EddyAssignor

    class Cluster:
        def partitions_for_topic(self, topic: str) -> set[int]:
            return set(range(5))

    assignor = EddyAssignor(0, lambda: (frozenset(), {}))
    metadata = {
        f"{worker}-{topic}": assignor.metadata([topic])
        for worker in ("w1", "w2", "w3")
        for topic in ("data", "repartition")
    }
    assignments = assignor.assign(Cluster(), metadata)  # type: ignore[arg-type]
    for topic in ("data", "repartition"):
        handed = [
            (t, p)
            for member_id, assignment in assignments.items()
            if member_id.endswith(f"-{topic}")
            for t, partitions in assignment.assignment
            for p in partitions
        ]
        assert sorted(handed) == [(topic, p) for p in range(5)]
