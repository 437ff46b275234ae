"""`ask_form` against a real `lev serve`: the answer typed as a pydantic
model, a dataclass or a dict; a schema outside the subset refused by name."""

from __future__ import annotations

import dataclasses
from typing import Literal

import pydantic
import pytest
from conftest import answer_when_pending

import lev
from lev._forms import schema_of


class Release(pydantic.BaseModel):
    version: str = pydantic.Field(min_length=5, description="Semantic version")
    replicas: int = pydantic.Field(default=3, ge=1, le=9)
    ratio: float = 0.5
    channel: Literal["stable", "beta"] = "stable"
    canary: bool = True


@dataclasses.dataclass
class Owner:
    email: str = dataclasses.field(metadata={"format": "email"})
    weight: float = 1.0
    team: Literal["ops", "dev"] = "ops"


def test_a_pydantic_model_comes_back_typed(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    th = answer_when_pending(
        approver,
        sid,
        {
            "fields": {
                "version": "1.2.3",
                "replicas": 5,
                "ratio": 0.25,
                "channel": "beta",
                "canary": False,
            }
        },
    )
    got = worker.ask_form("Release details?", Release, session_id=sid, timeout_s=60)
    th.join()
    assert isinstance(got, Release)
    assert got == Release(version="1.2.3", replicas=5, ratio=0.25, channel="beta", canary=False)


def test_a_dataclass_comes_back_typed(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    schema = schema_of(Owner)
    assert schema["required"] == ["email"]
    assert schema["properties"]["team"] == {
        "type": "string",
        "enum": ["ops", "dev"],
        "title": "Team",
        "default": "ops",
    }
    th = answer_when_pending(approver, sid, {"fields": {"email": "ops@example.org", "weight": 2}})
    got = worker.ask_form("Who owns it?", Owner, session_id=sid, timeout_s=60)
    th.join()
    assert got == Owner(email="ops@example.org", weight=2.0, team="ops")
    assert isinstance(got.weight, float)


def test_a_dict_schema_and_the_servers_refusals(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    with pytest.raises(lev.ApiError) as e:
        worker.ask_form(
            "Bad?",
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}},
            session_id=sid,
        )
    assert e.value.status == 422
    assert "kind.schema.properties.a.pattern" in e.value.message
    record = worker.create_interaction(
        lev._client.question(
            "Age?",
            session_id=sid,
            form={
                "type": "object",
                "properties": {"age": {"type": "integer", "minimum": 18}},
                "required": ["age"],
            },
        )
    )
    with pytest.raises(lev.ApiError) as e:
        approver.respond(record["id"], {"request_id": record["id"], "fields": {"age": 12}})
    assert e.value.status == 422
    assert "age" in e.value.message
    approver.respond(record["id"], {"request_id": record["id"], "fields": {"age": 40}})
    assert lev._client.fields_of(worker.wait(record["id"], 5)) == {"age": 40}
