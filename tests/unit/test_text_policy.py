"""The text policy: which orgs' prompt and completion text is written, redaction first, the
bounds; the gateway's rendering of a request's text; ingest applying the policy, dead letter
included."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from harness.samples import sample_trajectory
from infra.errors import ConfigError
from schemas import bounds as b
from schemas.events import CompletionServed, EventAdapter, parse_event
from serving.gateway.capture import captured_text, prompt_text
from serving.gateway.stream import StreamAccumulator
from serving.ingest.keys import ALL, ApiKey, hash_key, pseudonymise
from serving.ingest.verdicts import Accepted, EventRules, Rejected, judge_event
from serving.textpolicy import REDACTED, OrgText, TextPolicy, load_text_policy

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
PSEUDONYM = partial(pseudonymise, b"0123456789abcdef")
SECRET = "sk-" + "A" * 24
POLICY = TextPolicy(patterns=(re.compile(r"sk-[A-Za-z0-9]{20,}"),),
                    orgs={"quiet": OrgText(capture=False),
                          "beta": OrgText(patterns=(re.compile(r"\d{3}-\d{4}"),))})


def scrub_beta(org_id: str, text: str) -> str:
    return text.replace("Bob", "[name]")


def failing_hook(org_id: str, text: str) -> str:
    raise RuntimeError(f"cannot read {text}")


def test_an_org_with_capture_off_gets_no_text_at_all() -> None:
    assert POLICY.captures("acme") and not POLICY.captures("quiet")
    assert POLICY.redact("quiet", "hello") is None
    assert POLICY.text_fields("quiet", "p", "c") == {
        "prompt_text": None, "completion_text": None, "text_truncated": False}
    assert not TextPolicy(capture=False, orgs={"open": OrgText(capture=True)}).captures("x")
    assert TextPolicy(capture=False, orgs={"open": OrgText(capture=True)}).captures("open")


def test_shared_then_org_patterns_then_the_hook_redact_before_anything_is_written() -> None:
    policy = TextPolicy(patterns=POLICY.patterns, hook=scrub_beta, orgs=POLICY.orgs)
    text = f"key {SECRET}, call Bob at 555-1234"
    assert policy.redact("acme", text) == f"key {REDACTED}, call [name] at 555-1234"
    assert policy.redact("beta", text) == f"key {REDACTED}, call [name] at {REDACTED}"


def test_a_failing_hook_drops_the_text_and_logs_no_text(caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    policy = TextPolicy(hook=failing_hook)
    assert policy.text_fields("acme", "my secret prompt", "x")["prompt_text"] is None
    assert "RuntimeError" in caplog.text and "my secret prompt" not in caplog.text


def test_text_is_cut_to_its_bound_prompt_keeping_its_end_completion_its_start() -> None:
    prompt = "old " + "é" * b.PROMPT_TEXT_MAX_BYTES + " newest question"
    completion = "first words " + "€" * b.COMPLETION_TEXT_MAX_BYTES
    fields = TextPolicy().text_fields("acme", prompt, completion)
    assert fields["text_truncated"] is True
    assert fields["prompt_text"].endswith(" newest question")
    assert not fields["prompt_text"].startswith("old")
    assert fields["completion_text"].startswith("first words ")
    assert len(fields["prompt_text"].encode()) <= b.PROMPT_TEXT_MAX_BYTES
    assert len(fields["completion_text"].encode()) <= b.COMPLETION_TEXT_MAX_BYTES
    short = TextPolicy().text_fields("acme", "a\tb\nc\x00d\x1b", "ok")
    assert short == {"prompt_text": "a\tb\nc\ufffdd\ufffd", "completion_text": "ok",
                     "text_truncated": False}


def test_a_dead_letter_keeps_no_text_of_an_org_without_capture_and_redacts_the_rest() -> None:
    event = {"type": "completion.served", "payload": {"prompt_text": f"key {SECRET}", "x": 1}}
    raw = json.dumps(event).encode()
    assert json.loads(POLICY.scrub_raw("quiet", raw)) == {"type": "completion.served",
                                                          "payload": {"x": 1}}
    assert json.loads(POLICY.scrub_raw("acme", raw))["payload"] == {
        "x": 1, "prompt_text": f"key {REDACTED}"}
    assert TextPolicy().scrub_raw("acme", raw) is raw  # nothing to redact: the bytes as sent
    cut = f'{{"payload": {{"prompt_text": "{SECRET} and mo'.encode()
    assert POLICY.scrub_raw("quiet", cut) == b""
    assert POLICY.scrub_raw("acme", cut) == b'{"payload": {"prompt_text": "[redacted] and mo'
    assert POLICY.scrub_raw("quiet", b"not json at all") == b"not json at all"


def test_the_policy_file_is_read_and_every_mistake_named(tmp_path: Path) -> None:
    path = tmp_path / "text.toml"
    path.write_text(f"""capture = true
redact = ['sk-[A-Za-z0-9]{{20,}}']
hook = "{__name__}:scrub_beta"
[orgs.quiet]
capture = false
[orgs.beta]
redact = ['\\d{{3}}-\\d{{4}}']
""")
    policy = load_text_policy(path)
    assert not policy.captures("quiet") and policy.captures("beta")
    assert policy.redact("beta", f"{SECRET} Bob 555-1234") == f"{REDACTED} [name] {REDACTED}"
    assert load_text_policy(env={"REWARDSTREAM_TEXT_POLICY_FILE": str(path)}) == policy
    assert load_text_policy(env={}) == TextPolicy()
    for text, problem in [("redact = ['(']", "is not a regular expression"),
                          ("capture = 'no'", "capture must be true or false"),
                          ("colour = 1", "unknown setting"),
                          ('hook = "no.such.module:f"', "cannot be loaded"),
                          ("[orgs.'../x']\ncapture = false", "is not an org id"),
                          ("[orgs.a]\nlabel = 1", "may set capture and redact only")]:
        path.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(problem)):
            load_text_policy(path)


def test_the_gateway_writes_a_chats_messages_and_the_completions_calls_as_text() -> None:
    body = {"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Fix "}, {"text": "it"}]},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]},
        {"role": "tool", "content": "x = 1"}]}
    assert prompt_text("chat", body) == ("system: Be brief.\nuser: Fix it\n"
                                         'assistant: <tool>read_file {"path": "a.py"}</tool>\n'
                                         "tool: x = 1")
    assert prompt_text("completion", {"prompt": [1, 2, 3]}) is None
    acc = StreamAccumulator("chat", text="Reading.", tool_calls=[
        {"function": {"name": "grep", "arguments": "{}"}}])
    assert captured_text(POLICY, "acme", "completion", {"prompt": "def f():"}, acc) == {
        "prompt_text": "def f():", "completion_text": "Reading.<tool>grep {}</tool>",
        "text_truncated": False}
    assert captured_text(POLICY, "quiet", "chat", body, acc) == {}


def _served_with_text(prompt: str, completion: str) -> bytes:
    event = sample_trajectory("traj-1", start=NOW)[0]
    assert isinstance(event, CompletionServed)
    payload = event.payload.model_copy(update={"prompt_text": prompt,
                                               "completion_text": completion})
    return EventAdapter.dump_json(event.model_copy(update={"payload": payload}))


def _judge(org_id: str, raw: bytes) -> Accepted | Rejected:
    key = ApiKey("serving", hash_key("k"), org_id, frozenset({ALL, "completion.served"}))
    return judge_event(0, raw, key, NOW, PSEUDONYM, EventRules(text_policy=POLICY))


def test_ingest_stores_a_clients_text_as_the_policy_allows() -> None:
    raw = _served_with_text(f"line one\nkey {SECRET}", "done")
    kept = _judge("acme", raw)
    assert isinstance(kept, Accepted)
    payload = parse_event(kept.stored).payload
    assert (payload.prompt_text, payload.completion_text) == (  # type: ignore[union-attr]
        f"line one\nkey {REDACTED}", "done")
    quiet = _judge("quiet", raw)
    assert isinstance(quiet, Accepted)
    assert b"line one" not in quiet.stored and b"prompt_text\":null" in quiet.stored


def test_ingest_dead_letters_a_refused_event_without_the_text_its_org_did_not_allow() -> None:
    raw = _served_with_text("private words", "more private words").replace(
        b'"latency_ms":40.0', b'"latency_ms":-1.0')
    for org_id, keeps_text in (("quiet", False), ("acme", True)):
        refused = _judge(org_id, raw)
        assert isinstance(refused, Rejected) and refused.field == "payload.latency_ms"
        assert (b"private words" in refused.original) is keeps_text
