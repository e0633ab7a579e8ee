r"""Scenario ``aru-table1``: the ARU paper's Table 1 (psMNIST columns) at CPU scale.

Geadah et al. train RNN+ReLU, LSTM, GRU, RNN+γ (static, heterogeneous) and the ARUN on psMNIST
($T = 784$, $N_h = 400$, $N_g = 50$, Adam 1e-4, 100 epochs, 3 seeds) and report held-out accuracy
clean and under a noisy drive $\xi_t \sim \mathcal N(5, 2^2)$ i.i.d. over neurons and steps
(notes §2, §5): ARUN 95.4 → 94.7, RNN+γ 95.4 → 84.0, RNN+ReLU 90.1 → 33.0; LSTM/GRU are not
perturbed in the paper.

Here, by default: psMNIST down-sampled to 14×14 ($T = 196$), $N_h = 64$, $N_g = 8$ (the paper's
$N_g/N_h = 1/8$), GRU and LSTM widths matched to the ARUN's parameter count with
[`dynlab.sizing.hidden_for_budget`][] (within ``match_tol``: the 2% of the paper is not
reachable at this width, one GRU unit is ~3% of the budget), Adam at ``lr`` with gradient
clipping 1, ``steps`` steps of ``batch_size``; seeds vmapped per network
([`dynlab.train.train_seeds`][]). Every trained model is then evaluated with the
``perturb`` analysis ([`dynlab.perturbations`][]): the noisy drive at mean
$\mu \in$ ``strengths`` with $\sigma = 0.4\,\mu$ (so $\mu = 5$ is the paper's
$\mathcal N(5, 2^2)$), in the window $[200, 400)$ of 784 steps scaled to $T$, on the same
``n_test`` held-out digits and noise draws for every network. All five networks get the drive
(for GRU/LSTM it enters the candidate), the table marks the ones the paper left out.

Writes ``runs/<network>-seed<k>/`` (run directories with ``perturb.nc``), ``table1.nc`` (dims
``network``, ``seed``, ``strength``), ``table1.txt`` (the printed table) and
``accuracy_vs_noise.png``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.provenance import stamp
from dynlab.analyses.paper_claims.aru import READINGS, claims as paper_claims
from dynlab.registry import register

NETWORKS = {  # name -> (model section without hidden, label in the table)
    "rnn-relu": ({"unit": "rnn", "activation": "relu"}, "RNN+ReLU"),
    "rnn-gamma": ({"unit": "rnn-gamma"}, "RNN+gamma (het.)"),
    "aru": ({"unit": "aru"}, "ARUN"),
    "gru": ({"unit": "gru"}, "GRU"),
    "lstm": ({"unit": "lstm"}, "LSTM"),
}
NOT_PERTURBED_IN_PAPER = ("gru", "lstm")


def model_sections(networks, hidden: int, n_g: int, match_tol: float) -> dict[str, dict]:
    """Each network's ``[model]`` section; GRU/LSTM widths matched to the ARUN's parameter count."""
    from dynlab.errors import ConfigError
    from dynlab.sizing import hidden_for_budget, model_params

    unknown = [n for n in networks if n not in NETWORKS]
    if unknown:
        raise ConfigError(f"unknown network(s) {', '.join(unknown)}; valid: {', '.join(NETWORKS)}")
    budget = model_params("aru", hidden, 1, 10, n_g=n_g)
    sections = {}
    for name in networks:
        section = dict(NETWORKS[name][0])
        if section["unit"] == "aru":
            section["n_g"] = n_g
        if section["unit"] in ("gru", "lstm"):
            section["hidden"] = hidden_for_budget(section["unit"], budget, 1, 10, tol=match_tol)
        else:
            section["hidden"] = hidden
        sections[name] = section
    return sections


def run_configs(
    networks: list[str],
    seeds: list[int],
    *,
    hidden: int,
    n_g: int,
    downsample: int,
    perm_seed: int,
    steps: int,
    batch_size: int,
    lr: float,
    eval_size: int,
    match_tol: float = 0.05,
) -> dict[str, list[dict]]:
    """The runs [`run_aru_table1`][] trains: network -> one run config per seed (what
    [`dynlab.experiment.build`][] takes), the ``[model]`` sections from [`model_sections`][]."""
    sections = model_sections(list(networks), hidden, n_g, match_tol)
    task = {"name": "psmnist", "downsample": downsample, "perm_seed": perm_seed}
    train_cfg = {"steps": steps, "batch_size": batch_size, "lr": lr, "clip": 1.0, "eval_every": max(steps // 4, 1),
                 "eval_size": eval_size, "log_every": min(50, steps), "checkpoint_every": steps}
    return {net: [{"seed": s, "model": sections[net], "task": task, "rule": {"name": "bptt"}, "train": train_cfg}
                  for s in seeds] for net in networks}


def run_aru_table1(
    out_dir,
    *,
    progress=None,
    networks: list[str] = ("rnn-relu", "rnn-gamma", "aru", "gru", "lstm"),
    seeds: list[int] = (0, 1, 2),
    hidden: int = 64,
    n_g: int = 8,
    downsample: int = 2,
    perm_seed: int = 0,
    steps: int = 2000,
    batch_size: int = 64,
    lr: float = 1e-3,
    eval_size: int = 500,
    strengths: list[float] = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0),
    table_strength: float = 5.0,
    std_ratio: float = 0.4,
    n_test: int = 2000,
    match_tol: float = 0.05,
    adaptation: dict | None = None,
    rotation: dict | None = None,
) -> dict:
    r"""Train every network for every seed, evaluate clean and under the noisy drive, print the
    table; returns ``{"table1": dataset}`` (also written to ``out_dir``).

    ``adaptation``: if given (a table, ``{}`` for the defaults), every trained ARU seed is also
    analysed with [`adaptation_lambda1`][]: the Fig. 5c/d $\lambda_1$ adapted vs fixed, under both
    readings of the frozen map; adds ``"adaptation"``. ``rotation``: if given, every trained seed
    of one network is retrained on rotated digits with only its activation parameters free
    ([`rotation_transfer`][], App. B.3); adds ``"rotation"``.
    """
    import click

    from dynlab import experiment, figures, store
    from dynlab.config import dumps
    from dynlab.errors import ConfigError, DivergenceError
    from dynlab.analyses.perturb import perturb_analysis, perturbation_curve
    from dynlab.perturbations import default_window
    from dynlab.train import train_seeds

    strengths = [float(s) for s in strengths]
    if float(table_strength) not in strengths:
        raise ConfigError(f"table_strength {table_strength} must be one of the strengths {strengths}")
    if 0.0 not in strengths:
        raise ConfigError(f"strengths must include 0 (the clean accuracy), got {strengths}")
    networks, seeds = list(networks), list(seeds)
    check_params(networks=networks, adaptation=adaptation, rotation=rotation)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    configs = run_configs(networks, seeds, hidden=hidden, n_g=n_g, downsample=downsample, perm_seed=perm_seed,
                          steps=steps, batch_size=batch_size, lr=lr, eval_size=eval_size, match_tol=match_tol)
    labels = [NETWORKS[n][1] for n in networks]
    shape = (len(networks), len(seeds), len(strengths))
    acc, loss = np.full(shape, np.nan), np.full(shape, np.nan)
    status = np.full(shape[:2], "ok", dtype=object)
    params, widths, seconds, trained = [], [], [], {}
    rotation = None if rotation is None else {**ROTATION, **rotation}
    total = len(networks) * (steps + 1) + (rotation["steps"] + 1 if rotation is not None else 0)
    if progress is not None:
        progress(0, total, {})  # the total from the start, not after the first step
    t_start = time.perf_counter()
    for i, net in enumerate(networks):
        exps = [experiment.build(c) for c in configs[net]]
        params.append(exps[0].model.param_count()["total"])
        widths.append(configs[net][0]["model"].get("hidden", 0))
        dirs = [out / "runs" / f"{net}-seed{s}" for s in seeds]
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)

        def report(step, _total, metrics, i=i, net=net):
            if progress is not None:
                progress(i * (steps + 1) + step, total, {"network": net, **metrics})

        t0 = time.perf_counter()
        results = train_seeds(exps, dirs, progress=report)
        trained[net] = ([None if isinstance(res, DivergenceError) else res.model for res in results], exps[0].task)
        for j, (exp, res, d) in enumerate(zip(exps, results, dirs)):
            if isinstance(res, DivergenceError):
                status[i, j] = "diverged"
                continue
            store.write_figure(d / "learning_curve.png", figures.learning_curve(res.metrics))
            ds = perturb_analysis(res.model, task=exp.task, kind="noisy", strengths=strengths, n=n_test,
                                  std_ratio=std_ratio)
            ds.attrs.update(model=exp.config["model"]["unit"], config=dumps(exp.config))
            store.write_dataset(d / "perturb.nc", ds)
            acc[i, j], loss[i, j] = ds.accuracy.values, ds.loss.values
        seconds.append(time.perf_counter() - t0)
        if progress is not None:
            progress((i + 1) * (steps + 1), total, {"network": net, "s": seconds[-1]})

    onset, duration = default_window(exps[0].task.length, None, None)
    attrs = {"kind": "noisy", "n": n_test, "seed": 0, "task": exps[0].task.describe(), "chance": exps[0].task.chance,
             "metric": "accuracy", "higher_is_better": 1, "onset": onset, "duration": duration, "std_ratio": std_ratio}
    params_text = dumps({"params": {"networks": networks, "seeds": seeds, "hidden": hidden, "n_g": n_g,
                                    "downsample": downsample, "perm_seed": perm_seed, "steps": steps,
                                    "batch_size": batch_size, "lr": lr, "eval_size": eval_size, "strengths": strengths,
                                    "table_strength": table_strength, "std_ratio": std_ratio, "n_test": n_test,
                                    "match_tol": match_tol}})
    result = xr.Dataset(
        {
            "accuracy": (("network", "seed", "strength"), acc, {"long_name": "held-out accuracy under the noisy drive"}),
            "loss": (("network", "seed", "strength"), loss, {"long_name": "held-out loss under the noisy drive"}),
            "status": (("network", "seed"), status.astype(str), {"long_name": "ok or diverged"}),
            "params": ("network", np.array(params), {"long_name": "trainable parameters"}),
            "hidden": ("network", np.array(widths), {"long_name": "hidden units"}),
            "train_seconds": ("network", np.array(seconds), {"long_name": "wall time to train all seeds", "units": "s"}),
        },
        coords={"network": networks, "seed": seeds,
                "strength": ("strength", strengths, {"long_name": "noisy drive mean mu (std = std_ratio * mu)"}),
                "label": ("network", labels)},
    )
    result = stamp(result, analysis="perturb", config={**attrs, "scenario": "aru-table1", "table_strength": float(table_strength),
                                                       "params_toml": params_text, "seconds": time.perf_counter() - t_start})
    store.write_dataset(out / "table1.nc", result)
    store.write_figure(out / "accuracy_vs_noise.png", perturbation_curve(result))
    text = table(result)
    (out / "table1.txt").write_text(text + "\n")
    click.echo(text)
    datasets = {"table1": result}
    if rotation is not None:
        net = rotation["network"]
        base = len(networks) * (steps + 1)

        def report_rotation(step, _total, metrics):
            if progress is not None:
                progress(base + step, total, {"network": f"{net} rotated", **metrics})

        datasets["rotation"] = rotation_transfer(*trained[net], configs[net], out, n_test=n_test,
                                                 progress=report_rotation, **rotation)
        click.echo(rotation_text(datasets["rotation"]))
    if adaptation is not None:
        datasets["adaptation"] = adaptation_lambda1(trained["aru"][0], seeds, out, **adaptation)
        click.echo(adaptation_text(datasets["adaptation"]))
    return datasets


ROTATION = {"network": "rnn-gamma", "degrees": 45.0, "steps": 500}
"""Defaults of ``params.rotation`` (App. B.3: the trained RNN+gamma on 45-degree rotated digits)."""

ADAPTATION_FIXED = ("model", "task", "drive_in_map")
"""Options of [`adaptation_analysis`][dynlab.analyses.aru.adaptation.adaptation_analysis] that
``params.adaptation`` cannot set: the model is each trained ARU, the input is zero (App. D.4), and
both readings of the frozen map are run."""


def check_params(*, networks=(), adaptation=None, rotation=None, **_) -> None:
    """What [`run_aru_table1`][] checks before any training: ``adaptation`` needs the ARU among
    the networks and takes the adaptation analysis's options; ``rotation`` names a trained network
    with per-neuron activation parameters, a finite angle and a positive number of steps."""
    from dynlab import registry
    from dynlab.analyses.aru.adaptation import adaptation_analysis
    from dynlab.config import number_list
    from dynlab.errors import ConfigError
    from dynlab.variants import ACTIVATION

    if adaptation is not None:
        if "aru" not in networks:
            raise ConfigError("params.adaptation analyses the trained ARU: add \"aru\" to params.networks")
        registry.check_config("params.adaptation", adaptation_analysis, adaptation,
                              exclude=("key", "self", *ADAPTATION_FIXED))
    if rotation is not None:
        unknown = [k for k in rotation if k not in ROTATION]
        if unknown:
            raise ConfigError(f"params.rotation: unknown option(s) {', '.join(unknown)}; valid: {', '.join(ROTATION)}")
        r = {**ROTATION, **rotation}
        net = r["network"]
        if net not in networks:
            raise ConfigError(f"params.rotation.network {net!r} is not among params.networks {list(networks)}")
        unit = NETWORKS.get(net, ({},))[0].get("unit")
        if unit not in ACTIVATION:
            raise ConfigError(f"params.rotation.network {net!r} (unit {unit!r}) has no per-neuron activation "
                              f"parameters to retrain; units that do: {', '.join(ACTIVATION)}")
        number_list("params.rotation.degrees", [r["degrees"]])
        if isinstance(r["steps"], bool) or not isinstance(r["steps"], int) or r["steps"] < 1:
            raise ConfigError(f"params.rotation.steps must be a positive integer, got {r['steps']!r}")


def rotation_transfer(models, upright, configs: list[dict], out: Path, *, network: str, degrees: float, steps: int,
                      n_test: int, progress=None) -> xr.Dataset:
    r"""App. B.3: each trained model (``None``: diverged; trained on the task ``upright`` with ``configs``,
    one per seed) retrained on digits rotated by ``degrees`` with
    only its per-neuron activation parameters free ([`dynlab.transfer.retrain_activation`][]), seeds
    vmapped, ``steps`` steps of the original training's settings.

    Held-out accuracy on ``n_test`` digits (the same digits for every stage): ``original`` (the trained
    model, upright digits), ``rotated`` (the same model, rotated digits) and ``retrained`` (after
    retraining, rotated digits). ``recovered`` $= (a_{\rm retrained} - a_{\rm rotated}) /
    (a_{\rm original} - a_{\rm rotated})$, the fraction of the lost accuracy won back (paper: 94% → 42%
    → 56%, 0.27). Writes ``runs/<network>-seed<k>-rotated/`` and ``rotation.nc``.
    """
    import jax

    from dynlab import store
    from dynlab.config import apply_values
    from dynlab.errors import DivergenceError
    from dynlab.perturbations import evaluate_under
    from dynlab.losses import get_loss
    from dynlab.train import train_seeds
    from dynlab.transfer import retrain_activation

    seeds = [c["seed"] for c in configs]
    done = [j for j, m in enumerate(models) if m is not None]
    overrides = {"task.rotate": float(degrees), "train.steps": int(steps), "train.eval_every": max(steps // 4, 1),
                 "train.log_every": min(50, steps), "train.checkpoint_every": int(steps)}
    exps = [retrain_activation(models[j], apply_values(configs[j], overrides)) for j in done]
    dirs = [out / "runs" / f"{network}-seed{seeds[j]}-rotated" for j in done]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    results = train_seeds(exps, dirs, progress=progress) if exps else []
    metric = get_loss(upright.loss).metric_name
    key = jax.random.key(0)

    def accuracy(model, task):
        return float(evaluate_under(model, task, None, key, n_test)[metric])

    acc = np.full((len(seeds), 3), np.nan)
    for j, exp, res in zip(done, exps, results):
        acc[j, :2] = accuracy(models[j], upright), accuracy(models[j], exp.task)
        if not isinstance(res, DivergenceError):
            acc[j, 2] = accuracy(res.model, exp.task)
    lost = acc[:, 0] - acc[:, 1]
    recovered = np.where(lost > 0, (acc[:, 2] - acc[:, 1]) / np.where(lost > 0, lost, 1.0), np.nan)
    ds = xr.Dataset(
        {"accuracy": (("seed", "stage"), acc, {"long_name": f"held-out {metric} on {n_test} digits"}),
         "recovered": ("seed", recovered, {"long_name": "fraction of the accuracy lost to the rotation won back "
                                                         "by retraining the activation parameters"})},
        coords={"seed": seeds, "stage": ["original", "rotated", "retrained"]},
    )
    ds = stamp(ds, analysis="rotation-transfer", config={"network": network, "degrees": float(degrees), "steps": int(steps),
                                                         "trained": "per-neuron activation parameters only",
                                                         "task": upright.describe(), "n_test": n_test})
    store.write_dataset(out / "rotation.nc", ds)
    return ds


def rotation_text(ds: xr.Dataset) -> str:
    """The rotation transfer as lines of text: accuracy per stage and the fraction recovered, per seed."""
    lines = [f"rotation transfer (App. B.3): {ds.attrs['network']}, digits rotated {ds.attrs['degrees']:g} deg, "
             f"{ds.attrs['steps']} steps retraining {ds.attrs['trained']}",
             f"{'seed':>6}{'original':>10}{'rotated':>10}{'retrained':>11}{'recovered':>11}"]
    for s in ds.seed.values:
        a = 100 * ds.accuracy.sel(seed=s).values
        lines.append(f"{int(s):>6}{a[0]:>10.1f}{a[1]:>10.1f}{a[2]:>11.1f}{float(ds.recovered.sel(seed=s)):>11.2f}")
    return "\n".join(lines)


def adaptation_lambda1(models, seeds, out: Path, **options) -> xr.Dataset:
    r"""Fig. 5c/d on each trained ARU (``None``: diverged): $\lambda_1$ of the frozen static map with the
    $(n, s)$ the ARU adapts to under a step drive (*adapted*) and with those it holds undriven (*fixed*),
    from [`adaptation_analysis`][dynlab.analyses.aru.adaptation.adaptation_analysis] at zero input, under
    both readings of the map ([`READINGS`][dynlab.analyses.paper_claims.aru.READINGS]). ``options`` go
    to the analysis (default ``drives = [5.0]``, the noisy drive's mean in Table 1, and ``t_hats = [0]``:
    the claim needs only the steady state).

    Returns dims ``reading``, ``seed``, ``drive`` (the drives > 0): ``lambda1_adapted``, ``lambda1_fixed``
    (each the mean over the analysis's realisations) and ``closer`` $= |\lambda_1^{\rm fixed}| -
    |\lambda_1^{\rm adapted}|$, positive where adaptation brings $\lambda_1$ closer to 0. Each run's whole
    analysis is written to ``runs/aru-seed<k>/adaptation-<reading>.nc``; the summary to ``adaptation.nc``.
    """
    from dynlab import store
    from dynlab.analyses.aru.adaptation import adaptation_analysis

    options = {"drives": [5.0], "t_hats": [0], **options}
    drives = None
    values = {}
    for reading, in_map in READINGS.items():
        for j, (seed, model) in enumerate(zip(seeds, models)):
            if model is None:
                continue
            ds = adaptation_analysis(model, drive_in_map=in_map, **options)
            store.write_dataset(out / "runs" / f"aru-seed{seed}" / f"adaptation-{reading}.nc", ds)
            ds = ds.sel(drive=ds.drive > 0)
            drives = ds.drive.values
            runs = ds.sizes["realisation"] * ds.sizes["ic"]
            for name in ("adapted", "fixed"):
                values[reading, j, name] = ds[f"lambda1_{name}_mean"].values
                values[reading, j, f"{name}_bounded"] = ds[f"lambda1_{name}_bounded"].values
    shape = (len(READINGS), len(seeds), 0 if drives is None else drives.size)
    names = ("adapted", "fixed", "adapted_bounded", "fixed_bounded")
    lam = {name: np.full(shape, np.nan) for name in names}
    for (reading, j, name), v in values.items():
        lam[name][list(READINGS).index(reading), j] = v
    dims = ("reading", "seed", "drive")
    ds = xr.Dataset(
        {**{f"lambda1_{name}": (dims, lam[name], {
            "long_name": f"lambda_1 with the {name} (n, s), mean over realisations of the runs that did not escape "
                         f"(lambda1_{name}_bounded counts them)"}) for name in ("adapted", "fixed")},
         **{f"lambda1_{name}_bounded": (dims, lam[f"{name}_bounded"], {
             "long_name": f"runs with the {name} (n, s) that did not escape to infinity, of runs_per_point"})
            for name in ("adapted", "fixed")}},
        coords={"reading": ("reading", list(READINGS), {"long_name": "the drive xi in the frozen map or not"}),
                "seed": seeds, "drive": ("drive", np.asarray([] if drives is None else drives, float),
                                         {"long_name": "step drive xi"})},
    )
    ds["closer"] = (abs(ds.lambda1_fixed) - abs(ds.lambda1_adapted)).assign_attrs(
        long_name="|lambda_1 fixed| - |lambda_1 adapted| (> 0: adapted closer to 0)")
    ds = stamp(ds, analysis="adaptation-lambda1", config={**{k: str(v) for k, v in options.items()},
                                                          "runs_per_point": 0 if drives is None else runs})
    store.write_dataset(out / "adaptation.nc", ds)
    return ds


def adaptation_text(ds: xr.Dataset) -> str:
    """lambda_1 adapted vs fixed as lines of text, per reading, seed and drive."""
    total = ds.attrs.get("runs_per_point")
    lines = ["ARU lambda_1 with (n, s) frozen (Fig. 5c/d), zero input; means over the runs that did not escape "
             f"to infinity (bounded / {total} runs beside each)" if total else
             "ARU lambda_1 with (n, s) frozen (Fig. 5c/d), zero input:",
             f"{'frozen map':<16}{'seed':>6}{'drive':>7}{'adapted':>10}{'':>6}{'fixed':>10}{'':>6}"]

    def count(v, name):
        bounded = f"lambda1_{name}_bounded"
        return f" ({int(v[bounded])})" if bounded in v and np.isfinite(float(v[bounded])) else ""

    for r in ds.reading.values:
        for s in ds.seed.values:
            for d in ds.drive.values:
                v = ds.sel(reading=r, seed=s, drive=d)
                lines.append(f"{str(r):<16}{int(s):>6}{float(d):>7g}{float(v.lambda1_adapted):>10.4f}"
                             f"{count(v, 'adapted'):<6}{float(v.lambda1_fixed):>10.4f}{count(v, 'fixed'):<6}")
    return "\n".join(lines)


def table(ds: xr.Dataset) -> str:
    """Table 1 as text: accuracy (%) clean and under the noisy drive, mean ± sample sd over seeds."""
    s = ds.attrs["table_strength"]
    std = s * ds.attrs.get("std_ratio", 0.0)
    head = f"{'model':<26}{'params':>8}{'hidden':>8}{'clean':>16}{f'noisy N({s:g},{std:g}^2)':>20}{'drop':>9}"
    lines = [f"{ds.attrs.get('scenario', '')}: {ds.attrs.get('task', '')}",
             f"held-out accuracy (%), mean ± sample sd (ddof 1) over seeds {[int(s) for s in ds.seed.values]}",
             head, "-" * len(head)]
    for net in ds.network.values:
        clean = 100 * ds.accuracy.sel(network=net, strength=0.0)
        noisy = 100 * ds.accuracy.sel(network=net, strength=s)
        note = "  (not perturbed in the paper)" if net in NOT_PERTURBED_IN_PAPER else ""
        ok = int((ds.status.sel(network=net) == "ok").sum())
        note += "" if ok == ds.sizes["seed"] else f"  ({ds.sizes['seed'] - ok} diverged)"
        lines.append(f"{str(ds.label.sel(network=net).values):<26}{int(ds.params.sel(network=net)):>8}"
                     f"{int(ds.hidden.sel(network=net)):>8}{_pm(clean):>16}{_pm(noisy):>20}"
                     f"{float((clean - noisy).mean('seed')):>9.1f}{note}")
    return "\n".join(lines)


def _pm(da: xr.DataArray) -> str:
    """``mean ± sd`` over seeds, the sample sd (ddof = 1, [`dynlab.statistics.mean_sd`][])."""
    from dynlab.statistics import mean_sd

    if da.sizes["seed"] < 2:
        return f"{float(da.mean('seed')):.1f} (1 seed)"
    mean, sd = mean_sd(da.transpose("seed", ...).values)
    return f"{float(mean):.1f} ± {float(sd):.1f}"


def claims(params: dict) -> list:
    """The paper's claims ([`dynlab.analyses.paper_claims.aru.claims`][]) at these parameters."""
    return paper_claims({**params, "rotation": {**ROTATION, **(params.get("rotation") or {})}})
register("program", "aru-table1",
         "ARU Table 1 protocol: train networks x seeds on psMNIST, accuracy clean and under a noisy drive",
         claims=claims, check=check_params)(run_aru_table1)
