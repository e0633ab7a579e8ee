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


# --- declared outputs (issue 47, item 3) ------------------------------------------------------


def test_every_analysis_declares_its_outputs_and_its_headlines_name_them():
    """Each registered analysis declares its variables (name, dims, kind); what its headline and
    ``finite`` name is among them (checked at registration, so this holds for every entry)."""
    for name in ANALYSES:
        entry = registry.get("analysis", name)
        assert entry.outputs, f"{name} declares no outputs"
        names = [o.name for o in entry.outputs]
        assert len(names) == len(set(names)), f"{name} declares a variable twice"
        assert {v for v, _ in entry.headline} | set(entry.finite) <= set(names)


def test_a_headline_that_is_not_a_declared_output_fails_when_registered():
    from dynlab.outputs import Output

    def scored(model, *, steps: int = 3) -> xr.Dataset: ...

    with pytest.raises(ValueError, match="headline/finite variable 'score' is not a declared output; outputs: other"):
        registry.register("analysis", "test-undeclared-headline", figure=lambda ds: None,
                          outputs=(Output("other"),), headline=(("score", "a score"),))(scored)
    assert "test-undeclared-headline" not in registry._REGISTRY["analysis"]


def test_a_dataset_that_drifts_from_its_declaration_is_named_on_every_call():
    """The registered function is checked on every call, wherever it runs (a test, a cell, the
    command line): a variable added, one dropped, dims changed are each named."""
    from dynlab.outputs import Output, OutputsWarning

    def drifting(model, *, extra: bool = False, steps: int = 3) -> xr.Dataset:
        ds = xr.Dataset({"value": ("time", [1.0, 2.0, 3.0][:steps])})
        return ds.assign(added=1.0) if extra else ds

    declared = (Output("value", "real", ("time",)), Output("count", "count"))
    fn = registry.register("analysis", "test-drifting", figure=lambda ds: None, outputs=declared)(drifting)
    try:
        assert registry.get("analysis", "test-drifting").obj is fn
        with pytest.warns(OutputsWarning, match=r"'test-drifting'.*'added' is not declared; 'count' is declared but "
                                                r"not written"):
            fn(None, extra=True)
    finally:
        del registry._REGISTRY["analysis"]["test-drifting"]
    fn = registry.register("analysis", "test-drifting", figure=lambda ds: None,
                           outputs=(Output("value", "real", ("step",)),))(drifting)
    try:
        with pytest.warns(OutputsWarning, match=r"'value' has dims \('time',\), declared \('step',\)"):
            fn(None)
    finally:
        del registry._REGISTRY["analysis"]["test-drifting"]


CHEAP = {  # analyses that compile in a few seconds on a tiny model; the others are checked where the suite runs them
    "weight-eigs": ("rnn", "adding", {}),
    "jacobian-grid": ("aru", "adding", {"n_values": (1.0, 2.0), "s_values": (0.0,), "samples": 3}),
    "dilation": ("rnn", "hierarchical-language", {"dilations": (0, 1)}),
}


@pytest.mark.parametrize("name", sorted(CHEAP))
def test_a_cheap_analysis_writes_exactly_its_declared_outputs(name):
    """Run directly on a tiny fresh model: no variable or dim other than declared, none missing."""
    import warnings

    from dynlab import experiment
    from dynlab.outputs import OutputsWarning, mismatch

    unit, task, options = CHEAP[name]
    model = experiment.build({"model": {"unit": unit, "hidden": 4}, "task": {"name": task}}, training=False).model
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=OutputsWarning)
        ds = registry.get("analysis", name).obj(model, **options)
    assert mismatch(registry.get("analysis", name).outputs, ds) == []
