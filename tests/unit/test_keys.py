"""The key-file format every service reads, its scopes, rereading on change, and the `keys`
commands that make, list and revoke keys."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardstream.cli import app
from serving.ingest.errors import KeyConfigError
from serving.ingest.keys import (
    CLIENT_EVENT_TYPES,
    ApiKey,
    KeyFile,
    KeyRing,
    KeyScope,
    hash_key,
    load_keys,
    presented_key,
    pseudonym_secret,
)
from serving.ingest.limits import RateLimiter

RUNNER = CliRunner()


def _entry(**fields: object) -> dict[str, object]:
    return {"key_sha256": hash_key("k"), "org_id": "acme"} | fields


def test_star_is_every_client_type_and_completion_served_only_when_named() -> None:
    client = ApiKey.from_entry(_entry(event_types=["*"]), 0)
    assert all(client.allows(t) for t in CLIENT_EVENT_TYPES)
    assert not client.allows("completion.served")
    default = ApiKey.from_entry(_entry(), 0)  # an entry without event_types is a "*" key
    assert not default.allows("completion.served") and default.allows("edit.decided")
    serving = ApiKey.from_entry(_entry(event_types=["completion.served", "tool.called"]), 0)
    assert serving.allows("completion.served") and serving.allows("tool.called")
    assert not serving.allows("edit.decided")


def test_keys_of_other_services_send_no_events_and_carry_their_own_fields() -> None:
    gateway = ApiKey.from_entry(_entry(scope="gateway"), 0)
    assert gateway.scope is KeyScope.GATEWAY and not gateway.allows("tool.called")
    assert (gateway.rate_per_s, gateway.burst) == (20.0, 100.0)  # requests, not events
    staff = ApiKey.from_entry({"key_sha256": hash_key("s"), "scope": "console", "name": "ana",
                               "orgs": ["acme", "beta"]}, 1)
    assert staff.orgs == {"acme", "beta"} and not staff.allows("tool.called")


@pytest.mark.parametrize("entry, words", [
    (_entry(scope="admin"), "scope 'admin' is not one of ingest, gateway, console"),
    (_entry(scope=["ingest"]), "scope"),
    (_entry(scope="gateway", event_types=["*"]), "event_types is for ingest keys"),
    ({"key_sha256": hash_key("s"), "scope": "console"}, "missing field 'orgs'"),
    ({"key_sha256": hash_key("s"), "scope": "console", "orgs": []}, "non-empty list"),
    (_entry(rate_per_s="fast"), "could not convert"),
    (_entry(org_id="a/../b"), "org_id: 'a/../b' is not an org id"),
    ({"key_sha256": hash_key("s"), "scope": "console", "orgs": ["acme", "a|b"]},
     "orgs: 'a|b' is not an org id"),
    (_entry(scope="gateway", default_user="u"), "default_user is for ingest keys"),
    (_entry(default_user="u\x00"), "default_user contains the control character U\\+0000"),
    (_entry(default_user=""), "default_user must be a string of 1 to 256"),
    (_entry(trust_baggage=True), "trust_baggage is for gateway keys"),
    (_entry(scope="gateway", trust_baggage="yes"), "trust_baggage must be true or false"),
])
def test_bad_entries_name_the_entry_and_the_field(entry: dict[str, object], words: str) -> None:
    with pytest.raises(KeyConfigError, match=f"API key entry 0: .*{words}"):
        KeyRing.from_json(json.dumps([entry]), "inline")


@pytest.mark.parametrize("key", [
    ApiKey("i", hash_key("a"), "acme", frozenset({"*", "completion.served"}), 5.0, 9.0),
    ApiKey("g", hash_key("b"), "acme", rate_per_s=3.0, burst=4.0, scope=KeyScope.GATEWAY),
    ApiKey("ana", hash_key("c"), "", scope=KeyScope.CONSOLE, orgs=frozenset({"*"})),
    ApiKey("o", hash_key("d"), "acme", frozenset({"*"}), default_user="editor-bot"),
    ApiKey("t", hash_key("e"), "acme", scope=KeyScope.GATEWAY, trust_baggage=True),
])
def test_an_entry_reads_back_as_the_key_it_was_written_from(key: ApiKey) -> None:
    assert ApiKey.from_entry(json.loads(json.dumps(key.to_entry())), 0) == key


def test_a_key_file_is_reread_when_it_changes_and_kept_when_it_breaks(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps([_entry(name="old")]))
    keys = KeyFile(path, check_every_s=0.0)
    assert keys.lookup("k") is not None and keys.lookup("new") is None
    path.write_text(json.dumps([_entry(name="new", key_sha256=hash_key("new"))]))
    os.utime(path, ns=(1, 1))  # a different stamp even within the clock's resolution
    assert keys.lookup("new") is not None and keys.lookup("k") is None  # "k" was revoked
    path.write_text("[{not json")
    os.utime(path, ns=(2, 2))
    assert keys.lookup("new") is not None  # a broken edit locks nobody out


def test_keys_come_from_a_file_or_inline_and_their_absence_says_how_to_make_one(
        tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps([_entry()]))
    assert isinstance(load_keys({"X_KEYS_FILE": str(path)}, "X_"), KeyFile)
    assert len(load_keys({"X_KEYS": json.dumps([_entry()])}, "X_")) == 1
    with pytest.raises(KeyConfigError, match="X_KEYS_FILE.*rewardstream keys create"):
        load_keys({}, "X_")
    with pytest.raises(KeyConfigError, match="cannot read the key file"):
        load_keys({"X_KEYS_FILE": str(tmp_path / "missing.json")}, "X_")
    with pytest.raises(KeyConfigError, match="16\\+ characters"):
        pseudonym_secret({"REWARDSTREAM_INGEST_PSEUDONYM_SECRET": "short"})


def test_keys_are_read_from_bearer_or_x_api_key() -> None:
    assert presented_key({"authorization": "Bearer rsk_a"}) == "rsk_a"
    assert presented_key({"authorization": "bearer  rsk_b "}) == "rsk_b"
    assert presented_key({"x-api-key": "rsk_c"}) == "rsk_c"
    assert presented_key({"authorization": "Basic abc"}) is None


def test_a_peek_spends_nothing_and_full_buckets_are_forgotten_past_the_cap() -> None:
    limiter = RateLimiter(max_buckets=2)
    assert limiter.take("a", 1.0, 2.0, 2.0, now_s=0.0) == 0.0
    assert limiter.wait_s("a", 1.0, now_s=0.0) == pytest.approx(1.0)
    assert limiter.wait_s("a", 1.0, now_s=0.0) == pytest.approx(1.0)  # still nothing spent
    assert limiter.wait_s("unknown", 1.0, now_s=0.0) == 0.0
    limiter.take("b", 1.0, 2.0, 1.0, now_s=0.0)
    limiter.take("c", 1.0, 2.0, 1.0, now_s=0.5)  # at the cap, nothing full yet: kept
    assert len(limiter) == 3
    limiter.take("d", 1.0, 2.0, 1.0, now_s=10.0)  # by now a, b and c are full again
    assert len(limiter) == 1


# ------------------------------------------------------------------------ the commands


def _invoke(*args: str) -> str:
    result = RUNNER.invoke(app, ["keys", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _key(output: str) -> str:
    return next(line.split(":", 1)[1].strip() for line in output.splitlines()
                if line.startswith("key:"))


def test_create_list_and_revoke_a_key_file(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    ingest = _key(_invoke("create", "--for", "ingest", "--org", "acme", "--file", str(path)))
    gateway = _key(_invoke("create", "--for", "gateway", "--org", "acme", "--rate-per-s", "5",
                           "--file", str(path)))
    staff = _key(_invoke("create", "--for", "console", "--org", "acme", "--org", "beta",
                         "--name", "ana", "--file", str(path)))
    ring = KeyRing.from_json(path.read_text(), str(path))
    found = {key: ring.lookup(key) for key in (ingest, gateway, staff)}
    assert [(k.name, k.scope) for k in found.values()] == [  # type: ignore[union-attr]
        ("acme-ingest", "ingest"), ("acme-gateway", "gateway"), ("ana", "console")]
    assert found[ingest].event_types == {"*"}  # type: ignore[union-attr]
    assert found[gateway].rate_per_s == 5.0  # type: ignore[union-attr]
    assert found[staff].orgs == {"acme", "beta"}  # type: ignore[union-attr]
    assert oct(path.stat().st_mode & 0o777) == "0o600"

    listing = _invoke("list", "--file", str(path))
    assert "acme-gateway  gateway  org acme  5 requests/s" in listing
    assert "ana" in listing and "orgs acme, beta" in listing
    assert not any(secret in listing for secret in (ingest, hash_key(ingest)))

    _invoke("revoke", "--file", str(path), "--name", "acme-gateway")
    ring = KeyRing.from_json(path.read_text(), str(path))
    assert ring.lookup(gateway) is None and ring.lookup(ingest) is not None
    missing = RUNNER.invoke(app, ["keys", "revoke", "--file", str(path), "--name",
                                  "acme-gateway"])
    assert isinstance(missing.exception, KeyConfigError)
    assert "no key named 'acme-gateway'" in str(missing.exception)


def test_create_makes_the_key_files_directory(tmp_path: Path) -> None:
    path = tmp_path / "config" / "ingest_keys.json"  # as compose's secrets name it, made fresh
    key = _key(_invoke("create", "--for", "ingest", "--org", "acme", "--file", str(path)))
    assert KeyRing.from_json(path.read_text(), str(path)).lookup(key) is not None
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"


def test_the_positional_key_file_of_before_still_works_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    _invoke("create", "--for", "ingest", "--org", "acme", "--file", str(path))
    listed = RUNNER.invoke(app, ["keys", "list", str(path)])
    assert listed.exit_code == 0 and "acme-ingest  ingest" in listed.stdout
    assert "deprecated; use `keys list --file FILE`" in listed.stderr
    revoked = RUNNER.invoke(app, ["keys", "revoke", str(path), "acme-ingest"])
    assert revoked.exit_code == 0 and "revoked 'acme-ingest'" in revoked.stdout
    assert "deprecated" in revoked.stderr
    assert json.loads(path.read_text()) == []
    unnamed = RUNNER.invoke(app, ["keys", "revoke", "--file", str(path)])
    assert unnamed.exit_code == 2 and "--file FILE --name NAME" in unnamed.output


@pytest.mark.parametrize("args, words", [
    (["--for", "ingest", "--org", "a", "--org", "b"], "exactly one org"),
    (["--for", "gateway", "--org", "*"], "exactly one org"),
    (["--for", "gateway", "--org", "a", "--types", "tool.called"], "only ingest keys"),
    (["--for", "console", "--org", "a"], "staff member's name"),
    (["--for", "console", "--org", "*", "--org", "a", "--name", "x"], "stands alone"),
    (["--for", "ingest", "--org", "a", "--rate-per-s", "0"], "must be positive"),
    (["--for", "ingest", "--org", "a", "--types", "tool.calld"], "'tool.calld' is not one of"),
    (["--for", "staff", "--org", "a"], "'staff' is not one of"),
    (["--for", "ingest", "--org", "acme corp"], "'acme corp' is not an org id"),
])
def test_create_refuses_what_does_not_fit_naming_the_option(args: list[str], words: str) -> None:
    result = RUNNER.invoke(app, ["keys", "create", *args])
    assert result.exit_code == 2 and words in " ".join(result.output.split()), result.output


def test_a_name_already_in_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    _invoke("create", "--for", "ingest", "--org", "acme", "--file", str(path))
    again = RUNNER.invoke(app, ["keys", "create", "--for", "ingest", "--org", "acme",
                                "--file", str(path)])
    assert again.exit_code == 2 and "already has a key named" in again.output
    assert len(json.loads(path.read_text())) == 1


def test_the_old_ingest_key_command_still_works_and_says_where_it_moved() -> None:
    result = RUNNER.invoke(app, ["serve", "ingest-key", "--org", "acme", "--types",
                                 "tool.called,edit.decided"])
    assert result.exit_code == 0, result.output
    assert "rewardstream keys create --for ingest" in result.output
    entry = json.loads(result.output.split("entry:", 1)[1].splitlines()[0])
    key = ApiKey.from_entry(entry, 0)
    assert key.event_types == {"tool.called", "edit.decided"} and key.org_id == "acme"
