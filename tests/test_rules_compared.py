"""#34: two rules on one model. The scenario files cross-pc-alignment and cross-pc-law reproduce the
numbers of the programs they replace (scenarios/cross_pc.py, scenarios/cross_pc_law.py) at the same
seeds, cells and inference settings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from cli_runner import invoke

REFERENCE = Path(__file__).parent / "reference" / "scenarios.json"


def test_cross_pc_alignment_file_reproduces_the_program(tmp_path):
    """The program's dataset at toy size (its snapshot: aru and elm at width 8, T = 4, seed 0, 30
    inference steps) against the file at the same cells; the program's step 0 is the model at
    initialisation, the file's stage init."""
    old = json.loads(REFERENCE.read_text())["cross-pc-alignment"]["pc_alignment.nc"]
    sets = ['sweep={"model.unit"=["aru","elm"],"model.width"=[8],"task.length"=[4],seed=[0]}', "train={steps=0}",
            "rule.pc-time.max_steps=30", 'analyses=[{name="grad-compare",task="train",batch_size=16}]', "claims=[]"]
    r = invoke(["run", "cross-pc-alignment", "-q", "--out", "out", *[a for s in sets for a in ("--set", s)]], tmp_path)
    assert r.exit_code == 0, r.output
    ds = xr.load_dataset(tmp_path / "out" / "sweep.nc").squeeze(["model.width", "task.length", "seed"])
    step0 = lambda name: np.asarray(old[name]["values"]).reshape(2, 2)[:, 0]  # [unit, step] of [aru, elm]  # noqa: E731
    pc = {"grad-compare_rule": "pc-time"}
    for name, new, tol in [("cosine", ds["grad-compare_cosine"], 1e-4),
                           ("converged", ds["grad-compare_converged"].sel(**pc), 0),
                           ("inference_steps", ds["grad-compare_inference_steps"].sel(**pc), 0),
                           ("smoothing", ds["grad-compare_smoothing"].sel(**pc), 1e-9),
                           ("energy", ds["grad-compare_energy"].sel(**pc), 1e-4)]:
        np.testing.assert_allclose(new.sel({"model.unit": ["aru", "elm"]}).values, step0(name), rtol=tol, atol=tol,
                                   err_msg=name)


def test_cross_pc_law_file_reproduces_the_program(tmp_path):
    from dynlab.scenarios.cross_pc_law import run_cross_pc_law

    (tmp_path / "old").mkdir()
    old = run_cross_pc_law(tmp_path / "old", units=["rnn", "elm"], widths=[8, 32], lengths=[4], seeds=[0],
                           batch_size=4)["law"]
    sets = ['sweep={"model.unit"=["rnn","elm"],"model.recurrence"=["plain","time-residual"],"model.width"=[8,32],'
            '"task.length"=[4],seed=[0]}', 'analyses=[{name="grad-compare",task="train",batch_size=4,s_minus_1=true}]', "claims=[]"]
    r = invoke(["run", "cross-pc-law", "-q", "--out", "new", *[a for s in sets for a in ("--set", s)]], tmp_path)
    assert r.exit_code == 0, r.output
    new = xr.load_dataset(tmp_path / "new" / "sweep.nc").squeeze(["task.length", "seed"])
    for unit in ("rnn", "elm"):
        for form, recurrence in (("standard", "plain"), ("T^-alpha", "time-residual")):
            was = old.sel(unit=unit, form=form, length=4, seed=0)
            now = new.sel({"model.unit": unit, "model.recurrence": recurrence})
            np.testing.assert_allclose(now["grad-compare_s_minus_1"].values, was.s_minus_1.values, rtol=1e-5)
            np.testing.assert_allclose(now["grad-compare_cosine"].values, was.cosine.values, atol=1e-4)
            np.testing.assert_array_equal(now["grad-compare_readout_width"].values,
                                          old.readout_width.sel(unit=unit).values)
            np.testing.assert_array_equal(now["grad-compare_converged"].sel({"grad-compare_rule": "pc-time"}).values,
                                          was.converged.values.astype(float))
