r"""One Lyapunov spectrum as a labelled dataset: [`lyapunov_spectrum`][], and the coordinates and
attrs that the ensembles and replicates ([`dynlab.analyses.lyapunov.replicates`][]) share."""

from __future__ import annotations

import warnings
from typing import Any, Literal

import jax
import numpy as np
import xarray as xr
from jaxtyping import Array, ArrayLike, Float, PyTree

from dynlab.analyses.lyapunov.core import (
    Method, StepFn, _qr_times, _resolve_method, _run, _state_dim, lyapunov_core, num_steps,
)
from dynlab.analyses.lyapunov.factorisations import Householder, QRMethod
from dynlab.analyses.lyapunov.reortho import _reortho_attrs, _resolve_reortho, blocking_error_bound
from dynlab.analyses.lyapunov.within_run import block_growth
from dynlab.provenance import stamp_attrs


def _attrs(
    *, k: int, n: int, steps: int, burn_in: int, reortho_every: int, method: str, x64: bool
) -> dict[str, Any]:
    """The stamp ([`dynlab.provenance.stamp_attrs`][]) and the run's numbers, shared by the
    datasets of one spectrum, an ensemble and replicates."""
    return stamp_attrs(analysis="lyapunov", config={
        "state_dim": n,
        "k": k,
        "steps": steps - burn_in,
        "burn_in": burn_in,
        "reortho_every": reortho_every,
        "method": _resolve_method(method),
        "dtype": "float64" if x64 or jax.config.jax_enable_x64 else "float32",  # the working dtype (core._on_host)
    })


def _exponent_coords(k: int, times: np.ndarray) -> dict[str, Any]:
    return {
        "exponent": ("exponent", np.arange(1, k + 1), {"long_name": "exponent index (descending)"}),
        "time": (
            "time",
            times,
            {"long_name": "steps accumulated after burn-in", "units": "steps"},
        ),
    }


def _qr_attrs(qr: QRMethod) -> dict[str, str]:
    return {"reortho_qr": repr(qr)}


_EXPONENT_ATTRS = {"units": "per step", "long_name": "Lyapunov exponent"}
_RUNNING_ATTRS = {"units": "per step", "long_name": "running Lyapunov exponent estimate"}


def lyapunov_spectrum(
    step: StepFn,
    h0: PyTree,
    inputs: PyTree,
    k: int | None = None,
    *,
    burn_in: int = 0,
    reortho_every: int | Literal["auto"] = 1,
    method: Method = "auto",
    x64: bool = False,
    q0: Float[ArrayLike, "n k"] | None = None,
    key: Array | None = None,
    qr: QRMethod = Householder(),
    lu_every: int = 0,
) -> xr.Dataset:
    r"""Lyapunov spectrum of $h_{t+1} = \texttt{step}(h_t, x_t)$ as a labelled dataset.

    Runs [`lyapunov_core`][] (see there for the method and the arguments `step`, `h0`,
    `inputs`, `k`, `burn_in`, `reortho_every`, `method`, `q0`, `key`, `qr`, `lu_every`) and labels
    the result. `reortho_every="auto"` chooses the interval (and, in float64 for $k \ge 16$,
    `lu_every`) from a pilot run over the burn-in (`dynlab.analyses.lyapunov.reortho`); in float64
    for $k \ge 16$ that pilot (a pivoted LU every step) is the burn-in, and the accumulation goes on
    from its final state and (re-orthonormalised) frame.

    **Precision.** By default the state, the inputs and the frame are float32. With
    `x64=True` they are float64 and float64 is enabled while the map is traced and run, so
    every operation on them is float64. Parameters that `step` closes over keep their own
    dtype: float32 weights enter float64 arithmetic exactly (as the float32 numbers they are),
    so the result is the float64-accurate spectrum of the map with those weights; a `step` that
    casts its state down to float32 internally is float32 there whatever `x64` says.
    Matrix products run at full precision ("highest") on every backend.

    **Returns:**

    An `xr.Dataset` with

    - `exponents` (`exponent`): the $k$ exponents, descending, per step; coordinate `exponent`
      $= 1, \dots, k$;
    - `running` (`time`, `exponent`): the estimate after each accumulated QR; coordinate
      `time` = the number of steps accumulated after burn-in ($m, 2m, \dots, T'$);
    - `diverged` (scalar bool): whether the state or the tangent growth became non-finite;
    - attrs `analysis="lyapunov"`, `dynlab_version`, `state_dim`, `k`, `steps` ($T'$),
      `burn_in`, `reortho_every`, `method` (as resolved: `"jvp"` or `"dense"`), `dtype`,
      `diverged` (0/1).

    `running` holds $T'/m \times k$ numbers; raise `reortho_every` for very long runs. The final
    state is not stored; call [`lyapunov_core`][] to get it.

    If the trajectory diverged, `exponents` is set to NaN (the numbers are meaningless, though
    `running` is kept as computed: it is valid up to the divergence), `diverged` is true and a
    `RuntimeWarning` is emitted; nothing raises.
    """
    n = _state_dim(h0)
    steps = num_steps(inputs)
    requested = reortho_every
    reortho_every, auto_info, renormalise, lu_every = _resolve_reortho(
        step, h0, inputs, q0, x64, reortho_every=reortho_every, k=k, burn_in=burn_in, method=method, key=key,
        lu_every=lu_every,
    )
    if auto_info is not None and "end" in auto_info:
        # The float64 LU pilot ran the burn-in already (same inputs, same start): go on from where it ended.
        # Its frame is the pivoted LU factor; the core's QR of q0 makes it orthonormal with the same flag.
        end_state, end_frame = auto_info["end"]
        result = _run(
            lyapunov_core, step, end_state, jax.tree.map(lambda a: a[burn_in:], inputs), end_frame, x64,
            k=k, burn_in=0, reortho_every=reortho_every, renormalise=renormalise, method=method,
            qr=qr, lu_every=lu_every,
        )  # fmt: skip
    else:
        result = _run(
            lyapunov_core, step, h0, inputs, q0, x64,
            k=k, burn_in=burn_in, reortho_every=reortho_every, renormalise=renormalise, method=method, key=key,
            qr=qr, lu_every=lu_every,
        )  # fmt: skip
    k = result.exponents.shape[0]
    diverged = bool(result.diverged)
    exponents = result.exponents
    if diverged:
        exponents = np.full_like(exponents, np.nan)
        warnings.warn(
            "Lyapunov spectrum: the trajectory diverged (non-finite state or tangent growth); "
            "exponents are set to NaN.",
            RuntimeWarning,
            stacklevel=2,
        )
    attrs = _attrs(
        k=k, n=n, steps=steps, burn_in=burn_in, reortho_every=reortho_every,
        method=method, x64=x64,
    )  # fmt: skip
    bound = blocking_error_bound(
        block_growth(result.running, _qr_times(steps - burn_in, reortho_every)), reortho_every, x64,
        lu_every=lu_every, condition=result.condition,
    )
    return xr.Dataset(
        {
            "exponents": ("exponent", exponents, _EXPONENT_ATTRS),
            "running": (("time", "exponent"), result.running, _RUNNING_ATTRS),
            "diverged": ((), diverged, {"long_name": "trajectory diverged"}),
        },
        coords=_exponent_coords(k, _qr_times(steps - burn_in, reortho_every)),
        attrs={**attrs, "diverged": int(diverged), **_reortho_attrs(requested, reortho_every, bound, auto_info, x64, renormalise, lu_every),
               **_qr_attrs(qr)},
    )

