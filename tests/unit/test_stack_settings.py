"""`rewardstream up`'s settings: the shipped example shows every setting with its variable, the
variable wins over the file, bad values name the setting, a clash names the port and what moves
it, and every service of the table gets a port of its own."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from infra.errors import ConfigError
from infra.ports import DEFAULT_PORTS, PortUse, check_ports
from rewardstream.stack.services import SERVICES, RunDir, enabled_services
from rewardstream.stack.settings import SETTINGS, load_stack_settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "infra" / "rewardstream.example.toml"


def _uncommented(text: str) -> str:
    """The example with every setting's line uncommented: what it shows as defaults."""
    lines = []
    for line in text.splitlines():
        bare = line.lstrip("# ")
        lines.append(bare if "  # REWARDSTREAM_" in bare and "=" in bare.split("#")[0] else line)
    return "\n".join(lines)


def test_the_example_names_every_setting_with_its_variable_and_shows_its_default() -> None:
    text = EXAMPLE.read_text()
    for setting in SETTINGS:
        name = setting.key.rsplit(".", 1)[-1]
        line = next((row for row in text.splitlines() if setting.env in row), None)
        assert line is not None and f"{name} = " in line, setting.key
    shown = tomllib.loads(_uncommented(text))
    flat = {f"{section}.{key}" if isinstance(values, dict) else section: value
            for section, values in shown.items()
            for key, value in (values.items() if isinstance(values, dict) else [(None, values)])}
    assert set(flat) == {s.key for s in SETTINGS}
    for setting in SETTINGS:
        if setting.is_port:  # the ports it shows are the defaults, which the services share
            assert flat[setting.key] == setting.default, setting.key


def test_the_example_loads_and_the_variables_win(tmp_path: Path) -> None:
    settings = load_stack_settings(EXAMPLE, env={"REWARDSTREAM_INGEST_PORT": "9400",
                                                 "REWARDSTREAM_ALERTS_WEBHOOKS": "http://a, http://b",
                                                 "REWARDSTREAM_TOPIC_PREFIX": ""})
    assert settings["profile"] == "trial" and settings["keys.org"] == "acme"
    assert settings["ingest.port"] == 9400 and settings["console.port"] == 8090
    assert settings["alerts.webhooks"] == ["http://a", "http://b"]
    assert settings.run_dir == EXAMPLE.parent / "run"  # relative to the file
    assert settings["archiver.dir"] == settings.run_dir / "archive"
    assert settings.where("ingest.port") == f"ingest.port in {EXAMPLE} (or " \
        "REWARDSTREAM_INGEST_PORT)"


@pytest.mark.parametrize("text, env, words", [
    ("[ingest]\nprot = 1\n", {}, "unknown setting(s) ingest.prot"),
    ("[ingest]\nport = \"8400\"\n", {}, "ingest.port must be int"),
    ("profile = \"prod\"\n", {}, "profile 'prod': one of production, trial"),
    ("", {"REWARDSTREAM_CONSOLE_PORT": "x"}, "REWARDSTREAM_CONSOLE_PORT='x' is not an integer"),
    ("[gateway]\nenabled = true\n", {}, "gateway.enabled needs gateway.model_dir"),
    ("[ingest\n", {}, "is not valid TOML"),
])
def test_a_bad_setting_is_named(tmp_path: Path, text: str, env: dict[str, str],
                                words: str) -> None:
    file = tmp_path / "rewardstream.toml"
    file.write_text(text)
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_stack_settings(file, env=env)


def test_a_port_in_use_is_one_line_naming_it_and_its_setting() -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(ConfigError) as caught:
            check_ports([PortUse(port, "ingest", "ingest.port in x.toml (or "
                                 "REWARDSTREAM_INGEST_PORT)")])
    message = str(caught.value)
    assert "\n" not in message
    assert message == (f"port {port} (ingest) is in use by another process: stop it, or move "
                       "ingest with ingest.port in x.toml (or REWARDSTREAM_INGEST_PORT)")
    with pytest.raises(ConfigError, match="given to both ingest and console"):
        check_ports([PortUse(1, "ingest", "a"), PortUse(1, "console", "b")])


def test_every_service_listens_on_its_own_setting_and_default_port(tmp_path: Path) -> None:
    model, trainer = tmp_path / "model", tmp_path / "trainer.toml"
    settings = load_stack_settings(None, env={
        "REWARDSTREAM_GATEWAY_ENABLED": "true", "REWARDSTREAM_GATEWAY_MODEL_DIR": str(model),
        "REWARDSTREAM_TRAINER_ENABLED": "1", "REWARDSTREAM_TRAINER_CONFIG": str(trainer)})
    entries = enabled_services(settings)
    assert [e.name for e in entries] == [e.name for e in SERVICES]
    ports = [settings[entry.port] for entry in entries]
    assert len(set(ports)) == len(ports)
    assert set(ports) <= set(DEFAULT_PORTS.values())
    run = RunDir(tmp_path / "run")
    for entry in entries:
        words = entry.arguments(settings, run)
        assert str(settings[entry.port]) in words, entry.name
    assert "gateway" not in [e.name for e in enabled_services(load_stack_settings(None, env={}))]


def test_the_operations_page_lists_every_setting_with_its_variable_and_default() -> None:
    page = (ROOT / "docs" / "operations.md").read_text()
    section = page[page.index("### Settings of up"):page.index("## The local broker")]
    rows = {cells[0].strip("`"): cells for line in section.splitlines()
            if line.startswith("| `") and (cells := [c.strip() for c in line.split("|")[1:-1]])}
    assert set(rows) == {s.key for s in SETTINGS}
    for setting in SETTINGS:
        key, env, default, _ = rows[setting.key]
        assert env == f"`{setting.env}`", setting.key
        if setting.kind in (int, str, Path) and setting.default not in (None, ""):
            assert default == f"`{setting.default}`", setting.key
