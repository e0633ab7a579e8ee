"""Issue 34, item 3: ``dynlab analyze NAME`` is generated from the registered analysis, so the
command with no options, a scenario's ``[[analyses]]`` entry ``{name = NAME}`` with no options and
the Python call ``dynlab.analyze(NAME, model)`` (issue 47) run the same configuration, for every registered analysis of a model (a plug-in's included), for
``dsa`` (an analysis of several runs, run across a scenario's cells) and for ``compare pc-bp`` /
``analyze pc-bptt`` (no options: what the registered function runs given the task alone).

Each analysis is replaced in the registry by a recorder with its signature: the keyword arguments
it is called with, its defaults filled in, are what both paths resolved. Nothing is computed.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect

import pytest
import xarray as xr

from cli_runner import invoke
from dynlab import registry


class Recorded(Exception):
    """Raised by the recorder once it has the arguments: neither path needs a result."""


def _comparable(value):
    """Arguments as values to compare: a task by its type and description, sequences as tuples,
    an option group's value by its type and fields."""
    if hasattr(value, "batch") and hasattr(value, "describe"):
        return ("task", type(value).__name__, value.describe())
    if isinstance(value, (list, tuple)):
        return tuple(_comparable(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # an option group's value (a task inside)
        return (type(value).__name__, *(_comparable(getattr(value, f.name)) for f in dataclasses.fields(value)))
    return value


def _recorder(fn, calls: list):
    @functools.wraps(fn)
    def record(*args, **kwargs):  # (model, **options), or (model, rules, **options)
        bound = inspect.signature(fn).bind(*args, **kwargs)
        bound.apply_defaults()
        calls.append({k: tuple(v) if k == "rules" else _comparable(v)   # the rules by name
                      for k, v in bound.arguments.items() if k not in ("model", "runs")})
        raise Recorded

    return record


def plugin_steps(model, *, steps: int = 200, gain: float = 1.5, task=None, seed: int = 0) -> xr.Dataset:
    """A plug-in analysis defined here: its command must run its own ``steps = 200``."""
    raise AssertionError("replaced by the recorder")


def plugin_figure(ds):
    raise AssertionError("never drawn")


@pytest.fixture(scope="module")
def plugin():
    registry.load_plugins()
    registry.register("analysis", "test-plugin-steps", figure=plugin_figure)(plugin_steps)
    yield "test-plugin-steps"
    del registry._REGISTRY["analysis"]["test-plugin-steps"]


def _analyses_of_a_model() -> list[str]:
    return [e.name for e in registry.entries("analysis")
            if list(inspect.signature(e.obj).parameters)[:1] == ["model"]]


def _task_of_fresh_model(fn) -> str:
    """The task a fresh model is built for: the analysis's own default task when it names one."""
    default = registry.defaults(fn).get("task")
    return default if isinstance(default, str) and default != "train" else "adding"


RULES = {"name": ["pc-time", "bptt"]}
"""The cell's rules of an analysis that compares rules (``takes="rules"``), the same both ways."""


def _scenario(name: str, task: str, rules: bool = False) -> dict:
    return {"name": f"defaults-{name}", "description": "one analysis with no options on a fresh model",
            "model": {"unit": "aru"}, "task": {"name": task}, "train": {"steps": 0},
            **({"rule": RULES} if rules else {}), "analyses": [{"name": name}]}


@pytest.mark.parametrize("name", [*sorted(set(_analyses_of_a_model())), "test-plugin-steps"])
def test_the_command_and_a_scenario_entry_with_no_options_run_the_same_configuration(name, plugin, tmp_path,
                                                                                    monkeypatch):
    from dynlab.scenarios.cell import run_cell
    from dynlab.scenarios.spec import parse

    entry = registry.get("analysis", name)
    calls: list[dict] = []
    monkeypatch.setitem(registry._REGISTRY["analysis"], name,
                        dataclasses.replace(entry, obj=_recorder(entry.obj, calls)))

    rules = entry.takes == "rules"
    given = ["--set", 'rule={name=["pc-time","bptt"]}'] if rules else []
    invoke(["analyze", name, *given], tmp_path)  # ends in the recorder's exception: an internal error, exit 1
    assert len(calls) == 1, f"dynlab analyze {name} did not reach the analysis"
    scenario = parse(_scenario(name, _task_of_fresh_model(entry.obj), rules))
    cell = scenario.cells[0]
    run_cell(tmp_path / "cell", cell.config, cell.analyses)  # records the analysis's failure, carries on
    assert len(calls) == 2, f"the scenario entry {{name = {name!r}}} did not reach the analysis"
    import dynlab

    with pytest.raises(Recorded):  # the Python API, on the fresh model the command analyses
        dynlab.analyze(name, dynlab.model("aru", task=_task_of_fresh_model(entry.obj),
                                          **({"rule": RULES["name"]} if rules else {})))
    command, in_scenario, in_python = calls
    assert command == in_scenario == in_python
    if name == "test-plugin-steps":
        assert command["steps"] == 200  # the plug-in's own default, not a command-line one


def test_an_analysis_of_several_runs_runs_the_same_configuration_from_the_command_and_across_cells(tmp_path,
                                                                                                 monkeypatch):
    """``dynlab analyze dsa RUN RUN`` and a scenario's ``{name = "dsa"}``, run across its cells
    ([`dynlab.scenarios.across.run_across`][]), call the analysis with the same options: the
    signature's defaults, the runs' own task."""
    from dynlab.scenarios.across import run_across
    from dynlab.scenarios.spec import parse

    entry = registry.get("analysis", "dsa")
    calls: list[dict] = []
    monkeypatch.setitem(registry._REGISTRY["analysis"], "dsa", dataclasses.replace(entry, obj=_recorder(entry.obj, calls)))
    for run in ("a", "b"):  # run directories as far as the command reads them before the analysis (their units)
        (tmp_path / run).mkdir()
        (tmp_path / run / "config.toml").write_text('[model]\nunit = "rnn"\n')
    invoke(["analyze", "dsa", "a", "b"], tmp_path)
    assert len(calls) == 1, "dynlab analyze dsa did not reach the analysis"
    scenario = parse({**_scenario("dsa", "adding"), "train": {"steps": 1}, "sweep": {"seed": [0, 1]}})
    trained = {"results": {"train": {"status": "ok"}}, "digest": "-"}
    (tmp_path / "sweep").mkdir()
    records = run_across(scenario, tmp_path / "sweep", [tmp_path / "a", tmp_path / "b"], [trained, trained])
    assert len(calls) == 2 and "Recorded" in records["dsa"]["message"], records
    command, in_scenario = calls
    assert command == in_scenario
    assert command["n_delays"] == 10 and command["task"] is None  # the signature's, and the runs' task


@pytest.mark.parametrize("name, command", [("pc-bp", ["compare", "pc-bp"]), ("pc-bptt", ["analyze", "pc-bptt"])])
def test_a_rule_comparison_with_no_options_runs_the_analysis_own_configuration(name, command, tmp_path, monkeypatch):
    """``dynlab compare pc-bp`` (``analyze pc-bptt``) with no options calls the registered function
    with every argument at its signature's default (the task, grid and seeds included), and those
    settings are the comparison's own defaults ([`CompareConfig`][dynlab.analyses.pc_bp.CompareConfig];
    the parameterisation's alpha included, which the command once set apart from the function's)."""
    from dynlab.analyses.pc_bp import CompareConfig, _compare_config

    entry = registry.get("analysis", name)
    calls: list[dict] = []

    @functools.wraps(entry.obj)
    def record(*args, **kwargs):
        bound = inspect.signature(entry.obj).bind(*args, **kwargs)
        bound.apply_defaults()
        calls.append({k: _comparable(v) for k, v in bound.arguments.items() if k != "progress"})
        raise Recorded

    monkeypatch.setitem(registry._REGISTRY["analysis"], name, dataclasses.replace(entry, obj=record))
    result = invoke(command, tmp_path)
    assert len(calls) == 1, f"{' '.join(command)} did not reach the analysis: {result.output}"
    alone = inspect.signature(entry.obj).bind()
    alone.apply_defaults()
    assert calls[0] == {k: _comparable(v) for k, v in alone.arguments.items() if k != "progress"}
    model = "rnn" if name == "pc-bptt" else "mlp"  # the signature's settings are the comparison's defaults
    assert _compare_config(model, alone.arguments).describe() == CompareConfig.from_options(model=model).describe()


def test_an_analysis_whose_options_cannot_be_given_fails_when_registered():
    """A parameter without a default of a type neither the command line nor TOML can give is an
    error at registration, naming it, not a failure when the command is first used."""
    from collections.abc import Callable

    def needs_a_callable(model, *, callback: Callable, steps: int = 10) -> xr.Dataset: ...

    with pytest.raises(ValueError, match="parameter 'callback' has no default"):
        registry.register("analysis", "test-needs-a-callable", figure=plugin_figure)(needs_a_callable)
    assert "test-needs-a-callable" not in registry._REGISTRY["analysis"]


@pytest.mark.parametrize("where, spelling", [
    ("command", ["--k", "0"]), ("command", ["--qr", "k=0"]),
    ("scenario", {"k": 0}), ("scenario", {"qr": {"k": 0}}),
])
def test_a_bound_is_declared_once_and_checked_for_text_and_toml_alike(where, spelling, tmp_path):
    """``k >= 1`` is checked by the QR settings' constructor alone (analyses/qr_settings.py): the
    command's text and a scenario's TOML value, in the old flat spelling and as the value, get the
    same check, one line and exit 2 before any work."""
    from dynlab.errors import ConfigError
    from dynlab.scenarios.spec import parse

    message = "qr: k must be an integer >= 1, got 0"
    if where == "command":
        result = invoke(["analyze", "lyapunov", *spelling], tmp_path)
        assert result.exit_code == 2 and result.stderr.strip() == f"error: --{message}"
        return
    with pytest.raises(ConfigError, match=f"analyses.lyapunov.{message}$"):
        parse({**_scenario("lyapunov", "adding"), "analyses": [{"name": "lyapunov", **spelling}]})
