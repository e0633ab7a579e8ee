"""#34: a study is a scenario file: analyses at stages of a cell's life, claims judged from the file.

The numbers at each stage are checked against the same analysis run another way (on the model
built from the cell's config before training, and on the trained run directory), and every
mistake in the file is one line before any work."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from dynlab import experiment, registry
from dynlab.errors import ConfigError
from dynlab.scenarios import spec

from cli_runner import TINY_CELL, invoke

LYAPUNOV = '[[analyses]]\nname = "lyapunov"\nk = 2\nsteps = 120\nburn_in = 60\nrealisations = 2\n'


def scenario_text(extra: str = "", stages: str = '["init", "trained"]', sweep: str = "seed = [0, 1]") -> str:
    return (f'name = "study"\n{TINY_CELL}{LYAPUNOV}stages = {stages}\n{extra}\n[sweep]\n{sweep}\n')


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    claims = """
[[claims]]
id = "bounded"
statement = "lambda_1 below 10 after training"
variable = "lyapunov_largest_mean"
where = { stage = "trained" }
below = 10.0
gate = false  # about every trained network, learned or not (10 steps do not learn the task)
[[claims]]
id = "grows"
statement = "lambda_1 above 10 after training"
variable = "lyapunov_largest_mean"
where = { stage = "trained" }
above = 10.0
gate = false
"""
    (root / "study.toml").write_text(scenario_text().replace("[sweep]", claims + "\n[sweep]"))
    r = invoke(["run", "study.toml", "--out", "out", "-q"], root)
    return root, r


def test_each_stage_is_the_analysis_of_the_model_at_that_point(study):
    root, r = study
    assert r.exit_code == 0, r.output
    ds = xr.load_dataset(root / "out" / "sweep.nc")
    lam = ds["lyapunov_largest_mean"]
    assert list(ds["stage"].values) == ["init", "trained"] and lam.dims == ("seed", "stage")
    fn = registry.get("analysis", "lyapunov").obj
    from dynlab.analyses.qr_settings import QRSettings

    options = dict(qr=QRSettings(k=2), steps=120, burn_in=60, realisations=2)
    scenario = spec.load(str(root / "study.toml"))
    for cell in scenario.cells:
        seed = cell.coords["seed"]
        fresh = experiment.build(cell.config)  # the model before training, built as the cell built it
        assert float(fn(fresh.model, **options).largest_mean) == pytest.approx(float(lam.sel(seed=seed, stage="init")), rel=1e-5)
        trained = experiment.load_run(root / "out" / "cells" / cell.key)
        assert float(fn(trained.model, **options).largest_mean) == pytest.approx(float(lam.sel(seed=seed, stage="trained")), rel=1e-5)
    assert not np.allclose(lam.sel(stage="init"), lam.sel(stage="trained"))  # training changed the model


def test_the_files_claims_are_judged_into_findings_and_printed(study):
    root, r = study
    f = xr.load_dataset(root / "out" / "findings.nc")
    outcome = dict(zip(f.claim.values.tolist(), f.outcome.values.tolist()))
    lam = xr.load_dataset(root / "out" / "sweep.nc")["lyapunov_largest_mean"].sel(stage="trained")
    assert float(f.value.sel(claim="bounded")) == pytest.approx(float(lam.mean()))
    assert outcome == {"bounded": "holds", "grows": "does not hold"}  # |lambda_1| of a 4-unit tanh RNN << 10
    assert "2 claims: 1 holds, 1 does not hold" in r.output
    assert (root / "out" / "findings.png").is_file()


@pytest.mark.parametrize("text, message", [
    (scenario_text(stages='["init", "later"]'), "unknown stage 'later'; stages: init, step-N (after N training steps), trained, isolated"),
    (scenario_text(stages='["trained", "trained"]'), "names a stage twice"),
    (scenario_text().replace("steps = 10\n", "steps = 0\n", 1), "runs at stage 'trained', but cell seed=0 has train.steps = 0"),
    (scenario_text(extra='[[analyses]]\nname = "dsa"\nstages = ["init"]\n'),
     "compares the cells' trained runs: it runs at stage 'trained' only"),
    (scenario_text(extra='[[claims]]\nid = "c"\nstatement = "s"\nvariable = "trw_s50"\nbelow = 1.0\n'),
     "variable 'trw_s50' is not written to sweep; its variables: lyapunov_ci_high, lyapunov_ci_low, "),
    (scenario_text(extra='[[claims]]\nid = "c"\nstatement = "s"\nvariable = "lyapunov_largest_mean"\n'
                         'where = { stage = "after" }\nbelow = 1.0\n'), "stage = 'after' is not in this scenario"),
    (scenario_text(extra='[[claims]]\nid = "c"\nstatement = "s"\nvariable = "lyapunov_largest_mean"\n'
                         'for_each = "model.unit"\nbelow = 1.0\n'), "names the coordinate 'model.unit', which sweep"),
])
def test_a_mistake_in_a_study_is_one_line_before_any_work(tmp_path, text, message):
    (tmp_path / "s.toml").write_text(text)
    r = invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path)
    assert r.exit_code == 2 and message in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    with pytest.raises(ConfigError):
        spec.load(str(tmp_path / "s.toml"))
