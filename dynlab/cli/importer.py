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
@click.option("--option", "format_options", multiple=True, metavar="KEY=VALUE",
              help="Any other option of the format, as a TOML value (repeatable).")
@click.option("--options-file", default=None, metavar="FILE",
              help="The format's options from a JSON object or TOML table, e.g. the model_config.json "
                   "published beside the weights; --option and the options above override its keys.")
@click.option("--task", "task_name", default=None, metavar="NAME",
              help="The dynlab task the model was trained on (its widths must be the model's); analyses then "
                   "use it. Default: 'external' (the widths only).")
@click.option("--set", "sets", multiple=True, metavar="task.KEY=VALUE",
              help="A key of --task's task, e.g. --set task.length=20 (repeatable).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory to create. Default: runs/import-<format>-<time>.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the run directory.")
def import_cmd(file, fmt, nonlinearity, prefix, readout_prefix, num_layers, format_options, options_file, task_name,
               sets, out, quiet):
    """Import a model trained elsewhere from FILE (.safetensors, or .pt/.pth/.bin/.pth.tar when
    torch is installed) into a new run directory.

    The run directory holds config.toml, model.eqx and import.toml (the source file and its
    SHA-256), so that 'dynlab analyze NAME --checkpoint RUN', 'dynlab plot' and 'dynlab analyze
    dsa' use it as a trained run. Nothing in FILE is executed: a pickle that needs code is
    refused. 'dynlab list formats' lists the formats.

    A published model's constructor arguments, such as the model_config.json beside each of the
    ELM authors' NeuronIO models, are the format's options: pass the file with --options-file.
    """
    from dynlab import config as cfgmod
    from dynlab import store
    from dynlab.errors import ConfigError
    from dynlab.imports.options import read_options
    from dynlab.imports.run import import_run

    options = {} if options_file is None else read_options(options_file)
    for assignment in format_options:
        keys, value = cfgmod.parse_set(assignment)
        if len(keys) != 1:
            raise ConfigError(f"malformed --option {assignment!r}: expected KEY=VALUE, a key of the format")
        options[keys[0]] = value
    tables = cfgmod.apply_sets({}, list(sets))
    if set(tables) - {"task"}:
        raise ConfigError(f"--set sets keys of the task only (task.KEY=VALUE), got {', '.join(sorted(tables))}; "
                          "the model is the file's")
    if tables and task_name is None:
        raise ConfigError("--set task.* needs --task NAME (the task the model was trained on)")
    task = None if task_name is None else {**tables.get("task", {}), "name": task_name}
    given = {"nonlinearity": nonlinearity, "prefix": prefix, "readout_prefix": readout_prefix,
             "num_layers": None if num_layers is None else int_option("--num-layers", num_layers, minimum=1)}
    options.update({k: v for k, v in given.items() if v is not None})
    run_dir, config, model = import_run(file, fmt, out, task=task, **options)
    if quiet:
        click.echo(run_dir)
        return
    m = config["model"]
    click.echo(f"imported {file} as {fmt}: {m['unit']} x {m.get('layers', 1)} layer(s), input {model.input_size}, "
               f"output {model.output_size}, task {config['task']['name']}, {model.param_count()['total']:,} parameters\n"
               f"run directory: {run_dir}  (config.toml, model.eqx, {store.IMPORTED})")
