r"""An imported model as a dynlab run directory: what ``dynlab import`` writes.

A weight format is a registered builder (kind ``"format"``, ``dynlab list formats``):

    @register("format", "torch-gru", "torch.nn.GRU: ...")
    def torch_gru(weights: dict[str, np.ndarray], **options) -> tuple[dict, eqx.Module]: ...

It takes the flat state dict of [`dynlab.imports.weights.read_weights`][] and its options
(keyword parameters with defaults, checked like every config, [`dynlab.registry.check_config`][])
and returns ``(config, model)``: the dynlab run config that builds the model's skeleton
([`skeleton`][]) and that skeleton with the imported arrays in it. It raises one-line
[`DataError`][dynlab.errors.DataError]s for weights it cannot take, and its docstring gives the
parameter mapping as math.

[`import_run`][] turns a file into a run directory like ``dynlab train``'s: ``config.toml``,
``model.eqx`` (with its checksum in ``checksums.toml``) and ``import.toml`` ([`dynlab.store.IMPORTED`][]: the source file,
its SHA-256, the format and its options). Every analysis (``--checkpoint RUN``), ``dynlab plot``
of their results, and ``dynlab analyze dsa`` read it as they read a trained run; none needs torch.

**Enforces**: the run directory is claimed before anything is written and never replaces what
exists ([`dynlab.store.claim_run_dir`][]); a refused import leaves no directory behind
([`dynlab.store.release_claim`][]); the stored config rebuilds a model of exactly the imported
model's structure, shapes and dtypes (checked before writing, so ``--checkpoint RUN`` loads it).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from dynlab.errors import ConfigError, DataError

__all__ = ["import_run", "imported", "imported_model", "set_arrays", "skeleton", "with_task"]


def skeleton(config: dict):
    """The model ``config`` builds (its arrays are the seed's, to be replaced by imported ones)."""
    from dynlab import experiment

    return experiment.build(config, training=False).model


def set_arrays(model, arrays: dict[str, Any]):
    """``model`` with the leaves at the given attribute paths (``"cells.0.cell.weight_ih"``; an
    integer part indexes a tuple) replaced by ``arrays`` (NumPy, cast to the leaf's dtype)."""
    import equinox as eqx
    import jax.numpy as jnp

    def getter(path):
        def get(m):
            for part in path.split("."):
                m = m[int(part)] if part.isdigit() else getattr(m, part)
            return m
        return get

    paths = list(arrays)
    old = [getter(p)(model) for p in paths]
    new = [jnp.asarray(arrays[p], dtype=o.dtype) for p, o in zip(paths, old)]
    for p, o, n in zip(paths, old, new):
        if n.shape != o.shape:  # the format's shape checks let a mismatch through: a bug, not a user's mistake
            raise RuntimeError(f"imported array {p} has shape {n.shape}, the model's {o.shape}")
    return eqx.tree_at(lambda m: [getter(p)(m) for p in paths], model, new)


def imported(model: dict, input_size: int, output_size: int, arrays: dict[str, Any]) -> tuple[dict, object]:
    """The ``(config, model)`` a format returns: the run config of the ``[model]`` table ``model``
    on the widths-only task ``external``, and the model it builds with ``arrays`` (attribute paths,
    [`set_arrays`][]) put in."""
    config = {"seed": 0, "model": model,
              "task": {"name": "external", "input_size": int(input_size), "output_size": int(output_size)},
              "rule": {"name": "bptt"}, "train": {}}
    return config, set_arrays(skeleton(config), arrays)


def imported_model(path: Path | str, format: str, **options):
    """``(config, model)`` of the weights in ``path`` read as ``format`` (nothing written)."""
    from dynlab import registry
    from dynlab.imports.weights import read_weights

    entry = registry.get("format", format)
    registry.check_config(f"import --format {format}", entry.obj, options, exclude=("weights",))
    weights = read_weights(path)
    try:
        return entry.obj(weights, **options)
    except DataError as e:
        raise DataError(f"{str(path)!r} as {format}: {e}") from None


def with_task(config: dict, task: dict) -> dict:
    """``config`` with its ``[task]`` replaced by ``task`` (a table with ``name`` and the task's
    keys): the task the model was trained on, which analyses then use (``--task`` of an analysis,
    ``dynlab analyze dsa``). **Enforces** that it has the imported model's input and output widths
    (one-line [`ConfigError`][dynlab.errors.ConfigError] naming both otherwise)."""
    from dynlab import registry

    section = dict(task)
    name = section.pop("name")
    built = registry.build("task", name, **section)
    widths = config["task"]["input_size"], config["task"]["output_size"]
    if (built.input_size, built.output_size) != widths:
        raise ConfigError(f"task {name!r} has input_size {built.input_size} and output_size {built.output_size}, but the "
                          f"imported model reads {widths[0]} inputs and has {widths[1]} outputs: give a task of these "
                          "widths, or no --task (task 'external')")
    return {**config, "task": {"name": name, **section}}


def _check_rebuilds(config: dict, model) -> None:
    """The stored config must rebuild exactly this model's structure (else ``--checkpoint`` could not load it)."""
    import equinox as eqx
    import jax

    def shapes(m):
        arrays, static = eqx.partition(m, eqx.is_array)
        return jax.tree_util.tree_structure(static), [(a.shape, a.dtype) for a in jax.tree_util.tree_leaves(arrays)]

    if shapes(skeleton(config)) != shapes(model):
        raise RuntimeError("an import format returned a model that its config does not rebuild")


def import_run(path: Path | str, format: str, out: Path | str | None, *, task: dict | None = None,
               **options) -> tuple[Path, dict, Any]:
    """Import the weights in ``path`` as ``format`` (with the format's ``options``) into the new
    run directory ``out`` (``None``: a fresh ``runs/import-<format>-<time>``); ``task``: the
    ``[task]`` table of the task it was trained on ([`with_task`][]; default the format's, the
    widths-only ``external``).

    Returns ``(run directory, config, model)``. ``out`` is checked first (a directory holding
    anything is refused before the file is read), and claimed only once the model is built, so a
    refused file leaves nothing behind.
    """
    import dynlab
    from dynlab import config as cfgmod
    from dynlab import store
    from dynlab.imports.weights import sha256

    if out is not None:
        store.check_output_dir(out)
    source = Path(path)
    config, model = imported_model(source, format, **options)
    if task is not None:
        config = with_task(config, task)
    _check_rebuilds(config, model)
    run_dir = store.new_run_dir(f"import-{format}") if out is None else store.claim_run_dir(out)
    provenance = {"source": str(source.absolute()), "sha256": sha256(source), "format": format,
                  "time": datetime.datetime.now().isoformat(timespec="seconds"), "dynlab_version": dynlab.__version__}
    if options:
        provenance["options"] = dict(options)
    written = (store.CONFIG, store.IMPORTED, store.MODEL, store.CHECKSUMS)
    try:
        store.write_config(run_dir, config)
        text = cfgmod.dumps(provenance)
        store.atomic_write(run_dir / store.IMPORTED, lambda p: p.write_text(text))
        store.save_model(run_dir, model)
    except BaseException:
        store.release_claim(run_dir, written=written)
        raise
    return run_dir, config, model
