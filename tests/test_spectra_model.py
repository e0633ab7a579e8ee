"""Spectra of dynlab models: two independent methods must agree on the same dynamics."""

import jax
import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner

import dynlab
from dynlab.analyses.lyapunov import lyapunov_analysis
from dynlab.analyses.spectra import spectra_analysis
from dynlab.cli import main
from dynlab.analyses.protocol import Drive
from dynlab.analyses.qr_settings import QRSettings


def test_jacobian_radius_at_fixed_point_equals_exp_of_largest_lyapunov_exponent():
    """At a stable fixed point the QR method's lambda_1 is ln of the Jacobian's spectral radius."""
    model = dynlab.build("model", unit="aru", input_size=2, output_size=1, key=jax.random.key(1), hidden=8, n_g=4)
    with pytest.warns(RuntimeWarning, match="no activity covariance spectrum"):
        sp = spectra_analysis(model, steps=200, burn_in=2000, every=50)
    ly = lyapunov_analysis(model, qr=QRSettings(k=2), steps=2500, burn_in=500, ics=2, input=Drive(0.0))
    rho = sp.jacobian_spectral_radius.values
    np.testing.assert_allclose(rho, rho[0], rtol=1e-5)  # the same Jacobian at every sample
    np.testing.assert_allclose(np.log(rho[0]), float(ly["mean"][0]), atol=2e-3)
    assert "covariance_alpha" not in sp
    # the recurrent matrices are what the unit holds: orthogonal W_hh, the controller's W_gg
    np.testing.assert_allclose(sp.weight_eig_modulus.sel(matrix="layer0.w_hh").values, 1.0, atol=1e-5)
    w_gg = np.asarray(model.cells[0].w_gg, np.float64)
    np.testing.assert_allclose(float(sp.weight_spectral_radius.sel(matrix="layer0.w_gg")),
                               np.abs(np.linalg.eigvals(w_gg)).max(), rtol=1e-6)


def test_cli_spectra_with_task(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["analyze", "spectra", "--model", "rnn", "--set", "model.hidden=12", "--task", "adding",
                                  "--steps", "300", "--n-boot", "20", "-q", "--out", "s.nc"])
    assert r.exit_code == 0, r.output + r.stderr
    assert "activity covariance: alpha" in r.output and (tmp_path / "s.png").is_file()
    ds = xr.load_dataset(tmp_path / "s.nc")
    assert ds.sizes["rank"] == 12 and ds.sizes["jacobian_eigenvalue"] == 12
    assert ds.attrs["analysis"] == "spectra" and "AddingTask" in ds.attrs["protocol"]
