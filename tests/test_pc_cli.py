"""`dynlab compare pc-bp` as a user runs it: files written, labelled dataset, one-line errors."""


import numpy as np
import pytest
import xarray as xr

from cli_runner import invoke





TINY = ["compare", "pc-bp", "--widths", "4,32", "--depths", "2,4", "--task", "toy", "--steps", "5", "--seeds", "2"]


def test_compare_pc_bp_writes_dataset_and_figures(tmp_path):
    res = invoke(TINY + ["--out", "out/cmp.nc"], tmp_path)
    assert res.exit_code == 0, (res.output, res.stderr)
    assert "mean PC-BP gradient cosine" in res.output
    ds = xr.load_dataset(tmp_path / "out/cmp.nc", engine="h5netcdf")
    assert dict(ds.cosine.sizes) == {"width": 2, "depth": 2, "seed": 2, "step": 5}
    assert list(ds.width.values) == [4, 32] and list(ds.depth.values) == [2, 4]
    assert ds.attrs["analysis"] == "pc-bp" and "param = \"mf\"" in ds.attrs["config"]
    assert np.isfinite(ds.cosine.values).all() and ds.converged.values.all()
    # scalar output: L/F* is s exactly (closed form)
    np.testing.assert_allclose(ds.loss_over_energy.values, 1 + ds.s_minus_1.values, rtol=1e-4)
    for name in ("cosine", "rescaling", "loss"):
        assert (tmp_path / f"out/cmp_{name}.png").stat().st_size > 1000


def test_quiet_prints_only_the_summary(tmp_path):
    res = invoke(TINY + ["-q", "--out", "q.nc", "--widths", "4", "--depths", "2", "--seeds", "1"], tmp_path)
    assert res.exit_code == 0, res.stderr
    assert "cells" not in res.output and "PC vs BP" not in res.output
    assert res.stderr == ""


def test_unconverged_inference_is_flagged_not_used(tmp_path):
    res = invoke(["compare", "pc-bp", "--widths", "8", "--depths", "3", "--task", "toy", "--steps", "3", "--seeds", "1",
                  "--energy", "inference", "--inference-steps", "2", "--rtol", "1e-6", "-q", "--out", "u.nc"], tmp_path)
    assert res.exit_code == 0, res.stderr
    assert "did not converge" in res.stderr
    ds = xr.load_dataset(tmp_path / "u.nc", engine="h5netcdf")
    assert not ds.converged.values.any() and ds.attrs["n_unconverged"] == 3
    assert np.isnan(ds.cosine.values).all() and np.isfinite(ds.cosine_unconverged.values).all()
    assert (ds.inference_steps.values == 2).all()


@pytest.mark.parametrize(
    "extra, fragments",
    [
        (["--param", "xyz"], ["unknown parameterisation 'xyz'", "sp, ntk, mf, mup"]),
        (["--alpha", "1.5"], ["alpha must be a number in [0, 1]"]),
        (["--alpha", "-0.1"], ["alpha must be a number in [0, 1]"]),
        (["--widths", "0,8"], ["--widths must be an integer >= 1, got '0'"]),
        (["--widths", "a,8"], ["--widths must be an integer, got 'a'"]),
        (["--depths", "-2"], ["--depths must be an integer >= 1, got '-2'"]),
        (["--depths", "1"], ["depth"]),
        (["--seeds", "0"], ["seeds must be a positive integer"]),
        (["--steps", "0"], ["steps must be a positive integer"]),
        (["--activation", "tanh"], ["closed-form' needs a linear network"]),
        (["--out", "x.txt"], ["--out must name a .nc file"]),
        (["--gamma0", "0"], ["gamma0 must be a positive finite number"]),
        (["--batches", "stream"], ["one fixed batch", "pc-mnist"]),
        (["--batch-size", "8"], ["batch_size applies to streamed batches"]),
        (["--energy", "inference", "--inference", "lbfgs", "--patience", "0"], ["patience must be a positive integer"]),
        (["--energy", "inference", "--inference", "lbfgs", "--smoothing", "0"], ["--smoothing must be a number > 0"]),
        (["--energy", "inference", "--inference", "lbfgs", "--smoothing", "1e-3,1e-2"], ["smoothing widths must decrease"]),
        (["--energy", "inference", "--inference", "lbfgs", "--smoothing-x64"], ["smoothing_x64", "needs inference.smoothing"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(extra, fragments, tmp_path):
    res = invoke(TINY + extra, tmp_path)
    assert res.exit_code == 2, (res.exit_code, res.output, res.stderr)
    err = res.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    for f in fragments:
        assert f in err, err
    assert not list(tmp_path.iterdir())  # nothing written for a rejected command


def test_every_inference_method_is_offered_and_recorded(tmp_path):
    """Issue 21: the comparison offers L-BFGS / Gauss-Newton / Levenberg-Marquardt in the error
    coordinates, not only discrete steps and the ODE; the dataset records which ran."""
    res = invoke(["compare", "pc-bp", "--model", "rnn", "--widths", "4", "--lengths", "3", "--seeds", "1", "--steps", "1",
                  "--energy", "inference", "--inference", "lbfgs", "--patience", "10", "--inference-steps", "40",
                  "--smoothing", "1e-2,1e-3", "-q", "--out", "l.nc"], tmp_path)
    assert res.exit_code == 0, (res.output, res.stderr)
    ds = xr.open_dataset(tmp_path / "l.nc")
    assert ds.attrs["energy"] == "inference" and "patience=10" in ds.attrs["config"] and "LBFGS" in ds.attrs["config"]
    assert "Smoothed" in ds.attrs["config"] and "0.001" in ds.attrs["config"]
    assert bool(ds.converged.all())


def test_help_shows_each_inference_setting_with_its_help_and_default(tmp_path):
    """Issue 34: the inference settings are one value (``--inference KEY=VALUE,...``), and each
    key is still an option of its own whose help is the key's (InferenceSettings' docstring) with
    the default the value declares."""
    import inspect
    import re

    from dynlab.analyses.pc_bp import InferenceSettings
    from dynlab.cli.analyze import _plain, parameter_help

    for command in (["compare", "pc-bp", "--help"], ["analyze", "pc-bptt", "--help"]):
        res = invoke(command, tmp_path)
        assert res.exit_code == 0, res.output
        blocks = {b.split()[0]: "".join(b.split()) for b in re.split(r"\n  (?=-)", res.output)}  # spaces out: wrapping
        assert "--inferenceKEY=VALUE,..." in blocks["--inference"]
        helps = parameter_help(inspect.getdoc(InferenceSettings))
        for key, default in vars(InferenceSettings()).items():
            if key == "inference":
                continue
            block = blocks["--" + key.replace("_", "-")]
            shown = f"(default:{default})" if isinstance(default, bool) else f"default{default!r}]"
            assert "".join(_plain(helps[key]).split()) in block and shown in block, (key, block)
