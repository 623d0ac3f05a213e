"""Eddy's partition assignor: sticky to local state, co-partitioned, with standbys.

Each worker tells the group leader which partitions it owns now and how far its
local RocksDB copy of each partition's changelog goes. The leader then:

* assigns partition number ``p`` of every input topic to the same worker (a task
  reads all co-partitioned inputs of one number);
* keeps a partition with its current owner, else gives it to the worker whose
  local copy is most complete, so a rebalance restores little or nothing;
* balances the count: every worker gets ``floor(n/m)`` or ``ceil(n/m)``;
* names ``num_standbys`` standby workers per partition (other than its owner),
  again preferring warm copies; a standby tails the changelog so a failover
  finds the state almost complete.

The plan (:func:`plan`) is a pure function; :class:`EddyAssignor` adapts it to
aiokafka's assignor interface (instance methods, since it carries state).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import orjson
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemberState:
    """What a worker reports when it joins."""

    member_id: str
    owned: frozenset[int] = frozenset()
    offsets: Mapping[int, int] = field(default_factory=dict)  # partition -> changelog offset
    endpoint: str | None = None  # the worker's REST API, for routing queries to owners


@dataclass(frozen=True)
class Plan:
    active: dict[str, list[int]]
    standby: dict[str, list[int]]


def plan(partitions: int, members: list[MemberState], num_standbys: int) -> Plan:
    """Place ``partitions`` tasks on ``members`` (see the module docstring)."""
    ids = sorted(m.member_id for m in members)
    by_id = {m.member_id: m for m in members}
    active: dict[str, list[int]] = {member: [] for member in ids}
    if not ids:
        return Plan(active, {})
    ceiling = -(-partitions // len(ids))

    def warmth(member: str, partition: int) -> tuple[int, int]:
        state = by_id[member]
        return (partition in state.owned, state.offsets.get(partition, -2))

    # Greedy on warmth: current owners first, then the most complete copies.
    pairs = [(warmth(m, p), m, p) for m in ids for p in range(partitions) if warmth(m, p)[1] > -2]
    placed: set[int] = set()
    for _, member, partition in sorted(pairs, key=lambda x: (x[0], x[1], -x[2]), reverse=True):
        if partition not in placed and len(active[member]) < ceiling:
            active[member].append(partition)
            placed.add(partition)
    for partition in range(partitions):
        if partition not in placed:
            least = min(ids, key=lambda m: (len(active[m]), m))
            active[least].append(partition)
    _even_out(active, partitions // len(ids), warmth)

    owner_of = {p: m for m, ps in active.items() for p in ps}
    standby: dict[str, list[int]] = {member: [] for member in ids}
    for partition in range(partitions):
        others = [m for m in ids if m != owner_of[partition]]
        others.sort(key=lambda m: (warmth(m, partition)[1], -len(standby[m])), reverse=True)
        for member in others[:num_standbys]:
            standby[member].append(partition)
    return Plan({m: sorted(ps) for m, ps in active.items()}, standby)


def _even_out(
    active: dict[str, list[int]],
    floor: int,
    warmth: Callable[[str, int], tuple[int, int]],
) -> None:
    """Give members below ``floor`` a partition from the fullest member, until every
    member has at least ``floor``: the one the receiver holds the warmest copy of,
    and among those the one the donor holds the coldest (not one it owned)."""
    while True:
        short = [m for m in sorted(active) if len(active[m]) < floor]
        if not short:
            return
        receiver = short[0]
        donor = max(sorted(active), key=lambda m: len(active[m]))
        donor_warmth = {p: warmth(donor, p) for p in active[donor]}
        moved = max(
            active[donor],
            key=lambda p: (warmth(receiver, p), -donor_warmth[p][0], -donor_warmth[p][1]),
        )
        active[donor].remove(moved)
        active[receiver].append(moved)


class EddyAssignor:
    """aiokafka partition assignor (duck-typed: aiokafka calls these four members)."""

    name = "eddy-sticky-standby"
    version = 0

    def __init__(
        self,
        num_standbys: int,
        local_state: Callable[[], tuple[frozenset[int], dict[int, int]]],
        endpoint: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._num_standbys = num_standbys
        self._local_state = local_state
        self._endpoint = endpoint
        self.standby: frozenset[int] = frozenset()
        # Every active partition's owner, as its REST endpoint: the whole group's
        # assignment, so any worker can route a query for any key (Kafka Streams'
        # application.server, done for the user).
        self.owners: dict[int, str] = {}

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        owned, offsets = self._local_state()
        user_data = orjson.dumps(
            {"owned": sorted(owned), "offsets": offsets, "endpoint": self._endpoint()},
            option=orjson.OPT_NON_STR_KEYS,
        )
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), user_data)

    def assign(
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        # Stages of agents that share a consumer group (``group_id``) subscribe to
        # different topics: each subscription is planned on its own members.
        by_topics: dict[tuple[str, ...], dict[str, ConsumerProtocolMemberMetadata]] = {}
        for member_id, meta in members.items():
            by_topics.setdefault(tuple(sorted(set(meta.subscription))), {})[member_id] = meta
        assignments: dict[str, ConsumerProtocolMemberAssignment] = {}
        for topics, subscribers in by_topics.items():
            assignments.update(self._assign_subscription(cluster, list(topics), subscribers))
        return assignments

    def _assign_subscription(
        self,
        cluster: ClusterMetadata,
        topics: list[str],
        members: Mapping[str, ConsumerProtocolMemberMetadata],
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        counts = {t: len(cluster.partitions_for_topic(t) or ()) for t in topics}
        partitions = min(counts.values(), default=0)
        if len(set(counts.values())) > 1:
            log.error("inputs are not co-partitioned: %s; assigning %d", counts, partitions)
        states = [_decode(member_id, meta.user_data) for member_id, meta in members.items()]
        placed = plan(partitions, states, self._num_standbys)
        endpoints = {m.member_id: m.endpoint for m in states}
        owners = {
            str(p): endpoint
            for member_id, active in placed.active.items()
            if (endpoint := endpoints.get(member_id))
            for p in active
        }
        return {
            member_id: ConsumerProtocolMemberAssignment(
                self.version,
                [(t, placed.active[member_id]) for t in topics],
                orjson.dumps({"standby": placed.standby.get(member_id, []), "owners": owners}),
            )
            for member_id in members
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        try:
            data = orjson.loads(assignment.user_data or b"{}")
            self.standby = frozenset(data["standby"])
            self.owners = {int(p): str(url) for p, url in data.get("owners", {}).items()}
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            self.standby = frozenset()
            self.owners = {}


def _decode(member_id: str, user_data: bytes | None) -> MemberState:
    try:
        data = orjson.loads(user_data or b"{}")
        offsets = {int(p): int(o) for p, o in data.get("offsets", {}).items()}
        endpoint = data.get("endpoint")
        return MemberState(
            member_id,
            frozenset(data.get("owned", [])),
            offsets,
            endpoint if isinstance(endpoint, str) else None,
        )
    except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError):
        # A member of another version: treat it as holding nothing.
        return MemberState(member_id)
