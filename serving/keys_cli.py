"""``rewardstream keys create|list|revoke``: API keys of ingest, the gateway and the console.

Every service reads the same key-file format (``serving/ingest/keys.py``), holding only each
key's SHA-256. Rotation: create the new key under a new name in the same file, give it to the
client, and revoke the old one once the client uses the new; services reread a key file within
a second of a change.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from schemas.bounds import org_id_problem
from schemas.events import EVENT_TYPES
from serving.ingest.errors import KeyConfigError
from serving.ingest.keys import (
    ALL,
    DEFAULT_RATES,
    SERVING_EVENT_TYPES,
    ApiKey,
    KeyScope,
    hash_key,
    new_key,
)

__all__ = ["DuplicateKeyName", "EventTypeChoice", "add_key", "make_key", "register"]

keys_app = typer.Typer(help="Make, list and revoke API keys (ingest, gateway, console).",
                       no_args_is_help=True)

EventTypeChoice = StrEnum(  # type: ignore[misc]
    "EventTypeChoice", {t.upper().replace(".", "_") if t != ALL else "ALL": t
                        for t in (ALL, *EVENT_TYPES)})


def make_key(scope: KeyScope, orgs: list[str], name: str, types: list[str],
             rate_per_s: float | None, burst: float | None) -> tuple[str, ApiKey]:
    """A fresh key and its entry; refuses (``typer.BadParameter``) what does not fit the
    scope, naming the option."""
    for org in orgs:
        if org != ALL and (problem := org_id_problem(org)) is not None:
            raise typer.BadParameter(problem, param_hint="--org")
    if scope is KeyScope.CONSOLE:
        if not name:
            raise typer.BadParameter("a console key needs the staff member's name",
                                     param_hint="--name")
        if types or rate_per_s is not None or burst is not None:
            raise typer.BadParameter("console keys carry no event types or rates",
                                     param_hint="--types/--rate-per-s/--burst")
        if ALL in orgs and len(orgs) > 1:
            raise typer.BadParameter("'*' (every org) stands alone", param_hint="--org")
        key = new_key()
        return key, ApiKey(name, hash_key(key), "", scope=scope, orgs=frozenset(orgs))
    if len(orgs) != 1 or orgs[0] == ALL:
        raise typer.BadParameter(f"{scope} keys belong to exactly one org (not '*'), got "
                                 f"{', '.join(orgs)}", param_hint="--org")
    if types and scope is not KeyScope.INGEST:
        raise typer.BadParameter("only ingest keys send events", param_hint="--types")
    for option, value in (("--rate-per-s", rate_per_s), ("--burst", burst)):
        if value is not None and not value > 0:
            raise typer.BadParameter(f"must be positive, got {value:g}", param_hint=option)
    default_rate, default_burst = DEFAULT_RATES[scope]
    key = new_key()
    return key, ApiKey(
        name or f"{orgs[0]}-{scope}", hash_key(key), orgs[0],
        frozenset(types or [ALL]) if scope is KeyScope.INGEST else frozenset(),
        rate_per_s or default_rate, burst or default_burst, scope)


def _with_user_options(entry: ApiKey, default_user: str | None,
                       trust_baggage: bool) -> ApiKey:
    """``entry`` with the options that say where users come from, checked as the services
    will read them."""
    entry = replace(entry, default_user=default_user, trust_baggage=trust_baggage)
    try:
        return ApiKey.from_entry(entry.to_entry(), 0)
    except KeyConfigError as exc:
        raise typer.BadParameter(str(exc).removeprefix("API key entry 0: "),
                                 param_hint="--default-user/--trust-baggage") from None


def _read_entries(path: Path) -> list[dict[str, Any]]:
    try:
        entries = json.loads(path.read_text())
    except OSError as exc:
        raise KeyConfigError(f"cannot read the key file {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise KeyConfigError(f"the key file {path} is not valid JSON: {exc}") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise KeyConfigError(f"the key file {path} must be a JSON list of objects")
    for position, entry in enumerate(entries):
        ApiKey.from_entry(entry, position)  # refuse to edit a file the services would refuse
    return entries


def _write_entries(path: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the file at once (readers see the old or the new list, never half of one),
    readable by its owner only. A missing directory is made, as ``write_private`` makes one."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or Path("."))
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(entries, out, indent=1)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class DuplicateKeyName(KeyConfigError):
    """The key file already has a key of that name."""


def add_key(file: Path, entry: ApiKey) -> None:
    """Add ``entry`` to the key file (made if missing; readable by its owner only)."""
    entries = _read_entries(file) if file.exists() else []
    if any(e.get("name") == entry.name for e in entries):
        raise DuplicateKeyName(f"{file} already has a key named {entry.name!r}; choose another "
                               "(rotation: the new key under a new name, then revoke the old)")
    _write_entries(file, [*entries, entry.to_entry()])


def _describe(entry: ApiKey) -> str:
    if entry.scope is KeyScope.CONSOLE:
        return "orgs " + ", ".join(sorted(entry.orgs))
    text = f"org {entry.org_id}"
    if entry.scope is KeyScope.INGEST:
        types = sorted(entry.event_types)
        serving = sorted(SERVING_EVENT_TYPES & entry.event_types)
        text += "  types " + ",".join(types) + ("  (writes " + ",".join(serving) +
                                                 ": a serving principal)" if serving else "")
    unit = "events" if entry.scope is KeyScope.INGEST else "requests"
    text += f"  {entry.rate_per_s:g} {unit}/s, burst {entry.burst:g}"
    if entry.default_user is not None:
        text += f"  default user {entry.default_user!r}"
    return text + ("  trusts baggage" if entry.trust_baggage else "")


@keys_app.command("create")
def create(
    scope: KeyScope = typer.Option(..., "--for", case_sensitive=False,
                                   help="The service that accepts the key."),
    org: list[str] = typer.Option(..., help="Ingest and gateway: the one org everything sent "
                                  "with the key belongs to. Console: an org the staff member "
                                  "sees (repeat the option), or '*' for every org."),
    name: str = typer.Option("", help="A unique label (in metrics, dead letters, `keys list`, "
                             "`keys revoke`); console keys: the staff member's name. Default: "
                             "ORG-SERVICE."),
    types: list[EventTypeChoice] = typer.Option(
        [], help="Ingest: an event type the key may send (repeat the option). Default '*': every "
        "type a client sends; completion.served (the gateway's) only when named."),
    rate_per_s: float = typer.Option(None, help="Sustained events (ingest) or requests "
                                     "(gateway) per second; default 2000 or 20."),
    burst: float = typer.Option(None, help="How many the key may send at once above the rate; "
                                "default 10000 or 100."),
    file: Path = typer.Option(None, help="Add the entry to this key file (made if missing); "
                              "without it the entry is only printed."),
    default_user: str = typer.Option(None, help="Ingest: the user of OTLP spans that name none "
                                     "(user.id, enduser.id); without it such spans are "
                                     "refused, saying so."),
    trust_baggage: bool = typer.Option(False, help="Gateway: a request's W3C baggage may name "
                                       "its user (user.id); baggage naming another org is "
                                       "ignored."),
) -> None:
    """Make a new key: prints the key (give it to its holder; it is stored nowhere) and the
    entry, which holds only the key's SHA-256.

    Example: rewardstream keys create --for ingest --org acme --types tool.called --types
    edit.decided --file ingest-keys.json
    """
    key, entry = make_key(scope, org, name, [str(t) for t in types], rate_per_s, burst)
    entry = _with_user_options(entry, default_user, trust_baggage)
    if file is not None:
        try:
            add_key(file, entry)
        except DuplicateKeyName as exc:
            raise typer.BadParameter(str(exc), param_hint="--name") from None
    typer.echo(f"key:   {key}")
    typer.echo(f"entry: {json.dumps(entry.to_entry())}")
    if file is not None:
        typer.echo(f"added {entry.name!r} to {file}")


_FILE_HELP = "The key file (as `keys create --file`)."


def _key_file(file: Path | None, positional: list[str], command: str, usage: str) -> Path:
    """``--file``, or the file named first the way these commands took it before (which still
    works, with a note on stderr)."""
    if file is not None and positional and command == "list":
        raise typer.BadParameter("give the key file once, with --file", param_hint="--file")
    if file is not None:
        return file
    if not positional:
        raise typer.BadParameter(f"which key file? rewardstream keys {usage}",
                                 param_hint="--file")
    typer.echo(f"note: `keys {command} FILE ...` is deprecated; use `keys {usage}`, as "
               "`keys create --file`", err=True)
    return Path(positional[0])


# The positional forms of before stay accepted as extra arguments, out of the usage line.
_LEGACY = {"allow_extra_args": True}


@keys_app.command("list", context_settings=_LEGACY)
def list_keys(ctx: typer.Context, file: Path = typer.Option(None, help=_FILE_HELP)) -> None:
    """The keys of a file: name, service and what each may do (never a key or its hash).

    Example: rewardstream keys list --file ingest-keys.json
    """
    file = _key_file(file, ctx.args, "list", "list --file FILE")
    entries = [ApiKey.from_entry(e, i) for i, e in enumerate(_read_entries(file))]
    width = max((len(e.name) for e in entries), default=4)
    for entry in entries:
        typer.echo(f"{entry.name:<{width}}  {entry.scope:<7}  {_describe(entry)}")
    if not entries:
        typer.echo(f"{file} holds no keys")


@keys_app.command("revoke", context_settings=_LEGACY)
def revoke(
    ctx: typer.Context,
    file: Path = typer.Option(None, help=_FILE_HELP),
    name: str = typer.Option(None, help="The name of the key to remove (`keys list` shows "
                             "them)."),
) -> None:
    """Remove a key from its file; services reading the file refuse it within a second.

    Example: rewardstream keys revoke --file ingest-keys.json --name acme-ingest
    """
    legacy = ctx.args
    if file is None and name is None and len(legacy) == 2:
        file, name = _key_file(None, legacy, "revoke", "revoke --file FILE --name NAME"), \
            legacy[1]
    elif legacy:
        raise typer.BadParameter(f"unexpected {' '.join(legacy)!r}: name the key with --name "
                                 "and its file with --file", param_hint="--name")
    if file is None or name is None:
        raise typer.BadParameter("both are needed: rewardstream keys revoke --file FILE --name "
                                 "NAME", param_hint="--file/--name")
    entries = _read_entries(file)
    kept = [e for e in entries if e.get("name") != name]
    if len(kept) == len(entries):
        known = ", ".join(repr(str(e.get("name"))) for e in entries) or "none"
        raise KeyConfigError(f"{file} has no key named {name!r} (it has {known})")
    _write_entries(file, kept)
    removed = len(entries) - len(kept)
    typer.echo(f"revoked {name!r} in {file}" + (f" ({removed} entries)" if removed > 1 else ""))


def register(app: typer.Typer) -> None:
    app.add_typer(keys_app, name="keys")
