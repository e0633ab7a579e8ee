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
from dynlab.claims import Claim, Estimate, NotTestable, scale_text
from dynlab.registry import register

NETWORKS = {  # name -> (model section without hidden, label in the table)
    "rnn-relu": ({"unit": "rnn", "activation": "relu"}, "RNN+ReLU"),
    "rnn-gamma": ({"unit": "rnn-gamma"}, "RNN+gamma (het.)"),
    "aru": ({"unit": "aru"}, "ARUN"),
    "gru": ({"unit": "gru"}, "GRU"),
    "lstm": ({"unit": "lstm"}, "LSTM"),
}
NOT_PERTURBED_IN_PAPER = ("gru", "lstm")


def model_sections(networks, hidden: int, n_g: int, match_tol: float, extra: dict | None = None) -> dict[str, dict]:
    """Each network's ``[model]`` section; GRU/LSTM widths matched to the ARUN's parameter count.

    ``extra`` maps further network names to their own ``[model]`` sections (used as given, except
    ``label``, which only names the row; ``hidden`` defaults to ``hidden``).
    """
    from dynlab import experiment, registry
    from dynlab.errors import ConfigError
    from dynlab.sizing import hidden_for_budget, model_params

    extra = extra or {}
    unknown = [n for n in networks if n not in NETWORKS and n not in extra]
    if unknown:
        raise ConfigError(f"unknown network(s) {', '.join(unknown)}; valid: {', '.join([*NETWORKS, *extra])} "
                          "(add others as [params.extra_networks.NAME] model sections)")
    budget = model_params("aru", hidden, 1, 10, n_g=n_g)
    sections = {}
    for name in networks:
        if name in extra:
            section = {k: v for k, v in extra[name].items() if k != "label"}
            experiment.validate({"model": section})  # a bad key fails here, before any training
            if "hidden" in registry.config_keys(registry.get("unit", section.get("unit", "aru")).obj):
                section = {"hidden": hidden, **section}
            sections[name] = section
            continue
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
    extra_networks: dict | None = None,
) -> dict[str, list[dict]]:
    """The runs [`run_aru_table1`][] trains: network -> one run config per seed (what
    [`dynlab.experiment.build`][] takes), the ``[model]`` sections from [`model_sections`][]."""
    sections = model_sections(list(networks), hidden, n_g, match_tol, extra_networks)
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
    extra_networks: dict | None = None,
    scenario: str = "aru-table1",
) -> dict:
    """Train every network for every seed, evaluate clean and under the noisy drive, print the
    table; returns ``{"table1": dataset}`` (also written to ``out_dir``).

    ``extra_networks``: more networks by name, each a ``[model]`` section plus an optional
    ``label`` (e.g. the ELM network with and without the ARU's adaptation in ``cross-adaptation``);
    list their names in ``networks``. ``scenario`` names the result (attr and table title).
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
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    configs = run_configs(networks, seeds, hidden=hidden, n_g=n_g, downsample=downsample, perm_seed=perm_seed,
                          steps=steps, batch_size=batch_size, lr=lr, eval_size=eval_size, match_tol=match_tol,
                          extra_networks=extra_networks)
    labels = [extra_networks[n].get("label", n) if n in (extra_networks or {}) else NETWORKS[n][1] for n in networks]
    shape = (len(networks), len(seeds), len(strengths))
    acc, loss = np.full(shape, np.nan), np.full(shape, np.nan)
    status = np.full(shape[:2], "ok", dtype=object)
    params, widths, seconds = [], [], []
    total = len(networks) * (steps + 1)
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
                                    "match_tol": match_tol, "extra_networks": extra_networks or {},
                                    "scenario": scenario}})
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
    result = stamp(result, analysis="perturb", config={**attrs, "scenario": scenario, "table_strength": float(table_strength),
                                                       "params_toml": params_text, "seconds": time.perf_counter() - t_start})
    store.write_dataset(out / "table1.nc", result)
    store.write_figure(out / "accuracy_vs_noise.png", perturbation_curve(result))
    text = table(result)
    (out / "table1.txt").write_text(text + "\n")
    click.echo(text)
    return {"table1": result}


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


# ---------------------------------------------------------------------------------------------
# The paper's claims (dynlab.claims), judged on table1.nc

PAPER_TABLE1 = {"aru": (95.4, 94.7), "rnn-gamma": (95.4, 84.0), "rnn-relu": (90.1, 33.0)}
"""Table 1, psMNIST: accuracy (%) clean and under the noisy drive N(5, 2^2)."""


def _per_seed(statistic, needs, what: str):
    """A claim statistic from per-seed values: ``statistic(acc)`` maps accuracies (%) ``{network:
    [clean, noisy] per seed}`` to one number per seed; the value is their mean with a Student-t
    interval over seeds (one seed of every network is one replicate of the whole table)."""

    def measure(datasets) -> Estimate:
        from dynlab.statistics import t_interval

        ds = datasets["table1"]
        missing = [n for n in needs if n not in ds.network.values]
        if missing:
            raise NotTestable(f"{', '.join(missing)} not among this run's networks")
        s = ds.attrs["table_strength"]
        acc = {n: 100 * np.stack([ds.accuracy.sel(network=n, strength=0.0).values,
                                  ds.accuracy.sel(network=n, strength=s).values]) for n in needs}
        per_seed = np.asarray(statistic(acc), float)
        n = int(np.isfinite(per_seed).sum())
        if n < 2:
            return Estimate(float(np.nanmean(per_seed)), note=f"{n} seed")
        ci = t_interval(per_seed, population="seeds (one of every network each)", allow_fewer=True)
        return Estimate(float(ci.estimate), float(ci.low), float(ci.high), level=ci.level, population=ci.population,
                        method=f"{ci.method}; {what}")

    return measure


def _drop(acc, net):
    return acc[net][0] - acc[net][1]


def claims(params: dict) -> list[Claim]:
    """Geadah et al.'s Table 1 claims at these parameters (psMNIST columns)."""
    steps_paper = "100 epochs"
    t = 784 // params["downsample"] ** 2
    scale = scale_text({
        "psMNIST": (f"{28 // params['downsample']}x{28 // params['downsample']} (T = {t})", "28x28 (T = 784)"),
        "N_h": (params["hidden"], 400), "N_g": (params["n_g"], 50),
        "training": (f"{params['steps']} steps of {params['batch_size']}, Adam {params['lr']:g}", f"{steps_paper}, Adam 1e-4"),
        "seeds": (len(params["seeds"]), 3), "test digits": (params["n_test"], 10000),
    }) + ("; data: MNIST's 60k training and 10k test files if present, else the 10k test file split into 8000 "
          "training and 2000 test digits (test digits repeat beyond 2000; the dataset's attr 'task' says which)")
    arun, gamma, relu = (f"{PAPER_TABLE1[n][0]} -> {PAPER_TABLE1[n][1]}" for n in ("aru", "rnn-gamma", "rnn-relu"))
    noisy = f"noisy drive N({params['table_strength']:g}, {params['std_ratio'] * params['table_strength']:g}^2)"
    return [
        Claim("table1-ordering", f"Under the {noisy}: ARUN > RNN+gamma > RNN+ReLU",
              f"Table 1: ARUN {arun}, RNN+gamma {gamma}, RNN+ReLU {relu}",
              "min over the two gaps (ARUN - RNN+gamma, RNN+gamma - RNN+ReLU) of noisy accuracy, % points",
              _per_seed(lambda a: np.minimum(a["aru"][1] - a["rnn-gamma"][1], a["rnn-gamma"][1] - a["rnn-relu"][1]),
                        ("aru", "rnn-gamma", "rnn-relu"), "per seed: the smaller gap"),
              lower=0.0, strict=False, why="an ordering: both gaps positive", scale=scale),
        Claim("drop-ordering", "The drop under the drive grows from ARUN to RNN+gamma to RNN+ReLU",
              "Table 1: drops 0.7 < 11.4 < 57.1 points",
              "min over the two differences of drops (clean - noisy), % points",
              _per_seed(lambda a: np.minimum(_drop(a, "rnn-gamma") - _drop(a, "aru"),
                                             _drop(a, "rnn-relu") - _drop(a, "rnn-gamma")),
                        ("aru", "rnn-gamma", "rnn-relu"), "per seed: the smaller difference"),
              lower=0.0, why="an ordering: both differences positive", scale=scale),
        Claim("arun-robust", "ARUN keeps its accuracy under the drive: drop <= 2 points",
              "Table 1: 95.4 -> 94.7 (drop 0.7)", "clean - noisy accuracy of ARUN, % points",
              _per_seed(lambda a: _drop(a, "aru"), ("aru",), "per seed: the drop"), upper=2.0,
              why="the paper's 0.7 points with room for a smaller network's noise; RNN+gamma drops 11.4", scale=scale),
        Claim("relu-collapses", "RNN+ReLU loses most of its accuracy under the drive: drop >= 30 points",
              "Table 1: 90.1 -> 33.0 (drop 57.1)", "clean - noisy accuracy of RNN+ReLU, % points",
              _per_seed(lambda a: _drop(a, "rnn-relu"), ("rnn-relu",), "per seed: the drop"), lower=30.0,
              why="half the paper's drop: a collapse, not a dent", scale=scale),
        Claim("adapted-lambda1", "Adapted lambda_1 is closer to 0 than with fixed (n, s)", "Fig. 5c/d",
              "dynlab analyze adaptation on the trained ARU", None,
              untestable="aru-table1 does not run it; run 'dynlab analyze adaptation --checkpoint "
                         "<out>/runs/aru-seed0 --task psmnist' on this run's ARU", scale=scale),
        Claim("rotation-transfer", "Retraining only (n, s) on 45-degree rotated digits recovers over a quarter of "
              "the accuracy lost", "App. B.3: 94% -> 42% rotated, 56% after retraining (n, s)",
              "dynlab transfer activation on the trained RNN+gamma", None,
              untestable="aru-table1 does not run it; run 'dynlab transfer activation --checkpoint "
                         "<out>/runs/rnn-gamma-seed0' on this run's RNN+gamma", scale=scale),
    ]


register("program", "aru-table1",
         "ARU Table 1 protocol: train networks x seeds on psMNIST, accuracy clean and under a noisy drive",
         claims=claims)(run_aru_table1)
