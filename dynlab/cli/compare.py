"""``dynlab compare``: side-by-side comparisons of learning rules (``compare pc-bp``, feed-forward or recurrent).

Attach to the main CLI with ``main.add_command(compare)``; errors are reported by the main group
(one line, exit status 2).
"""

from __future__ import annotations

from pathlib import Path

import click

from dynlab.errors import ConfigError
from dynlab.cli.analysis import check_outputs, dataset_file, write_figure
from dynlab.cli.main import _CommandGroup
from dynlab.cli.options import overwrite_given, overwrite_option, progress_bar


def _number(name: str, text, kind=float):
    from dynlab.config import parse_number

    return parse_number(name, text, integer=kind is int)


def _numbers(name: str, text, **bounds):
    """Comma-separated numbers ([`dynlab.config.parse_numbers`][]); ``None`` when not given."""
    from dynlab.config import parse_numbers

    return None if text is None else parse_numbers(name, text, **bounds)


class _AnalysisDefaults(click.Command):
    """``compare pc-bp``: an option not given is not passed, so its default is the analysis's
    (the signature of [`dynlab.analyses.pc_bp.compare_pc_bp`][] or ``compare_pc_bptt``, and
    [`dynlab.analyses.pc_bp.CompareConfig`][]); the help shows those, read when it is asked for."""

    def format_options(self, ctx, formatter):
        import dataclasses

        from dynlab import registry
        from dynlab.analyses.pc_bp import INFERENCE_KEYS, CompareConfig

        model = next(p.default for p in self.params if p.name == "model_kind")
        fields = {f.name: f.default for f in dataclasses.fields(CompareConfig) if f.default is not dataclasses.MISSING}
        defaults = {**fields, **INFERENCE_KEYS, "skips": fields["residual"],
                    **registry.defaults(registry.get("analysis", "pc-bptt" if model == "rnn" else "pc-bp").obj)}
        helps = self.__dict__.setdefault("helps", {param.name: param.help or "" for param in self.params})
        for param in self.params:
            value = defaults.get(param.name)
            if param.default is None and isinstance(value, (bool, int, float, str, tuple)):
                text = ",".join(map(str, value)) if isinstance(value, tuple) else str(value).lower()
                param.help = f"{helps[param.name]}  [default: {text}]".strip()
        super().format_options(ctx, formatter)


@click.group(cls=_CommandGroup)
def compare():
    """Compare learning rules side by side (gradients, losses) across model sizes."""


@compare.command("pc-bp", cls=_AnalysisDefaults)
@click.option("--model", "model_kind", type=click.Choice(["mlp", "rnn"]), default="mlp", show_default=True,
              help="mlp: feed-forward (PC vs BP over width x depth); rnn: the parameterised RNN (rnn-param; PC "
                   "through time vs BPTT over width x sequence length).")
@click.option("--widths", default=None, help="Comma-separated widths N.")
@click.option("--depths", default=None, help="mlp: comma-separated depths L (weight matrices, >= 2).")
@click.option("--lengths", default=None, help="rnn: comma-separated sequence lengths T.")
@click.option("--param", default=None, help="Parameterisation: sp, ntk, mf, mup.")
@click.option("--alpha", default=None, help="mlp: residual depth exponent in [0, 1] (default: 1/2; 0 for sp).")
@click.option("--gamma0", default=None, help="Output scale gamma0.")
@click.option("--gain", default=None, help="rnn: recurrent gain g (1: the marginal network).")
@click.option("--skips/--no-skips", default=None, help="mlp: residual (skip) connections.")
@click.option("--activation", type=click.Choice(["linear", "tanh", "relu"]), default=None)
@click.option("--task", "task_name", default=None,
              help="mlp: toy (x in R^40, 20 samples, y = +-1), mnist or cifar10 (one fixed batch of 64 images, "
                   "synthetic if absent) [default: mnist]; rnn: a sequence task with a length, e.g. adding [default: adding].")
@click.option("--batches", type=click.Choice(["fixed", "stream"]), default=None,
              help="mlp: train on the task's one fixed batch (as the paper's code does), or on a stream of fresh "
                   "batches from the image pool (batch t at step t).")
@click.option("--batch-size", default=None,
              help="rnn: size of each length's fixed batch (default 32); mlp with --batches stream: size of each "
                   "streamed batch (default: the task's batch, 64).")
@click.option("--steps", default=None, help="Training steps.")
@click.option("--seeds", default=None, help="Number of seeds (weight initialisations).")
@click.option("--energy", type=click.Choice(["closed-form", "inference"]), default=None,
              help="PC gradient from the closed-form equilibrated energy (linear) or after numerical inference.")
@click.option("--inference", type=click.Choice(["discrete", "ode", "gauss-newton", "levenberg-marquardt", "lbfgs"]),
              default=None,
              help="Numerical inference (with --energy inference): optax steps on the activities, a diffrax ODE "
                   "solve, or Gauss-Newton / Levenberg-Marquardt / L-BFGS in the error coordinates (mse loss).")
@click.option("--patience", default=None, help="Gauss-Newton / Levenberg-Marquardt / L-BFGS: give up once |grad_z F| "
              "has not halved in this many steps (nonsmooth energies). Default: the whole budget.")
@click.option("--smoothing", default=None,
              help="Decreasing smoothing widths, e.g. 1e-2,1e-3: run the inference on energies whose ReLU / max "
                   "kinks are smoothed to within each width in turn (units with nonsmooth energies).")
@click.option("--smoothing-x64", is_flag=True, help="Run the smoothed solves in float64 (float32 cannot resolve "
              "SITH-RNN's at 1e-3); the rest stays in float32.")
@click.option("--inference-steps", default=None, help="Inference budget (steps).")
@click.option("--activity-optimizer", type=click.Choice(["sgd", "momentum", "adam"]), default=None,
              help="Optimiser of the activities (discrete inference); momentum is heavy ball 0.9.")
@click.option("--beta", default=None, help="Activity step size (discrete inference).")
@click.option("--rtol", default=None, help="Inference converged when |grad_z F| <= atol + rtol |grad_z F|_0.")
@click.option("--atol", default=None, help="See --rtol.")
@click.option("--optimizer", type=click.Choice(["gd", "adam"]), default=None)
@click.option("--lr", default=None, help="Base learning rate eta0 (default: adam 1e-3, gd 0.025), scaled per layer.")
@click.option("--x64", is_flag=True, help="Compute in float64.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="Data directory (default: $DYNLAB_DATA).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Dataset file (.nc); figures go next to it. Default: runs/compare-pc-bp-<time>/pc_bp.nc.")
@overwrite_option
@click.option("-q", "--quiet", is_flag=True, help="No progress bar; print only the summary.")
def pc_bp(model_kind, widths, depths, lengths, param, alpha, gamma0, gain, skips, activation, task_name, batches,
          batch_size, steps, seeds, energy, inference, patience, smoothing, smoothing_x64, inference_steps, activity_optimizer, beta, rtol, atol,
          optimizer, lr, x64,
          data_dir, out, quiet):
    """PC vs BP gradients across width x depth (or x sequence length): cosine, s - 1, L/F*, loss curves.

    PC and BP train as separate runs from identical weights on one fixed batch (or, with --batches
    stream, on the same stream of fresh MNIST batches); every step records
    the cosine of their gradients, both losses, the PC energy and s(theta) - 1. Writes an xarray
    dataset (dims width, depth, seed, step) and three figures: the cosine heat map, s - 1 against
    L/N (log-log), and the loss curves. With --model rnn the network is an RNN under the same
    parameterisation, PC runs through time (rule pc-time) against BPTT, and the sequence length T
    takes the place of the depth (dims width, length, seed, step; s - 1 against T/N).

    \b
    Examples (the paper's Fig. 1, reduced; and its recurrent analogue):
      dynlab compare pc-bp --widths 8,32,128,512 --depths 2,4,8 --param mf --alpha 0.5 --task mnist
      dynlab compare pc-bp --model rnn --widths 16,64,256 --lengths 2,8,32 --task adding
    """
    import warnings

    from dynlab import registry, store
    from dynlab.analyses.pc_bp import DEFAULT_TASKS, CompareConfig, named_task, pc_bp_warnings, plan, require_memory
    from dynlab.analyses.pc_bp_figures import FIGURES, figure_paths

    recurrent = model_kind == "rnn"
    name = "pc-bptt" if recurrent else "pc-bp"
    options = dict(
        model=model_kind, param=param, gamma0=_number("--gamma0", gamma0), activation=activation,
        steps=_number("--steps", steps, int), energy=energy, inference=inference,
        inference_steps=_number("--inference-steps", inference_steps, int), activity_optimizer=activity_optimizer,
        beta=_number("--beta", beta), rtol=_number("--rtol", rtol), atol=_number("--atol", atol), optimizer=optimizer,
        patience=_number("--patience", patience, int), smoothing=_numbers("--smoothing", smoothing, above=0),
        smoothing_x64=smoothing_x64, lr=_number("--lr", lr), x64=x64,
    )
    if recurrent:
        _only("mlp", depths=depths, alpha=alpha, skips=skips, batches=batches)
        grid = {"lengths": _numbers("--lengths", lengths, integer=True, minimum=1)}
        options.update(gain=_number("--gain", gain), batch_size=_number("--batch-size", batch_size, int))
    else:
        _only("rnn", lengths=lengths, gain=gain)
        if batch_size is not None and batches != "stream":
            raise ConfigError("--batch-size applies to --model rnn, or to --model mlp with --batches stream")
        grid = {"depths": _numbers("--depths", depths, integer=True, minimum=1)}
        options.update(alpha=_number("--alpha", alpha), residual=skips, batches=batches,
                       batch_size=_number("--batch-size", batch_size, int))
    fn = registry.get("analysis", name).obj
    options = {k: v for k, v in options.items() if v is not None}  # not given: the analysis's default
    grid = {"widths": _numbers("--widths", widths, integer=True, minimum=1), **grid}
    grid = {k: registry.defaults(fn)[k] if v is None else v for k, v in grid.items()}  # the signature's default
    w, second = grid["widths"], grid["lengths" if recurrent else "depths"]
    cfg = CompareConfig.from_options(**options)  # validate everything before loading data or creating files
    rows = cfg.batch_size if recurrent else options.get("batch_size", 64)  # the images' fixed batch of 64
    require_memory(model_kind, w, second, rows)
    n_seeds = registry.defaults(fn)["seeds"] if seeds is None else _number("--seeds", seeds, int)
    if n_seeds <= 0:
        raise ConfigError(f"--seeds must be a positive integer, got {seeds!r}")
    if out is not None:  # the dataset and its three figures: nothing that exists is replaced without --overwrite
        check_outputs([("--out", dataset_file(out))] + [("--out", p) for p in figure_paths(Path(out)).values()])
    else:
        store.check_writable(Path("runs"), "--out")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task = named_task(model_kind, task_name, data_dir)
    for wmsg in caught:
        click.echo(f"warning: {wmsg.message}", err=True)
    if not quiet:
        click.echo(plan(cfg, task, task_name or DEFAULT_TASKS[model_kind], w, second, n_seeds, rows))
    with progress_bar(quiet, "cells") as update:
        ds = fn(task, seeds=n_seeds, progress=update, **grid, **options)
    try:
        nc = Path(out) if out else store.new_run_dir("compare-pc-bp") / "pc_bp.nc"
        nc.parent.mkdir(parents=True, exist_ok=True)
        store.write_dataset(nc, ds, replace=overwrite_given())  # a file that appeared meanwhile is kept
    except OSError as e:
        store.rescue_dataset(ds, "pc_bp", e)
    figs = figure_paths(nc)
    for figure, draw in FIGURES.items():
        write_figure(figs[figure], draw(ds))
    click.echo(registry.get("analysis", name).summary(ds))
    for note in pc_bp_warnings(ds):
        click.echo(f"warning: {note}", err=True)
    click.echo(f"dataset: {nc}\nfigures: " + ", ".join(str(p) for p in figs.values()))


def _only(model_kind: str, **given) -> None:
    """Options that apply to ``--model MODEL_KIND`` only must not be given with the other model."""
    for name, value in given.items():
        if value is not None:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} applies to --model {model_kind} only")


def pc_bptt_command(pc_bp: click.Command) -> click.Command:
    """``dynlab analyze pc-bptt``: ``compare pc-bp`` with ``--model rnn`` as its default (PC through
    time against BPTT), the registered ``pc-bptt`` analysis's command."""
    import copy

    command = copy.deepcopy(pc_bp)
    command.name = "pc-bptt"
    command.short_help = "PC through time vs BPTT on recurrent models over width x length (compare pc-bp --model rnn)."
    for param in command.params:
        if param.name == "model_kind":
            param.default = "rnn"
    return command

