"""``dynlab import``: a model trained elsewhere (a PyTorch state dict) as a dynlab run directory."""

from __future__ import annotations

import click

from dynlab.cli.main import main
from dynlab.cli.options import int_option


@main.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", required=True, metavar="NAME",
              help="The weights' format: torch-rnn, torch-gru, torch-lstm, … (see 'dynlab list formats').")
@click.option("--nonlinearity", default=None, metavar="tanh|relu",
              help="torch-rnn: the module's nonlinearity (its state dict does not hold it).")
@click.option("--prefix", default=None, metavar="NAME.",
              help="The network's keys start with this (e.g. 'rnn.' for a module held as self.rnn). "
                   "Default: found from the keys.")
@click.option("--readout-prefix", default=None, metavar="NAME.",
              help="A torch.nn.Linear on the last layer's hidden state to import as the read-out (e.g. 'fc.'). "
                   "Default: the only linear layer beside the network, if any; else the identity.")
@click.option("--num-layers", default=None, metavar="INT", help="Number of layers. Default: counted from the keys.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Any other option of the format, as a TOML value (repeatable).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory to create. Default: runs/import-<format>-<time>.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the run directory.")
def import_cmd(file, fmt, nonlinearity, prefix, readout_prefix, num_layers, sets, out, quiet):
    """Import a model trained elsewhere from FILE (.safetensors, or .pt/.pth/.bin when torch is
    installed) into a new run directory.

    The run directory holds config.toml, model.eqx and import.toml (the source file and its
    SHA-256), so that 'dynlab analyze NAME --checkpoint RUN', 'dynlab plot' and 'dynlab dsa' use
    it as a trained run. Nothing in FILE is executed: a pickle that needs code is refused.
    """
    from dynlab import config as cfgmod
    from dynlab import store
    from dynlab.imports.run import import_run

    options = cfgmod.apply_sets({}, list(sets))
    given = {"nonlinearity": nonlinearity, "prefix": prefix, "readout_prefix": readout_prefix,
             "num_layers": None if num_layers is None else int_option("--num-layers", num_layers, minimum=1)}
    options.update({k: v for k, v in given.items() if v is not None})
    run_dir, config, model = import_run(file, fmt, out, **options)
    if quiet:
        click.echo(run_dir)
        return
    m, task = config["model"], config["task"]
    click.echo(f"imported {file} as {fmt}: {m['unit']} x {m.get('layers', 1)} layer(s), input {task['input_size']}, "
               f"output {task['output_size']}, {model.param_count()['total']:,} parameters\n"
               f"run directory: {run_dir}  (config.toml, model.eqx, {store.IMPORTED})")
