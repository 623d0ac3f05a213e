"""Every agent's queryable state over REST, typed from what the agent declares.

For each agent that serves its window results (``.queryable()``):

* ``GET /agents/<agent>/windows/{key}``: one key's windows in a time range;
* ``GET /agents/<agent>/windows``: every key's result of one window (the newest
  with results by default), optionally ordered by a field;

and for each queryable state (``ValueState(..., queryable=True)``):

* ``GET /agents/<agent>/state/<state>/{key}``: one key's value.

Their response models are made from the agent's result and state types, so the
OpenAPI schema says what a client gets. Whatever the agent, also:

* ``GET /agents``: the agents on this worker and what they serve;
* ``GET /agents/{agent}/owner/{key}``: the partition and worker owning a key;
* ``GET /agents/{agent}/keys``: keys of a view, by prefix, in pages (a cursor).

A request for a key another worker owns is forwarded there (``api/forward.py``).
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_type_hints, is_typeddict

from fastapi import APIRouter, FastAPI, Path, Query, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model

from eddy.api.backend import Backend
from eddy.api.deps import BackendDep
from eddy.api.errors import PROBLEM_RESPONSES, BadRequestError
from eddy.api.fastpath import PointAnswer, plain_int
from eddy.api.forward import ask_owners
from eddy.api.params import MAX_TIME_MS, FromMs, Key, Limit, ToMs, page_limit
from eddy.api.schemas import Freshness
from eddy.app.plan import View
from eddy.app.queries import UnknownKeyError
from eddy.app.scans import MAX_CONTINUATION_CHARS, merge_pages, position, sort_key

router = APIRouter(prefix="/agents", tags=["agents"])
Name = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")]


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: PROBLEM_RESPONSES[s] for s in statuses}


class ViewInfo(BaseModel):
    kind: Literal["windows", "state"]
    name: str = Field(description="'windows', or the state's name.")
    path: str = Field(description="Where to query it, {key} standing for a key.")


class AgentInfo(BaseModel):
    name: str
    stages: list[str] = Field(description="What it runs as: one stage, two with a repartition.")
    views: list[ViewInfo]


class Agents(BaseModel):
    agents: list[AgentInfo]
    served_by: str


class KeyOwner(BaseModel):
    agent: str
    key: str
    partition: int
    owner_url: str | None = Field(description="The owning worker's API; null while unknown.")
    served_here: bool


NEXT_AFTER = (
    "The continuation: pass it as after= to go on; null once every key was examined. "
    "Every key up to it has been examined: the last of this page, or (when a scan's budget "
    "ran out first) the last key examined, which need not be one that matches."
)
BUDGET_EXHAUSTED = (
    "A worker's scan ran out of its budget (EDDY_API_SCAN_MAX_KEYS entries examined or "
    "EDDY_API_SCAN_MAX_MS) before the page was complete: it may hold fewer than limit, "
    "even none; go on from next_after."
)
After = Annotated[
    str | None,
    Query(
        max_length=MAX_CONTINUATION_CHARS,
        description="A continuation: the next_after of the last page",
    ),
]
Scope = Annotated[
    Literal["all", "local"], Query(description="all: every partition; local: this worker's")
]


class Keys(BaseModel):
    agent: str
    view: str
    keys: list[str] = Field(
        description="In the order the state stores them (window views: shorter keys first)."
    )
    next_after: str | None = Field(description=NEXT_AFTER)
    budget_exhausted: bool = Field(description=BUDGET_EXHAUSTED)
    partitions: list[int] = Field(description="Partitions this answer covers.")


@router.get("", response_model=Agents)
async def agents(backend: BackendDep) -> Agents:
    """The agents on this worker and what each serves."""
    views = backend.views()
    found = []
    for name, stages in sorted(backend.agents().items()):
        mine = [_info(v) for v in views if v.agent == name]
        found.append(AgentInfo(name=name, stages=stages, views=mine))
    return Agents(agents=found, served_by=backend.worker_id)


@router.get("/{agent}/owner/{key}", response_model=KeyOwner, responses=_errors(404, 503))
async def owner(backend: BackendDep, agent: Name, key: Key) -> KeyOwner:
    """The partition of ``key`` and the worker that owns it now (as of the last
    rebalance), to query it there directly."""
    found = backend.owner(agent, key)
    return KeyOwner(
        agent=agent, key=key, partition=found.partition, owner_url=found.url, served_here=found.here
    )


@router.get("/{agent}/keys", response_model=Keys, responses=_errors(400, 404, 503))
async def keys(
    request: Request,
    backend: BackendDep,
    agent: Name,
    view: Annotated[
        str, Query(max_length=64, description="'windows' or a state's name")
    ] = "windows",
    prefix: Annotated[str, Query(max_length=200, description="Only keys starting so")] = "",
    after: After = None,
    limit: Annotated[int, Query(ge=1, le=10_000, description="Most keys")] = 100,
    scope: Scope = "all",
) -> Keys:
    """Keys of one of the agent's views, in pages: over every partition, asking the
    workers that own the others. A page may hold fewer than ``limit`` keys, even
    none, when a worker's scan budget ran out first: go on from ``next_after``."""
    scanned = _view(backend, agent, view)
    params: dict[str, Any] = {"view": view, "prefix": prefix, "limit": limit, "scope": "local"}
    if after is not None:
        params["after"] = after
    owners = backend.remote_owners(agent) if scope == "all" else {}
    # The others scan while this worker does: each scan has a budget of its own, so
    # the answer takes about one budget, not one per worker.
    page, answers = await asyncio.gather(
        backend.keys(agent, view, prefix, after, limit),
        ask_owners(request, owners, f"/agents/{agent}/keys", params),
    )
    parts = [(page.keys, page.next_after)] + [(a["keys"], a["next_after"]) for a in answers]
    at = functools.partial(position, scanned.kind)
    merged, next_after = merge_pages(parts, _itself, at, limit)
    return Keys(
        agent=agent,
        view=view,
        keys=merged,
        next_after=next_after,
        partitions=_covered(page.partitions, answers),
        budget_exhausted=page.budget_exhausted or any(_exhausted(a) for a in answers),
    )


def _view(backend: Backend, agent: str, name: str) -> View:
    for view in backend.views():
        if view.agent == agent and _name(view) == name:
            return view
    if agent not in backend.agents():
        raise UnknownKeyError(f"agent {agent!r} does not run on this worker")
    raise UnknownKeyError(f"agent {agent!r} serves no {name!r}")


def _exhausted(answer: dict[str, Any]) -> bool:
    # .get: a worker of an older version has no budget, and says nothing of it.
    return bool(answer.get("budget_exhausted", False))


def _itself(key: str) -> str:
    return key


def _covered(here: list[int], answers: list[dict[str, Any]]) -> list[int]:
    return sorted({*here, *(p for answer in answers for p in answer["partitions"])})


def _name(view: View) -> str:
    return view.kind if view.descriptor is None else view.descriptor.name


def _info(view: View) -> ViewInfo:
    if view.descriptor is None:
        path = f"/agents/{view.agent}/windows/{{key}}"
    else:
        path = f"/agents/{view.agent}/state/{view.descriptor.name}/{{key}}"
    kind: Literal["windows", "state"] = "windows" if view.kind == "windows" else "state"
    return ViewInfo(kind=kind, name=_name(view), path=path)


# -- typed routes, one set per view ------------------------------------------------------------


@dataclass
class Installed:
    """The typed routes, by path (for aliases), and the point queries among them
    that api/fastpath.py may answer, by path too."""

    routes: dict[str, APIRoute]
    point_answers: dict[str, PointAnswer]


def install_views(app: FastAPI, views: list[View], guard: list[Any]) -> Installed:
    """Add the typed routes of every view (see the module docstring)."""
    typed = APIRouter(prefix="/agents", tags=["agents"])
    answers: dict[str, PointAnswer] = {}
    for view in views:
        if view.kind == "windows":
            answers[f"/agents/{view.agent}/windows/{{key}}"] = _window_routes(typed, view)
        else:
            _state_route(typed, view)
    app.include_router(typed, dependencies=guard, responses={401: PROBLEM_RESPONSES[401]})
    routes = {route.path: route for route in typed.routes if isinstance(route, APIRoute)}
    return Installed(routes, answers)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[_\-.]", name) if part)


def window_model(view: View) -> type[BaseModel]:
    """One window result of the agent, as REST and the output topic carry it."""
    fields: dict[str, Any] = {
        view.key_field: (str, Field(description="The key the window belongs to.")),
        "window_start_ms": (int, Field(description="Inclusive.")),
        "window_end_ms": (int, Field(description="Exclusive.")),
    }
    fields.update(_value_fields(view.result_type))
    fields["timing"] = (
        Literal["first", "update"],
        Field(description="first: when the watermark closed it; update: a late record's."),
    )
    config = ConfigDict(extra="allow" if view.result_type is None else "ignore")
    model: type[BaseModel] = create_model(
        f"{_camel(view.agent)}Window", __config__=config, **fields
    )
    return model


def _value_fields(result_type: Any) -> dict[str, Any]:
    if result_type is None:
        return {}
    if isinstance(result_type, type) and issubclass(result_type, BaseModel):
        return {n: (f.annotation, f) for n, f in result_type.model_fields.items()}
    if is_typeddict(result_type):
        return {n: (tp, ...) for n, tp in get_type_hints(result_type).items()}
    return {"value": (result_type, ...)}


def _window_routes(router: APIRouter, view: View) -> PointAnswer:
    """Add the view's routes; return how api/fastpath.py answers one key's windows."""
    window = window_model(view)
    page = create_model(
        f"{_camel(view.agent)}Windows",
        key=(str, ...),
        windows=(list[window], Field(description="Oldest first.")),  # type: ignore[valid-type]
        next_from_ms=(int | None, Field(description="Pass as from_ms for the next page.")),
        freshness=(Freshness, ...),
    )
    agent = view.agent

    async def windows_of(
        backend: BackendDep,
        key: Key,
        from_ms: FromMs = 0,
        to_ms: ToMs = MAX_TIME_MS,
        limit: Limit = None,
    ) -> Any:
        return _windows_page(backend, agent, key, from_ms, to_ms, limit)

    windows_of.__doc__ = f"{agent}: one key's windows starting in [from_ms, to_ms), oldest first."
    router.add_api_route(
        f"/{agent}/windows/{{key}}",
        windows_of,
        response_model=page,
        name=f"{agent}_windows",
        responses=_errors(400, 404, 409, 503),
    )
    _slice_route(router, view, window)
    return _point_answer(agent, TypeAdapter(page))


def _windows_page(
    backend: Backend, agent: str, key: str, from_ms: int, to_ms: int, limit: int | None
) -> dict[str, Any]:
    size = page_limit(backend, from_ms, to_ms, limit)
    found = backend.windows(agent, key, from_ms, to_ms, size)
    return {
        "key": key,
        "windows": found.windows,
        "next_from_ms": found.next_from_ms,
        "freshness": Freshness.of(backend.worker_id, found.freshness),
    }


def _point_answer(agent: str, page: TypeAdapter[Any]) -> PointAnswer:
    """The windows route's answer without FastAPI: its parameters, when each is plain
    digits within the route's bounds, and its response model's validation and JSON,
    as FastAPI applies them (so the bytes are the same)."""

    def answer(backend: Backend, key: str, params: Mapping[str, str]) -> bytes | None:
        from_ms = plain_int(params.get("from_ms", "0"), 0, MAX_TIME_MS)
        to_ms = plain_int(params.get("to_ms", str(MAX_TIME_MS)), 0, MAX_TIME_MS)
        limit_text = params.get("limit")
        limit = None if limit_text is None else plain_int(limit_text, 1, 2**63 - 1)
        if from_ms is None or to_ms is None or (limit_text is not None and limit is None):
            return None
        try:
            body = _windows_page(backend, agent, key, from_ms, to_ms, limit)
            return page.dump_json(page.validate_python(body, from_attributes=True), by_alias=True)
        # Any error at all (a key another worker owns, a restoring partition, a bad
        # range, a bug) is FastAPI's to answer: it runs the route again and gives the
        # error its one response, or forwards the request.
        except Exception:
            return None

    return answer


def _slice_route(router: APIRouter, view: View, window: type[BaseModel]) -> None:
    agent = view.agent
    answer = create_model(
        f"{_camel(agent)}WindowSlice",
        window_start_ms=(int | None, Field(description="Null when no window has a result.")),
        window_end_ms=(int | None, ...),
        results=(list[window], ...),  # type: ignore[valid-type]
        next_after=(str | None, Field(description=NEXT_AFTER)),
        budget_exhausted=(bool, Field(description=BUDGET_EXHAUSTED)),
        partitions=(list[int], Field(description="Partitions this answer covers.")),
    )

    async def one_window(
        request: Request,
        backend: BackendDep,
        window_start_ms: Annotated[
            int | None, Query(ge=-(2**53), le=2**53, description="Default: the newest window")
        ] = None,
        order_by: Annotated[str | None, Query(max_length=64, description="A result field")] = None,
        descending: bool = True,
        after: After = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
        scope: Scope = "all",
    ) -> Any:
        if after is not None and window_start_ms is None:
            raise BadRequestError("after= goes on within one window: pass its window_start_ms= too")
        owners = backend.remote_owners(agent) if scope == "all" else {}

        async def others(start_ms: int | None) -> list[dict[str, Any]]:
            if start_ms is None:
                return []
            params = {"window_start_ms": start_ms, "limit": limit, "scope": "local"}
            params |= {"descending": descending} | _given(order_by=order_by, after=after)
            return await ask_owners(request, owners, f"/agents/{agent}/windows", params)

        here = backend.window_slice(agent, window_start_ms, after, order_by, descending, limit)
        try:
            if window_start_ms is not None:  # the others scan while this worker does
                page, answers = await asyncio.gather(here, others(window_start_ms))
            else:  # the others are asked for the window this worker found newest
                page = await here
                answers = await others(None if page.window is None else page.window.start_ms)
        except ValueError as exc:
            raise BadRequestError(str(exc)) from None
        start_ms = page.window.start_ms if page.window is not None else window_start_ms
        # .get: a worker of an older version answers the whole window, no continuation.
        parts = [(page.rows, page.next_after)]
        parts += [(a["results"], a.get("next_after")) for a in answers]
        key_of = _field(view.key_field)
        rank = None if order_by is None else _ranking(order_by, descending)
        at = functools.partial(position, "windows")
        rows, next_after = merge_pages(parts, key_of, at, limit, rank)
        ends = [a["window_end_ms"] for a in answers if a["window_end_ms"] is not None]
        return {
            "window_start_ms": start_ms if page.window is not None or ends else None,
            "window_end_ms": page.window.end_ms
            if page.window is not None
            else min(ends, default=None),
            "results": rows,
            "next_after": next_after,
            "budget_exhausted": page.budget_exhausted or any(_exhausted(a) for a in answers),
            "partitions": _covered(page.partitions, answers),
        }

    one_window.__doc__ = (
        f"{agent}: every key's result of one window, over every partition: the first "
        "limit in key order, or the best limit by order_by. A window with more results "
        "than a scan's budget comes in pages: go on with after=next_after (and the same "
        "window_start_ms); with order_by, each page ranks the results it examined, and "
        "the best of all pages' are the window's best."
    )
    router.add_api_route(
        f"/{agent}/windows",
        one_window,
        response_model=answer,
        name=f"{agent}_window_slice",
        responses=_errors(400, 503),
    )


def _given(**params: Any) -> dict[str, Any]:
    return {name: value for name, value in params.items() if value is not None}


def _field(name: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: str(row.get(name))


def _ranking(
    order_by: str, descending: bool
) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    # Stable: rows of equal value stay in key order.
    return lambda rows: sorted(rows, key=sort_key(order_by), reverse=descending)


def _state_route(router: APIRouter, view: View) -> None:
    descriptor = view.descriptor
    assert descriptor is not None
    agent, state = view.agent, descriptor.name
    answer = create_model(
        f"{_camel(agent)}{_camel(state)}",
        key=(str, ...),
        value=(descriptor.stored_type, ...),
        freshness=(Freshness, ...),
    )

    async def state_of(backend: BackendDep, key: Key) -> Any:
        found = backend.state(agent, state, key)
        return {
            "key": key,
            "value": found.value,
            "freshness": Freshness.of(backend.worker_id, found.freshness),
        }

    state_of.__doc__ = f"{agent}: one key's {state!r} state."
    router.add_api_route(
        f"/{agent}/state/{state}/{{key}}",
        state_of,
        response_model=answer,
        name=f"{agent}_state_{state}",
        responses=_errors(404, 503),
    )
