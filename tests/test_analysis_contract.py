"""The analysis contract: every registered analysis has a figure that ``dynlab plot`` finds
through the registry, and a command under ``dynlab analyze`` with a working ``--help``."""

import xarray as xr
import pytest

import dynlab
from cli_runner import invoke
from dynlab import figures, registry

ANALYSES = dynlab.names("analysis")


@pytest.mark.parametrize("name", ANALYSES)
def test_every_analysis_has_a_figure_that_plot_dispatches_to(name, monkeypatch):
    entry = registry.get("analysis", name)
    assert callable(entry.figure), f"{name} registers no figure"
    sentinel = object()
    patched = registry.Entry(entry.kind, entry.name, entry.obj, entry.description, lambda ds: sentinel, entry.summary)
    monkeypatch.setitem(registry._REGISTRY["analysis"], name, patched)
    assert figures.plot_dataset(xr.Dataset(attrs={"analysis": name})) is sentinel


@pytest.mark.parametrize("name", ANALYSES)
def test_every_analysis_is_a_command_with_help(name, tmp_path):
    listed = invoke(["analyze", "--help"], tmp_path)
    assert listed.exit_code == 0 and name in listed.output
    helped = invoke(["analyze", name, "--help"], tmp_path)
    assert helped.exit_code == 0 and "Usage:" in helped.output, helped.output
