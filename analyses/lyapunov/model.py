r"""The registered ``lyapunov`` analysis: Lyapunov spectra of a dynlab model under the three input protocols.

This glues a model's state map ([`dynlab.analyses.state_map`][]) to the replicated QR
measurement ([`dynlab.analyses.lyapunov.lyapunov_replicates`][]), chooses initial conditions,
and labels the result with what was analysed (protocol, initial conditions, seed).
"""

from __future__ import annotations

import warnings
from typing import Annotated, Literal

import jax
import jax.numpy as jnp
import xarray as xr

from dynlab.analyses.lyapunov.figure import plot_lyapunov
from dynlab.analyses.lyapunov.reortho import AUTO_MIN_BURN_IN
from dynlab.analyses.lyapunov.replicates import replicate_groups
from dynlab.analyses.lyapunov.summaries import lyapunov_summary
from dynlab.analyses.protocol import Drive, Protocol, TaskStream
from dynlab.analyses.qr_settings import QRSettings
from dynlab.analyses.state_map import initial_conditions, run_in, state_map
from dynlab.config import Count, Fraction, NonNegative, Range
from dynlab.errors import ConfigError, require_positive
from dynlab.provenance import stamp
from dynlab.outputs import Output
from dynlab.registry import register


DEFAULT_DRIVE = 1.0
r"""The constant drive $\xi$ on every neuron of the analysis's default protocol, ``Drive(1.0)``
(``input = {drive = 0.0}`` or ``"autonomous"`` gives the autonomous dynamics, the ARU paper's
App. D.4 setting of a trained network).

Why: without input a freshly initialised network rests at the fixed point of its initialisation,
and its spectrum describes the initialisation, not the network. Measured on the default model
(`--model aru`: 64 neurons, $n_g$ = 16, seed 0; 16 exponents, 2 CPU cores): autonomous, all 16
are $-0.4098 \dots -0.4105$, copies of one mode of the controller RNN that every neuron runs
with the same weights (the recurrent network's own modes lie lower, near $-0.57$); task inputs
(adding, recall, hierarchical-language) leave the same degenerate block. At $\xi = 1$ the
neurons sit in the nonlinear range of $\gamma$ and the recurrent network's modes lead: an
isolated $\lambda_1 = -0.148$, then complex pairs down to $-0.255$ (the controllers' block
follows at $-0.41$), in about 25 s. $\xi = 0.5$ gives $-0.225 \dots -0.329$; $\xi \ge 2$
saturates ($\lambda_1 = -0.118$) at twice the time. A vanilla tanh RNN (`--model rnn`) rests
at $h = 0$, where its orthogonal $W_{hh}$ gives 16 exponents of $\approx 0$; at $\xi = 1$ it
contracts with a spread spectrum ($-0.54 \dots -0.76$). $\xi = 1$ is also the smallest drive of
the ARU paper's Fig. 5 sweep (and of ``analyze adaptation``).
"""


def check_lyapunov(model, *, qr: QRSettings = QRSettings(), steps: int, burn_in: int, ics: int, realisations: int = 5,
                   confidence: float = 0.95, **_) -> None:
    """The options of [`lyapunov_analysis`][] that ``model`` can take (``qr.k`` <= its state dimension).

    Enforces, in one place: lyapunov's options are valid for the model. Called by the analysis
    itself and, as its registered ``check``, by scenario validation for every cell's model
    before any cell runs ([`dynlab.scenarios.spec.check_cells`][]; the model may be abstract).
    """
    require_positive("steps", steps)
    require_positive("ics", ics)
    require_positive("realisations", realisations)
    if realisations < 2:
        raise ConfigError(f"realisations must be at least 2 for an interval over independent realisations, got {realisations}")
    if burn_in == "auto":
        if auto_burn_in(steps) >= steps:
            raise ConfigError(f"burn_in='auto' needs steps > {AUTO_MIN_BURN_IN}, got steps = {steps}")
        burn_in = auto_burn_in(steps)
    elif isinstance(burn_in, bool) or not isinstance(burn_in, int) or not 0 <= burn_in < steps:
        raise ConfigError(f"burn_in must be 'auto' or an integer with 0 <= burn_in < steps = {steps}, got {burn_in!r}")
    if qr.reortho_every == "auto" and burn_in < AUTO_MIN_BURN_IN:
        raise ConfigError(f"reortho_every='auto' measures the spread of the exponents over the burn-in, which "
                          f"needs burn_in >= {AUTO_MIN_BURN_IN}; got {burn_in} (or give an integer reortho_every)")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence!r}")
    qr.check_dim(state_map(model).dim)


@register(
    "analysis",
    "lyapunov",
    "Lyapunov spectrum (QR method), CIs over independent input realisations",
    figure=plot_lyapunov,
    summary=lyapunov_summary,
    finite=("mean",),
    outputs=(
        Output("exponents", "real", ("realisation", "ic", "exponent")),
        Output("running", "field", ("realisation", "ic", "time", "exponent")),
        Output("diverged", "field", ("realisation", "ic")),
        *Output.each("realisation_mean ic_sd", "real", ("realisation", "exponent")),
        *Output.each("mean ci_low ci_high within_run_se_of_mean ic_sd_mean se_floor rounding_error", "real",
                     ("exponent",)),
        Output("within_run_se", "real", ("realisation", "ic", "exponent")),
        Output("cluster", "field", ("exponent",)),
        *Output.each("largest positive_sum ky_dimension", "real", ("realisation", "ic")),
        *Output.each("n_positive n_zero", "count", ("realisation", "ic")),
        *Output.each("largest_mean largest_ci_low largest_ci_high positive_sum_mean positive_sum_ci_low "
                     "positive_sum_ci_high ky_dimension_mean ky_dimension_ci_low ky_dimension_ci_high"),
        *Output.each("n_positive_mean n_positive_ci_low n_positive_ci_high n_zero_mean n_zero_ci_low n_zero_ci_high",
                     "count"),
    ),
    check=check_lyapunov,
)
def lyapunov_analysis(
    model,
    *,
    qr: QRSettings = QRSettings(),
    steps: Count = 2000,
    burn_in: NonNegative | Literal["auto"] = "auto",
    input: Protocol = Drive(DEFAULT_DRIVE),
    realisations: Annotated[int, Range(minimum=2)] = 5,
    ics: Count = 2,
    ic_kind: Literal["visited", "random"] = "visited",
    ic_scale: float = 1.0,
    seed: int = 0,
    x64: bool = False,
    tol: float = 1e-3,
    confidence: Fraction = 0.95,
) -> xr.Dataset:
    r"""The $k$ largest Lyapunov exponents of a model's full state map, repeated over independent realisations.

    The map is $h_{t+1} = F(h_t, x_t, \xi_t)$ on every layer's whole state (for ARUs: the
    activities and the controllers), driven by the ``input`` protocol
    ([`dynlab.analyses.protocol`][]): by default the constant drive [`DEFAULT_DRIVE`][] on every
    neuron (``Drive(0.0)`` or ``Autonomous()`` is the autonomous map, the ARU paper's App. D.4
    setting), a task's input stream (plus a drive if given), or input noise. ``qr``
    ([`dynlab.analyses.qr_settings.QRSettings`][]) holds the number of exponents $k$ and the
    re-orthonormalisation interval.

    **What is replicated.** The whole measurement is repeated ``realisations`` times
    ([`dynlab.analyses.lyapunov.lyapunov_replicates`][]), each with its own initial frame:

    * under a task's stream or noise, realisation $r$ runs on its own input sequence (a task's
      consecutive test samples, or noise) drawn from ``fold_in(key, r)`` — *input realisations*;
    * autonomous or under a constant drive the input is the same for all, so realisation $r$
      starts where one trajectory from the model's initial state is after $r \cdot$ ``steps``
      steps: the realisations measure disjoint stretches of one trajectory, ``steps`` apart,
      i.e. points on the attractor it settles to (for a chaotic attractor, stretches many
      correlation times apart are nearly independent). A trajectory that has settled to a fixed
      point gives realisations that agree to rounding, and the interval is then honestly about
      as wide as the rounding: the exponents of a fixed point are known that well.

    Within realisation $r$, ``ics`` initial conditions are states visited in the second half of
    a run-in of ``steps`` steps from the realisation's start under its inputs
    (``ic_kind="visited"``), or Gaussian perturbations of the start (``"random"``, std
    ``ic_scale``). Each is followed for ``steps`` steps, the first ``burn_in`` not accumulated.

    **Burn-in.** ``burn_in="auto"`` (default) drops ``steps // 4`` steps (at least
    ``AUTO_MIN_BURN_IN``) and then as many more as the MSER rule finds transient in the window
    (per-QR-block local exponents averaged over all runs; [`dynlab.analyses.lyapunov.burn_in`][]).
    Where the rule truncates at its cap (half the window) for at least half of the exponents, the
    transient outlasts the window: the whole measurement is repeated once over ``2 * steps``
    steps with ``steps`` of them burn-in (and MSER again; attr ``burn_in_extended``), and a
    ``RuntimeWarning`` says so if it still does. Measured on a fresh 64-neuron ARU under the
    adding task (its 64 controller modes give nearly equal exponents, so the QR frame turns into
    the leading directions over thousands of steps): a fixed 500 of 2000 steps left $\lambda_1$
    biased by $-2.4\times10^{-4}$ (coverage 0.33); this model takes the repeat. An integer
    ``burn_in`` is used as given, and the same rule checks it: a warning names the burn-in a
    transient still in the window calls for.

    **What is reported** (see ``lyapunov_replicates``): ``mean``, ``ci_low``, ``ci_high`` —
    the mean over realisations and its Student-t ``confidence`` interval (attrs ``ci_level``,
    ``ci_population``, ``ci_method``), whose upper bound reaches those above an exponent the QR
    frame has not separated from them (``cluster``; [`dynlab.analyses.lyapunov.resolution`][]: a
    ``RuntimeWarning`` says when such a cluster reaches the last computed exponent);
    ``within_run_se`` / ``within_run_se_of_mean`` — the batch-means standard error of the time
    averages; ``ic_sd`` / ``ic_sd_mean`` — the spread over initial conditions under one input,
    which measures multistability, not the error;
    summaries (largest exponent, sum of positive exponents, Kaplan–Yorke dimension, counts)
    with their own intervals. ``qr.reortho_every="auto"`` (default) re-orthonormalises as rarely as
    the spread $\lambda_1 - \lambda_k$ measured over the burn-in allows, and records the bound on
    the error that adds in ``reortho_error_bound``. Attrs also hold ``protocol``, ``drive``,
    ``ic_kind``, ``seed``, ``realisation_kind``.

    Args:
        qr: QR settings k=EXPONENTS,reortho_every=STEPS|auto (k: 1 .. state dim, default 16;
            reortho_every "auto": picked from the spread of the exponents, error bound in attrs).
            --k and --reortho-every set one of them.
        steps: steps per trajectory.
        burn_in: steps not accumulated; "auto": steps/4, then as many more as the MSER rule finds
            transient.
        input: input protocol: autonomous, drive=XI (default drive=1), task=NAME[,drive=XI] or
            noise=STD[,seed=S]. --drive XI and --task NAME set it too.
        realisations: independent realisations the CI is over (input sequences under a task or
            noise; otherwise trajectory stretches).
        ics: initial conditions per realisation (their spread measures multistability, not error).
        ic_kind: initial conditions visited after a run-in, or random perturbations of the start.
        ic_scale: std of the random initial conditions.
        seed: seed of the inputs and initial conditions.
        x64: compute in float64.
        tol: exponents with |lambda| < tol count as zero.
        confidence: level of the Student-t interval.
    """
    return lyapunov_analysis_seeds(
        model, [seed], qr=qr, steps=steps, burn_in=burn_in, input=input, realisations=realisations, ics=ics,
        ic_kind=ic_kind, ic_scale=ic_scale, x64=x64, tol=tol, confidence=confidence, stacklevel=3,
    )[0]


def lyapunov_analysis_seeds(model, seeds, *, qr=QRSettings(), steps=2000, burn_in="auto", input=Drive(DEFAULT_DRIVE),
                            realisations=5, ics=2, ic_kind="visited", ic_scale=1.0, x64=False, tol=1e-3,
                            confidence=0.95, stacklevel=2) -> list[xr.Dataset]:
    """[`lyapunov_analysis`][] for several ``seeds`` at once: one dataset per seed, each what
    ``lyapunov_analysis(model, seed=s, ...)`` returns (which calls this with one seed).

    The seeds' runs go through one vmapped call per pass
    ([`replicate_groups`][dynlab.analyses.lyapunov.replicate_groups]); the burn-in decision (and
    the repeat over twice the steps) is taken per seed. Coverage measurements use it to repeat the
    public path hundreds of times in a few compiled calls (`benchmarks/coverage.py`).
    """
    check_lyapunov(model, qr=qr, steps=steps, burn_in=burn_in, ics=ics, realisations=realisations,
                   confidence=confidence)
    smap = state_map(model)
    auto = burn_in == "auto"
    options = dict(qr=qr, input=input, realisations=realisations, ics=ics, ic_kind=ic_kind,
                   ic_scale=ic_scale, x64=x64, tol=tol, confidence=confidence)
    results = _measure(model, smap, seeds, steps=steps, burn_in=auto_burn_in(steps) if auto else burn_in,
                       truncate=auto, stacklevel=stacklevel + 1, **options)
    redo = [i for i, (ds, _) in enumerate(results) if auto and ds.attrs["transient_drift"]]
    if redo:  # the transient outlasts the window: once more over twice the steps, the first run's length burnt
        again = _measure(model, smap, [seeds[i] for i in redo], steps=2 * steps, burn_in=steps, truncate=True,
                         stacklevel=stacklevel + 1, **options)
        for i, result in zip(redo, again):
            results[i] = result
    out = []
    for i, (seed, (ds, kind)) in enumerate(zip(seeds, results)):
        if ds.attrs["transient_drift"]:
            capped, total = ds.attrs["transient_drift_exponents"], ds.sizes["exponent"]
            window = ds.attrs["steps_total"] - ds.attrs["burn_in_fixed"]
            advice = (f"rerun with more steps (steps >= {2 * ds.attrs['steps_total']})" if auto else
                      f"use burn_in='auto' (--burn-in auto, the default) or burn_in >= {burn_in + window // 2} "
                      f"with steps >= {burn_in + window // 2 + window}")
            warnings.warn(f"lyapunov: the local exponents still drift after {ds.attrs['burn_in_fixed']} steps of "
                          f"burn-in (the MSER truncation reaches its cap, half the {window}-step window, for {capped} "
                          f"of {total} exponents): the estimates may hold a transient bias their interval does not "
                          f"cover; {advice}", RuntimeWarning, stacklevel=stacklevel)
        first = int(ds.cluster.values[-1])
        if first < ds.sizes["exponent"] < smap.dim:  # the last computed exponent is not resolved from the one before
            warnings.warn(f"lyapunov: exponents {first}..{ds.sizes['exponent']} are not resolved from one another after "
                          f"{ds.attrs['burn_in']} steps of burn-in (their upper bounds reach those above them); their "
                          f"cluster reaches the last computed exponent, so it may go on below it, and a bias the "
                          f"uncomputed ones share with it is not in the interval: rerun with more steps or a larger k",
                          RuntimeWarning, stacklevel=stacklevel)
        ds.attrs["burn_in_requested"] = str(burn_in)
        ds.attrs["burn_in_extended"] = int(i in redo)
        out.append(stamp(ds, analysis="lyapunov", config={
            "protocol": input.name,
            "drive": input.drive_attr,
            "ic_kind": ic_kind,
            "state_dim": smap.dim,
            "realisation_kind": kind,
        }, seed=seed))
    return out


def auto_burn_in(steps: int) -> int:
    """The fixed part of ``burn_in="auto"``: ``steps // 4``, at least ``AUTO_MIN_BURN_IN``."""
    return max(AUTO_MIN_BURN_IN, steps // 4)


def _setup(model, smap, seed, *, steps, input, realisations, ics, ic_kind, ic_scale):
    """One seed's initial conditions, inputs and frame key: ``(h0s, inputs, key, population, kind)``."""
    key = jax.random.key(seed)
    k_in, k_ic, k_frame = jax.random.split(key, 3)
    if input.stream:
        inputs = [input.inputs(model, steps, k_in, realisation=r) for r in range(realisations)]
        stacked = jax.tree.map(lambda *a: jnp.stack(a), *inputs)
        starts = jnp.broadcast_to(smap.h0, (realisations, smap.dim))
        visited = jax.vmap(lambda u: run_in(smap, u))(stacked) if ic_kind == "visited" else None  # [R, T, N]
        what = "task input sequences" if isinstance(input, TaskStream) else "input noise sequences"
        population, kind = "input realisations", f"independent {what}, one per realisation"
    else:
        one = input.inputs(model, steps)
        stacked = jax.tree.map(lambda a: jnp.broadcast_to(a, (realisations, *a.shape)), one)
        # one trajectory, cut into consecutive stretches of `steps` steps: stretch r starts where r-1 ends
        trajectory = run_in(smap, input.inputs(model, realisations * steps))
        starts = jnp.concatenate([smap.h0[None], trajectory[steps - 1 : -1 : steps]])
        visited = trajectory.reshape(realisations, steps, smap.dim)
        population = "trajectory stretches"
        kind = f"stretches of one trajectory from the model's initial state, {steps} steps apart (points on the attractor)"
    h0s = jnp.stack([
        initial_conditions(smap, ics, jax.random.fold_in(k_ic, r), kind=ic_kind, scale=ic_scale, h0=starts[r],
                           visited=None if visited is None else visited[r])
        for r in range(realisations)
    ])
    return h0s, stacked, k_frame, population, kind


def _measure(model, smap, seeds, *, steps, burn_in, truncate, qr, input, realisations, ics, ic_kind, ic_scale,
             x64, tol, confidence, stacklevel):
    """One replicated measurement of ``steps`` steps per seed: ``[(dataset, realisation kind in words)]``."""
    setups = [_setup(model, smap, seed, steps=steps, input=input, realisations=realisations, ics=ics,
                     ic_kind=ic_kind, ic_scale=ic_scale) for seed in seeds]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        datasets = replicate_groups(
            smap.step, [s[0] for s in setups], [s[1] for s in setups], qr.k, keys=[s[2] for s in setups],
            population=setups[0][3], burn_in=burn_in, reortho_every=qr.reortho_every, x64=x64, tol=tol,
            confidence=confidence, truncate=truncate,
        )
    for w in caught:  # re-issue from here so the user sees where it came from
        warnings.warn(str(w.message), w.category, stacklevel=stacklevel)
    return [(ds, setup[4]) for ds, setup in zip(datasets, setups)]
