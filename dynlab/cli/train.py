"""``dynlab train``: train a model with a rule on a task into a run directory (or resume one)."""

from __future__ import annotations

from pathlib import Path

import click

from dynlab.errors import ConfigError
from dynlab.cli.main import main
from dynlab.cli.options import data_dir_option, progress_bar


@main.command()
@click.option("--model", "unit", default=None, help="Unit name (see 'dynlab list units'). Default: aru.")
@click.option("--task", default=None, help="Task name (see 'dynlab list tasks'). Default: adding.")
@click.option("--rule", default=None, help="Learning rule (see 'dynlab list rules'). Default: bptt.")
@click.option("--steps", metavar="INT", default=None, help="Optimiser steps (train.steps). Default: 1500.")
@click.option("--seed", metavar="INT", default=None, help="Seed of parameters and data. Default: 0.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Start from a TOML run config ([model], [task], [rule], [train], seed).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override any config key, e.g. --set model.hidden=128 --set train.lr=1e-3 (repeatable).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory to create. Default: runs/train-<unit>-<task>-<time>.")
@click.option("--resume", type=click.Path(file_okay=False), default=None,
              help="Continue the run in this directory from its checkpoint (e.g. with a larger --steps).")
@data_dir_option
@click.option("-q", "--quiet", is_flag=True, help="No progress bar; print only the summary.")
def train(unit, task, rule, steps, seed, config_file, sets, out, resume, quiet):
    """Train a model with a learning rule on a task; write a run directory.

    The run directory gets config.toml, model.eqx, checkpoint.eqx, metrics.nc (training curves as
    an xarray Dataset) and learning_curve.png. Config keys: model.* (unit keys such as hidden,
    n_g, plus layers, encoder_size), task.*, rule.*, train.* (steps, batch_size, optimizer, lr,
    schedule, warmup, clip, weight_decay, eval_every, eval_size, log_every, checkpoint_every).
    """
    from dynlab import config as cfgmod
    from dynlab import experiment, store

    if resume:
        if config_file or unit or task or rule or out:
            raise ConfigError("--resume continues a run with its own config and directory: "
                              "drop --config/--model/--task/--rule/--out")
    else:
        config = cfgmod.load_toml(config_file) if config_file else experiment.default_config()
        if config_file:
            from dynlab.data import confine_file_data_dirs

            config = confine_file_data_dirs(config, config_file)
        for section, key, value in (("model", "unit", unit), ("task", "name", task), ("rule", "name", rule)):
            if value is not None:
                config.setdefault(section, {})[key] = value
    overrides = list(sets)
    if steps is not None:
        overrides.append(f"train.steps={steps}")
    if seed is not None:
        overrides.append(f"seed={seed}")
    # a resumed run keeps its model: --set model.* may not change the stored [model] section
    config = store.resume_config(resume, overrides) if resume else cfgmod.apply_sets(config, overrides)
    exp = experiment.build(config)
    if resume:
        run_dir = Path(resume)
    else:
        prefix = f"train-{exp.config['model'].get('unit', 'aru')}-{exp.config['task'].get('name', 'adding')}"
        run_dir = store.claim_output(out, prefix, config=exp.config)
    train_and_report(exp, run_dir, quiet, resume=bool(resume))


def train_and_report(exp, run_dir: Path, quiet: bool, *, resume: bool = False, what: str = ""):
    """Train ``exp`` into ``run_dir`` with a progress bar; write the learning curve; print the summary.

    A new run refused before its first checkpoint (a [`DynlabError`][dynlab.errors.DynlabError],
    e.g. a ``train.freeze`` pattern that matches nothing) leaves no directory behind
    ([`dynlab.store.release_claim`][]), so that the corrected command can take the same ``--out``.
    """
    from dynlab import experiment, figures, store
    from dynlab.errors import DynlabError
    from dynlab.train import train as run_training

    if not quiet:
        click.echo(f"{exp.config['model'].get('unit', experiment.DEFAULT_UNIT)}{what} "
                   f"({exp.model.param_count()['total']:,} parameters) on {exp.task.describe()}, "
                   f"rule {exp.config['rule'].get('name', experiment.DEFAULT_RULE)}, seed {exp.seed} -> {run_dir}")
    def resuming(step):
        if not quiet:
            click.echo(f"resuming {run_dir} from step {step} of {exp.train.steps}")

    try:
        with progress_bar(quiet, "train", "compiling…") as update:
            result = run_training(exp, run_dir, resume=resume, progress=update, on_resume=resuming)
    except DynlabError:
        if not resume:
            store.release_claim(run_dir, written=(store.CONFIG,))
        raise
    store.write_figure(run_dir / "learning_curve.png", figures.learning_curve(result.metrics))
    _summary(result)


def _summary(result):
    ds = result.metrics
    metric = ds.attrs["metric"]
    final = ds[f"eval_{metric}"].values[-1]
    first = ds[f"eval_{metric}"].values[0]
    click.echo(
        f"done: {result.steps_done} steps in {result.seconds:.1f} s; held-out {metric} {final:.4g} "
        f"(at step 0: {first:.4g}, chance {ds.attrs['chance']:.4g}); final batch loss {ds.loss.values[-1]:.4g}\n"
        f"run directory: {result.run_dir}  (metrics.nc, model.eqx, learning_curve.png)"
    )
