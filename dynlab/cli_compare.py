"""``dynlab compare``: side-by-side comparisons of learning rules (``compare pc-bp``).

Attach to the main CLI with ``main.add_command(compare)``; errors are reported by the main group
(one line, exit status 2).
"""

from __future__ import annotations

from pathlib import Path

import click

from dynlab.errors import ConfigError

TASKS = {"toy": "pc-toy", "mnist": "pc-mnist"}


def int_list(name: str, text: str) -> list[int]:
    """``"2,8,32"`` -> ``[2, 8, 32]``; anything else is a one-line :class:`ConfigError`."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    values = []
    for t in items:
        try:
            v = int(t)
        except ValueError:
            raise ConfigError(f"{name} must be a comma-separated list of positive integers, got {text!r}") from None
        if v <= 0:
            raise ConfigError(f"{name} must be positive integers, got {v}")
        values.append(v)
    if not values:
        raise ConfigError(f"{name} must list at least one positive integer, got {text!r}")
    return values


def _number(name: str, text, kind=float):
    if text is None:
        return None
    from dynlab.config import parse_value

    v = parse_value(str(text))
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
        raise ConfigError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {text!r}")
    return v


@click.group()
def compare():
    """Compare learning rules side by side (gradients, losses) across model sizes."""


@compare.command("pc-bp")
@click.option("--widths", default="8,32,128,512", show_default=True, help="Comma-separated widths N.")
@click.option("--depths", default="2,4,8", show_default=True, help="Comma-separated depths L (weight matrices, >= 2).")
@click.option("--param", default="mf", show_default=True, help="Parameterisation: sp, ntk, mf, mup.")
@click.option("--alpha", default=None, help="Residual depth exponent in [0, 1] (default: 1/2; 0 for sp).")
@click.option("--gamma0", default="1.0", show_default=True, help="Output scale gamma0.")
@click.option("--skips/--no-skips", default=True, show_default=True, help="Residual (skip) connections.")
@click.option("--activation", type=click.Choice(["linear", "tanh", "relu"]), default="linear", show_default=True)
@click.option("--task", "task_name", type=click.Choice(sorted(TASKS)), default="mnist", show_default=True,
              help="toy: x in R^40, 20 samples, y = +-1; mnist: one fixed batch of 64 digits (synthetic if absent).")
@click.option("--steps", default="100", show_default=True, help="Training steps.")
@click.option("--seeds", default="3", show_default=True, help="Number of seeds (weight initialisations).")
@click.option("--energy", type=click.Choice(["closed-form", "inference"]), default="closed-form", show_default=True,
              help="PC gradient from the closed-form equilibrated energy (linear) or after numerical inference.")
@click.option("--inference", type=click.Choice(["discrete", "ode"]), default="discrete", show_default=True,
              help="Numerical inference: optax steps on the activities, or a diffrax ODE solve.")
@click.option("--inference-steps", default="500", show_default=True, help="Inference budget (steps).")
@click.option("--beta", default="0.3", show_default=True, help="Activity step size (discrete inference).")
@click.option("--rtol", default="1e-4", show_default=True, help="Inference converged when |grad_z F| <= atol + rtol |grad_z F|_0.")
@click.option("--atol", default="0", show_default=True, help="See --rtol.")
@click.option("--optimizer", type=click.Choice(["gd", "adam"]), default="adam", show_default=True)
@click.option("--lr", default=None, help="Base learning rate eta0 (default: adam 1e-3, gd 0.025), scaled per layer.")
@click.option("--x64", is_flag=True, help="Compute in float64.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="Data directory (default: $DYNLAB_DATA).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Dataset file (.nc); figures go next to it. Default: runs/compare-pc-bp-<time>/pc_bp.nc.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar; print only the summary.")
def pc_bp(widths, depths, param, alpha, gamma0, skips, activation, task_name, steps, seeds, energy, inference,
          inference_steps, beta, rtol, atol, optimizer, lr, x64, data_dir, out, quiet):
    """PC vs BP gradients across width x depth: cosine, s - 1, L/F*, loss curves.

    PC and BP train as separate runs from identical weights on one fixed batch; every step records
    the cosine of their gradients, both losses, the PC energy and s(theta) - 1. Writes an xarray
    dataset (dims width, depth, seed, step) and three figures: the cosine heat map, s - 1 against
    L/N (log-log), and the loss curves.

    \b
    Example (the paper's Fig. 1, reduced):
      dynlab compare pc-bp --widths 8,32,128,512 --depths 2,4,8 --param mf --alpha 0.5 --task mnist
    """
    import warnings

    from dynlab import registry, store
    from dynlab.analyses.pc_bp import compare_pc_bp
    from dynlab.cli import progress_bar

    options = dict(
        param=param, alpha=_number("--alpha", alpha), gamma0=_number("--gamma0", gamma0), residual=skips,
        activation=activation, steps=_number("--steps", steps, int), energy=energy, inference=inference,
        inference_steps=_number("--inference-steps", inference_steps, int), beta=_number("--beta", beta),
        rtol=_number("--rtol", rtol), atol=_number("--atol", atol), optimizer=optimizer, lr=_number("--lr", lr), x64=x64,
    )
    w, d = int_list("--widths", widths), int_list("--depths", depths)
    n_seeds = _number("--seeds", seeds, int)
    if n_seeds is None or n_seeds <= 0:
        raise ConfigError(f"--seeds must be a positive integer, got {seeds!r}")
    from dynlab.analyses.pc_bp import CompareConfig

    CompareConfig(**options)  # validate everything before loading data or creating files
    if out is not None and Path(out).suffix != ".nc":
        raise ConfigError(f"--out must name a .nc file, got {out!r}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kwargs = {"data_dir": data_dir} if task_name == "mnist" else {}
        task = registry.build("task", TASKS[task_name], **kwargs)
    for wmsg in caught:
        click.echo(f"warning: {wmsg.message}", err=True)

    if not quiet:
        click.echo(f"PC vs BP on {task.describe()}: param {param}, {'residual' if skips else 'MLP'} {activation}, "
                   f"energy {energy}, {optimizer}, {len(w)} widths x {len(d)} depths x {n_seeds} seeds x {options['steps']} steps")
    with progress_bar(quiet, "cells") as update:
        ds = compare_pc_bp(task, w, d, n_seeds, progress=update, **options)

    nc = Path(out) if out else store.new_run_dir("compare-pc-bp") / "pc_bp.nc"
    nc.parent.mkdir(parents=True, exist_ok=True)
    store.write_dataset(nc, ds)
    from dynlab import figures_pc

    figs = {}
    for name, fn in (("cosine", figures_pc.cosine_heatmap), ("rescaling", figures_pc.rescaling_vs_l_over_n),
                     ("loss", figures_pc.loss_curves)):
        path = nc.with_name(f"{nc.stem}_{name}.png")
        store.write_figure(path, fn(ds))
        figs[name] = path
    _table(ds)
    if ds.attrs["n_unconverged"]:
        click.echo(f"warning: inference did not converge at {ds.attrs['n_unconverged']} of {ds['converged'].size} "
                   "steps; their cosines are excluded (NaN in 'cosine', kept in 'cosine_unconverged')", err=True)
    click.echo(f"dataset: {nc}\nfigures: " + ", ".join(str(p) for p in figs.values()))


def _table(ds):
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"mean PC-BP gradient cosine (over {ds.sizes['seed']} seeds x {ds.sizes['step']} steps)")
    table.add_column("N \\ L", justify="right")
    for L in ds.depth.values:
        table.add_column(str(int(L)), justify="right")
    for n in ds.width.values:
        row = ds.mean_cosine.sel(width=n).values
        table.add_row(str(int(n)), *("—" if v != v else f"{v:.4f}" for v in row))
    console = Console(width=100)
    console.print(table)
    slope = ds.attrs.get("rescaling_slope", float("nan"))
    if slope == slope:
        console.print(f"log-log slope of s - 1 against L/N: {slope:.3f} (s = tr(S)/d_out); "
                      f"{ds.attrs['rescaling_max_slope']:.3f} (s = lambda_max(S)); theory: 1")
