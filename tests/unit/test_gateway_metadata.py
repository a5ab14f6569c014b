"""Who a request belongs to: trajectory, session and user from headers, metadata, the OpenAI
user field, W3C trace context and (for keys that trust it) baggage, in the stated order; ids
with control characters refused naming where they came from."""

from __future__ import annotations

from uuid import UUID

import pytest

from schemas.ids import is_uuid7
from serving.gateway.errors import RequestMetadataError
from serving.gateway.metadata import extract_metadata

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = {"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}


def test_metadata_from_headers_body_and_user_field() -> None:
    headers = {"x-rewardstream-trajectory-id": "t1", "x-rewardstream-session-id": "s1"}
    meta = extract_metadata(headers, {"user": "alice", "metadata": {"session_id": "ignored"}})
    assert (meta.trajectory_id, meta.session_id, meta.user) == ("t1", "s1", "alice")
    assert meta.trajectory_source == "header"
    meta = extract_metadata({}, {"metadata": {"trajectory_id": "t2", "user": "bob"}})
    assert (meta.trajectory_id, meta.session_id, meta.user) == ("t2", "t2", "bob")
    assert meta.trajectory_source == "metadata"
    meta = extract_metadata({}, {})
    assert meta.user == "anonymous" and meta.session_id == meta.trajectory_id
    assert is_uuid7(UUID(meta.trajectory_id)) and meta.trajectory_source == "new"


def test_a_trace_is_one_trajectory_named_as_otlp_names_it_unless_an_id_is_given() -> None:
    first = extract_metadata(TRACEPARENT, {})
    second = extract_metadata({"traceparent": f"00-{TRACE}-b7ad6b7169203331-00"}, {})
    assert first.trajectory_id == second.trajectory_id == TRACE  # OTLP: the trace id's hex
    assert first.trajectory_source == "traceparent" and first.session_id == TRACE
    named = extract_metadata(TRACEPARENT | {"x-rewardstream-trajectory-id": "mine"}, {})
    assert named.trajectory_id == "mine"
    assert extract_metadata(TRACEPARENT, {"metadata": {"trajectory_id": "m"}}).trajectory_id \
        == "m"


@pytest.mark.parametrize("value", [
    f"00-{TRACE}-00f067aa0ba902b7-01-extra",  # version 00 has exactly four fields
    f"ff-{TRACE}-00f067aa0ba902b7-01", f"00-{'0' * 32}-00f067aa0ba902b7-01",
    f"00-{TRACE}-{'0' * 16}-01", f"00-{TRACE.upper()}-00f067aa0ba902b7-01", "garbage", ""])
def test_an_invalid_traceparent_is_ignored_as_w3c_says(value: str) -> None:
    meta = extract_metadata({"traceparent": value}, {})
    assert meta.trajectory_source == "new" and meta.trajectory_id != TRACE


def test_a_later_traceparent_version_may_carry_more_fields() -> None:
    meta = extract_metadata({"traceparent": f"01-{TRACE}-00f067aa0ba902b7-01-more"}, {})
    assert meta.trajectory_id == TRACE


def test_baggage_names_the_user_only_for_keys_that_trust_it_and_never_across_orgs() -> None:
    baggage = {"baggage": "user.id=dev%2042;prop=1,other=x"}
    assert extract_metadata(baggage, {}, "acme").user == "anonymous"  # not trusted
    assert extract_metadata(baggage, {}, "acme", trust_baggage=True).user == "dev 42"
    assert extract_metadata({"baggage": "enduser.id=e1"}, {}, "acme", True).user == "e1"
    assert extract_metadata(baggage, {"user": "explicit"}, "acme", True).user == "explicit"
    same_org = {"baggage": "rewardstream.org_id=acme,user.id=u1"}
    assert extract_metadata(same_org, {}, "acme", True).user == "u1"
    crossing = extract_metadata({"baggage": "rewardstream.org_id=other,user.id=u1"}, {},
                                "acme", True)
    assert crossing.user == "anonymous" and "never crosses an org" in (crossing.note or "")


@pytest.mark.parametrize(("headers", "body", "where"), [
    ({"x-rewardstream-trajectory-id": "x" * 200}, {}, "header x-rewardstream-trajectory-id"),
    ({}, {"metadata": {"trajectory_id": "t\x00"}}, "metadata.trajectory_id"),
    ({"x-rewardstream-user": "a\x85"}, {}, "header x-rewardstream-user"),
    ({}, {"user": "a\nb"}, "user"),
    ({}, {"metadata": "t1"}, "metadata"),
])
def test_bad_ids_are_refused_naming_where_they_came_from(headers: dict[str, str],
                                                         body: dict, where: str) -> None:
    with pytest.raises(RequestMetadataError) as info:
        extract_metadata(headers, body)
    assert info.value.param == where and info.value.status_code == 400


def test_a_baggage_user_with_a_control_character_is_refused() -> None:
    with pytest.raises(RequestMetadataError, match="control character U\\+0007"):
        extract_metadata({"baggage": "user.id=a%07"}, {}, "acme", True)
