"""``dynlab transfer KIND``: a registered transfer ([`dynlab.transfer`][]) of a trained run, one
command per transfer, generated from it as ``dynlab analyze NAME`` is from its analysis.

The command applies the same value a scenario's ``[transfer]`` table declares
([`dynlab.transfer.Transfer`][]): the transfer's own parameters are options from its typed
signature ([`dynlab.cli.analyze.signature_options`][]: ``dynlab transfer controller --seed 3``),
``--steps`` are the training steps after it (0, the default, as in a table: the transferred
model is written untrained) and ``--set task.KEY=VALUE`` / ``--set train.KEY=VALUE`` the task and
training keys it continues under. So the command with no options and ``[transfer] kind = "NAME"``
make the same model. The built-in ones are the ARU paper's:

* ``controller`` — App. C.4: a trained ARU's controller, frozen, inside a new main network
  (another seed), to be trained around it (``--steps``);
* ``activation`` — App. B.3: only the per-neuron activation parameters trainable, e.g. retrained
  on rotated digits (``--set task.rotate=45 --steps N``);
* ``isolate`` — Fig. 4c: the trained network with only the diagonal of ``W_hh`` kept.

Each writes an ordinary run directory (``config.toml`` says what was frozen, or that the units are
isolated), so ``dynlab train --resume`` and every ``dynlab analyze … --checkpoint`` work on it.
"""

from __future__ import annotations

import inspect

import click

from dynlab.cli.analyze import _plain, signature_options
from dynlab.cli.main import _RegistryGroup, main
from dynlab.cli.options import _options, data_dir_option, int_option
from dynlab.cli.train import train_and_report
from dynlab.errors import ConfigError


class _TransferGroup(_RegistryGroup):
    """One generated command per registered transfer."""

    kind = "transfer"

    def make(self, name: str) -> click.Command:
        return transfer_command(name)


@main.group(cls=_TransferGroup)
def transfer():
    """Variants of a trained network: the registered transfers ('dynlab list transfers'). Each writes a run directory."""


_common = _options([
    click.option("--checkpoint", required=True, type=click.Path(file_okay=False),
                 help="Run directory of the trained model."),
    click.option("--steps", metavar="INT", default=None,
                 help="Training steps after the transfer (default 0: the transferred model, untrained)."),
    click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                 help="A task.* or train.* key the transferred model continues under (repeatable)."),
    click.option("--out", type=click.Path(file_okay=False), default=None,
                 help="Run directory to create. Default: runs/transfer-<kind>-<time>."),
    click.option("-q", "--quiet", is_flag=True, help="No progress bar; print only the summary."),
    data_dir_option,
])


def transfer_command(name: str) -> click.Command:
    """The ``dynlab transfer NAME`` command of the registered transfer ``name``."""
    from dynlab import registry
    from dynlab.transfer import TRANSFER_ARGUMENTS

    entry = registry.get("transfer", name)
    signature = signature_options(name, entry.obj, exclude=TRANSFER_ARGUMENTS, where=f"transfer {name}")

    def callback(checkpoint, steps, sets, out, quiet, **given):
        from dynlab import config as cfgmod
        from dynlab import experiment, store
        from dynlab.transfer import Transfer

        tables = cfgmod.apply_sets({}, list(sets))
        if set(tables) - {"task", "train"}:
            raise ConfigError(f"--set takes task.* and train.* keys (the model comes from the trained run), got "
                              f"{', '.join(sorted(set(tables) - {'task', 'train'}))}.*")
        table = {"kind": name, **signature.parse(given), **tables,
                 **({} if steps is None else {"steps": int_option("--steps", steps, minimum=0)})}
        value = Transfer.parse(table, where=f"transfer {name}")
        trained = experiment.load_run(checkpoint)
        exp = value.start(trained)  # every check before the run directory is claimed
        run_dir = store.claim_output(out, f"transfer-{name}")
        if value.steps:
            train_and_report(exp, run_dir, quiet, what=f" ({name} of {checkpoint})")
            return
        with store.released_on_failure(run_dir, written=(store.CONFIG, store.MODEL, store.CHECKSUMS)):
            # a full disk leaves no claimed half-run that would refuse the same --out again
            store.write_config(run_dir, exp.config)
            store.save_model(run_dir, exp.model)
        click.echo(f"{name} of {checkpoint} -> {run_dir} (config.toml, model.eqx; not retrained: --steps N trains it)")

    for option in reversed(list(signature.options.values())):
        callback = option(callback)
    doc = _plain((inspect.getdoc(entry.obj) or entry.description).split("\n\n")[0])
    return click.command(name, help=f"{entry.description}.\n\n{doc}", short_help=entry.description)(_common(callback))
