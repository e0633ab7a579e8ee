"""``dynlab transfer``: the ARU paper's variants of trained networks from the command line
([`dynlab.transfer`][]; registered on ``dynlab.cli.main``).

* ``controller`` — App. C.4: a trained ARU's controller, frozen, inside a new main network
  (another seed) trained around it;
* ``activation`` — App. B.3: a trained network retrained on 45°-rotated digits with only its
  per-neuron activation parameters free;
* ``isolate`` — Fig. 4c: the trained network with only the diagonal of ``W_hh`` kept.

Each writes an ordinary run directory (``config.toml`` says what was frozen, or that the units are
isolated), so ``dynlab train --resume`` and every ``dynlab analyze … --checkpoint`` work on it.
"""

from __future__ import annotations

import click

from dynlab.cli.main import _CommandGroup, main
from dynlab.cli.options import _options, data_dir_option, int_option, number_option, seed_option
from dynlab.cli.train import train_and_report


def _config(run: str, sets, steps) -> dict:
    """The stored config of ``run`` with the command's overrides (``train.*``, ``task.*``)."""
    from dynlab import config as cfgmod
    from dynlab import store
    from dynlab.errors import ConfigError

    if any(s.split("=", 1)[0].startswith("model.") for s in sets):
        raise ConfigError("the model comes from the trained run: drop the --set model.* overrides")
    overrides = list(sets)
    if steps is not None:
        overrides.append(f"train.steps={int_option('--steps', steps)}")
    return cfgmod.apply_sets(store.read_config(run), overrides)


@main.group(cls=_CommandGroup)
def transfer():
    """Variants of a trained network (ARU paper): controller transplant, activation-only retraining,
    isolated neurons. Each writes a run directory."""


_common = _options([
    click.option("--steps", metavar="INT", default=None, help="Training steps. Default: the trained run's."),
    click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                 help="Override task.*/train.* keys (repeatable)."),
    click.option("--out", type=click.Path(file_okay=False), default=None,
                 help="Run directory to create. Default: runs/transfer-<kind>-<time>."),
    click.option("-q", "--quiet", is_flag=True, help="No progress bar; print only the summary."),
    data_dir_option,
])


@transfer.command("controller")
@click.option("--donor", required=True, type=click.Path(file_okay=False), help="Run directory of a trained aru model.")
@click.option("--seed", metavar="INT", default=None, help="Seed of the new main network. Default: the donor's + 1.")
@_common
def controller_cmd(donor, seed, steps, sets, out, quiet):
    """Train a new ARU main network (another seed) around the donor's frozen controller (App. C.4)."""
    from dynlab import experiment, store
    from dynlab.transfer import new_main_network

    trained = experiment.load_run(donor, unit="aru")
    exp = new_main_network(trained, _config(donor, sets, steps), seed=None if seed is None else seed_option(seed))
    run_dir = store.claim_output(out, "transfer-controller")
    train_and_report(exp, run_dir, quiet, what=" (transplanted controller, frozen)")


@transfer.command("activation")
@click.option("--checkpoint", required=True, type=click.Path(file_okay=False),
              help="Run directory of a trained rnn-gamma or aru model.")
@click.option("--rotate", metavar="DEGREES", default="45", show_default=True, help="Rotation of the digits (task.rotate).")
@_common
def activation_cmd(checkpoint, rotate, steps, sets, out, quiet):
    """Retrain only the per-neuron activation parameters (rnn-gamma: n, s; aru: b_n, b_s) on rotated
    digits (App. B.3); everything else stays as trained."""
    from dynlab import config as cfgmod
    from dynlab import experiment, store
    from dynlab.errors import ConfigError
    from dynlab.transfer import retrain_activation

    trained = experiment.load_run(checkpoint)
    config = _config(checkpoint, sets, steps)
    if config["task"].get("name") not in ("psmnist", "smnist"):
        raise ConfigError(f"--rotate needs an MNIST task (psmnist, smnist); the run's task is "
                          f"{trained.task.describe()!r}")
    config = cfgmod.apply_values(config, {"task.rotate": number_option("--rotate", rotate)})
    exp = retrain_activation(trained.model, config)
    train_and_report(exp, store.claim_output(out, "transfer-activation"), quiet, what=" (activation parameters only)")


@transfer.command("isolate")
@click.option("--checkpoint", required=True, type=click.Path(file_okay=False),
              help="Run directory of a trained rnn, rnn-gamma or aru model.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory to create. Default: runs/transfer-isolate-<time>.")
def isolate_cmd(checkpoint, out):
    """Write the trained network with isolated neurons (W_hh -> diag W_hh, Fig. 4c) as a run directory
    to analyse, e.g. 'dynlab analyze perturb --checkpoint OUT'. Nothing is trained."""
    from dynlab import experiment, store
    from dynlab.transfer import isolate

    exp = isolate(experiment.load_run(checkpoint))
    run_dir = store.claim_output(out, "transfer-isolate")
    store.write_config(run_dir, exp.config)
    store.save_model(run_dir, exp.model)
    click.echo(f"isolated neurons of {checkpoint} -> {run_dir} (config.toml, model.eqx)")
