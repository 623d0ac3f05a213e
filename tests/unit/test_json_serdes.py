"""JSON has no NaN and no infinity: the JSON serdes refuse a record that holds
one (or a number beyond a double, such as 1e400, which would read as infinity),
naming the field, unless the topic's serde accepts them explicitly. The check
runs inside pydantic-core and orjson: a record costs what it did."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from eddy import App, DecodeError, Json, JsonModel, TestDriver, Topic


class Part(BaseModel):
    ratio: float


class Reading(BaseModel):
    sensor_id: str
    temperature: float
    humidity: float | None = None
    history: list[float] = []
    part: Part | None = None
    count: int = 0


class Loose(BaseModel):
    """Asks for NaN itself."""

    model_config = ConfigDict(allow_inf_nan=True)
    temperature: float


class Anything(BaseModel):
    sensor_id: str
    extra: dict[str, Any] = {}


NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 400 + ".0"]


@pytest.mark.parametrize("number", NON_FINITE)
@pytest.mark.parametrize(
    ("template", "where"),
    [
        ('{"sensor_id": "s1", "temperature": %s}', "temperature"),
        ('{"sensor_id": "s1", "temperature": 1, "humidity": %s}', "humidity"),
        ('{"sensor_id": "s1", "temperature": 1, "history": [1, %s]}', "history.1"),
        ('{"sensor_id": "s1", "temperature": 1, "part": {"ratio": %s}}', "part.ratio"),
        ('{"sensor_id": "s1", "temperature": 1, "count": %s}', "count"),
    ],
)
def test_a_model_record_with_nan_or_an_overflow_is_refused_naming_the_field(
    number: str, template: str, where: str
) -> None:
    with pytest.raises(DecodeError) as refused:
        JsonModel(Reading).decode((template % number).encode())
    shown = "nan" if number == "NaN" else ("-inf" if number.startswith("-") else "inf")
    assert refused.value.reason == (
        f"{where}: {shown} is not a finite number (NaN, Infinity and numbers beyond a double "
        "such as 1e400 are refused)"
    )


def test_a_field_that_takes_any_json_is_covered_too() -> None:
    with pytest.raises(DecodeError) as refused:
        JsonModel(Anything).decode(b'{"sensor_id": "s1", "extra": {"a": [1, NaN]}}')
    assert refused.value.reason.startswith("malformed JSON: unexpected character")
    assert refused.value.reason.endswith(
        "(NaN, Infinity and numbers beyond a double such as 1e400 are not JSON)"
    )
    assert JsonModel(Anything).decode(b'{"sensor_id": "s1", "extra": {"a": 1}}') == Anything(
        sensor_id="s1", extra={"a": 1}
    )


def test_a_topic_or_a_model_may_accept_them_explicitly() -> None:
    raw = b'{"sensor_id": "s1", "temperature": NaN, "history": [1e400]}'
    accepted = JsonModel(Reading, allow_non_finite=True).decode(raw)
    assert math.isnan(accepted.temperature)
    assert accepted.history == [math.inf]
    assert math.isinf(JsonModel(Loose).decode(b'{"temperature": -Infinity}').temperature)
    assert Json(allow_non_finite=True).decode(b"[NaN, 1e400]")[1] == math.inf


@pytest.mark.parametrize("raw", [b"NaN", b"[1, Infinity]", b'{"t": 1e400}', b"-1e309"])
def test_json_without_a_model_refuses_them_too(raw: bytes) -> None:
    with pytest.raises(DecodeError) as refused:
        Json().decode(raw)
    assert refused.value.reason.startswith("malformed JSON: ")
    assert refused.value.reason.endswith("are not JSON)")


def test_the_decoded_value_is_the_model_itself_and_the_model_is_left_as_it_was() -> None:
    raw = b'{"sensor_id": "s1", "temperature": 2.5, "part": {"ratio": 0.5}}'
    decoded = JsonModel(Reading).decode(raw)
    assert type(decoded) is Reading
    assert type(decoded.part) is Part
    assert decoded == Reading.model_validate_json(raw)
    # Reading's own validator still takes NaN: only the serde refuses it.
    assert math.isnan(
        Reading.model_validate_json(b'{"sensor_id": "s", "temperature": NaN}').temperature
    )
    assert Reading.__pydantic_complete__
    assert Part.__pydantic_complete__


finite = st.floats(allow_nan=False, allow_infinity=False)


@given(temperature=finite, history=st.lists(finite, max_size=5), count=st.integers(-(2**63), 2**63))
def test_every_finite_record_decodes_as_the_model_validates_it(
    temperature: float, history: list[float], count: int
) -> None:
    raw = json.dumps(
        {"sensor_id": "s", "temperature": temperature, "history": history, "count": count}
    ).encode()
    assert JsonModel(Reading).decode(raw) == Reading.model_validate_json(raw)


json_values = st.recursive(
    st.none() | st.booleans() | finite | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)


@given(value=json_values, bad=st.sampled_from(NON_FINITE))
def test_a_non_finite_number_anywhere_in_any_json_is_refused(value: Any, bad: str) -> None:
    raw = json.dumps({"sensor_id": "s", "extra": {"v": value, "bad": "BAD"}}).replace('"BAD"', bad)
    for serde in (Json(), JsonModel(Anything)):
        with pytest.raises(DecodeError):
            serde.decode(raw.encode())
    assert Json().decode(json.dumps(value).encode()) == value


def test_a_topic_dead_letters_nan_with_its_field_unless_it_opted_out() -> None:
    app = App("nan")
    strict = Topic("strict", Reading)
    loose = Topic("loose", Reading, serde=JsonModel(Reading, allow_non_finite=True))
    out = Topic("out", Reading)
    app.stream(strict, name="from_strict").to(out)
    app.stream(loose, name="from_loose").map(lambda r: {"inf": math.isinf(r.temperature)}).to(
        Topic("loose-out")
    )
    raw = b'{"sensor_id": "s1", "temperature": 1e400}'
    with TestDriver(app) as driver:
        driver.send(strict, raw)
        driver.send(loose, raw)
        reasons = [letter.reason for letter in driver.dead_letters()]
        passed = driver.read("loose-out")
    assert reasons == [
        "temperature: inf is not a finite number (NaN, Infinity and numbers beyond a double "
        "such as 1e400 are refused)"
    ]
    assert [o.value for o in passed] == [{"inf": True}]
