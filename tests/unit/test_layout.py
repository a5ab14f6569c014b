"""Every top-level package is installed, type-checked and placed in the import layers, and the
layers hold without exceptions (pyproject.toml), so a new package cannot slip past the checks."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = {init.parent.name for init in ROOT.glob("*/__init__.py")}


def test_every_package_is_installed_and_type_checked() -> None:
    installed = {pattern.rstrip("*") for pattern in
                 CONFIG["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert PACKAGES - installed == set(), "not in [tool.setuptools.packages.find] include"
    assert PACKAGES - set(CONFIG["tool"]["mypy"]["files"]) == set(), "not in [tool.mypy] files"


def test_every_package_has_a_layer_and_no_import_is_excepted() -> None:
    linter = CONFIG["tool"]["importlinter"]
    roots = set(linter["root_packages"])  # the checkout's packages, and the SDK's beside them
    assert PACKAGES - roots == set(), "not in [tool.importlinter] root_packages"
    for contract in linter["contracts"]:
        assert "ignore_imports" not in contract, f"{contract['name']}: an exception to the rule"
    layered = {name.strip() for contract in linter["contracts"] if contract["type"] == "layers"
               for layer in contract["layers"] for name in layer.split("|")}
    assert roots - layered == set(), "not in a layer of [tool.importlinter]"
    assert linter["contracts"][0]["layers"][0] == "rewardstream"  # the command line is on top
