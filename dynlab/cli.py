"""The ``dynlab`` command line.

Every user mistake is one line on stderr and exit status 2 (no traceback); a diverged training
run is one line and exit status 1, with its last good checkpoint and metrics kept on disk.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dynlab.errors import ConfigError, DivergenceError, DynlabError

PLURALS = {"units": "unit", "rules": "rule", "tasks": "task", "analyses": "analysis", "scenarios": "scenario",
           "losses": "loss", "models": "model"}


class _Group(click.Group):
    """Turns every error into one line on stderr and a meaningful exit status."""

    def main(self, args=None, prog_name=None, **extra):
        try:
            result = super().main(args=args, prog_name=prog_name or "dynlab", standalone_mode=False, **extra)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(130)
        except click.ClickException as e:
            hint = f" (see '{e.ctx.command_path} --help')" if getattr(e, "ctx", None) else ""
            click.echo(f"error: {e.format_message()}{hint}", err=True)
            sys.exit(2)
        except DynlabError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except DivergenceError as e:
            click.echo(f"diverged: {e}", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="dynlab")
def main():
    """dynlab: recurrent units x learning rules x tasks x dynamical analyses, in JAX.

    \b
    Examples:
      dynlab list units
      dynlab train --model aru --task adding --steps 1500
      dynlab train --model rnn --task recall --set model.hidden=128 --set train.lr=1e-3
    """


@main.command("list")
@click.argument("kind", required=False)
def list_cmd(kind):
    """List registered plug-ins with one-line descriptions.

    KIND is one of: units, rules, tasks, analyses, scenarios, losses, models (default: all).
    """
    import dynlab
    from dynlab import registry

    kinds = ["unit", "rule", "task", "analysis", "scenario"] if kind is None else [PLURALS.get(kind, kind)]
    for k in kinds:
        if k not in dynlab.KINDS:
            raise ConfigError(f"unknown kind {kind!r}; valid: {', '.join(PLURALS)}")
        entries = registry.entries(k)
        if kind is None:
            click.echo(f"{next(p for p, s in PLURALS.items() if s == k)}:")
        for e in entries:
            click.echo(f"  {e.name:<14} {e.description}")
        if not entries:
            click.echo("  (none yet)")


def _progress(quiet: bool, description: str):
    """A rich progress bar (steps, loss, metric, ETA) as a context manager yielding an update fn."""
    import contextlib

    if quiet:
        return contextlib.nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    @contextlib.contextmanager
    def bar():
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            transient=False,
        ) as p:
            task = p.add_task(description, total=None, status="compiling…")

            def update(step, total, metrics):
                status = "  ".join(f"{k} {v:.4g}" for k, v in metrics.items())
                p.update(task, completed=step, total=total, status=status)

            yield update

    return bar()


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
    from dynlab.train import train as run_training

    if resume:
        if config_file or unit or task or rule:
            raise ConfigError("--resume continues a run with its own config: drop --config/--model/--task/--rule")
        config = store.read_config(resume)
    else:
        config = cfgmod.load_toml(config_file) if config_file else experiment.default_config()
        for section, key, value in (("model", "unit", unit), ("task", "name", task), ("rule", "name", rule)):
            if value is not None:
                config.setdefault(section, {})[key] = value
    overrides = list(sets)
    if steps is not None:
        overrides.append(f"train.steps={steps}")
    if seed is not None:
        overrides.append(f"seed={seed}")
    config = cfgmod.apply_sets(config, overrides)
    exp = experiment.build(config)

    if resume:
        run_dir = Path(resume)
    elif out is not None:
        run_dir = Path(out)
        if (run_dir / store.CONFIG).exists():
            raise ConfigError(f"{out!r} already holds a run; use --resume {out} or another --out")
        run_dir.mkdir(parents=True, exist_ok=True)
    else:
        run_dir = store.new_run_dir(f"train-{exp.config['model'].get('unit', 'aru')}-{exp.config['task'].get('name', 'adding')}")

    if not quiet:
        click.echo(f"{exp.config['model'].get('unit', experiment.DEFAULT_UNIT)} "
                   f"({exp.model.param_count()['total']:,} parameters) on {exp.task.describe()}, "
                   f"rule {exp.config['rule'].get('name', experiment.DEFAULT_RULE)}, seed {exp.seed} -> {run_dir}")
    with _progress(quiet, "train") as update:
        result = run_training(exp, run_dir, resume=bool(resume), progress=update)
    from dynlab import figures

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


if __name__ == "__main__":
    main()
