"""What ``pip install .`` (CI's, not editable) ships: every package folder of the source tree.

pyproject lists the packages by hand (the four top folders map onto ``dynlab.*``); a folder
left out installs nothing and its imports fail only outside an editable checkout."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(tool["packages"])
    found = set()
    for name, folder in tool["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *rel.parts]))
    assert found - listed == set(), f"package folders not in pyproject's packages: {sorted(found - listed)}"
    assert listed - found == set(), f"pyproject lists packages with no folder: {sorted(listed - found)}"
