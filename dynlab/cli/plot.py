"""``dynlab plot FILE``: the figure a result file's ``analysis`` attribute names."""

from __future__ import annotations

from pathlib import Path

import click

from dynlab.cli.analysis import check_outputs, draw_figure
from dynlab.cli.main import main
from dynlab.cli.options import overwrite_given, overwrite_option


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Figure file. Default: FILE with .png (FILE-2.png, … when that exists, unless --overwrite).")
@overwrite_option
def plot(file, out):
    """Draw the figure that fits a result file (.nc): training curves, Lyapunov spectrum, spectra,
    sweep, or a generic plot of its variables.

    An existing --out is refused unless --overwrite is given; a run's or sweep's own files
    (config.toml, model.eqx, sweep.nc, …) and FILE itself are refused even then."""
    from dynlab import budget, figures
    from dynlab.errors import DataError, first_line

    path = Path(file)
    if not path.is_file():
        raise DataError(f"no result file {file!r}")
    ds = budget.load_result(path)
    png = Path(out) if out else default_figure(path)
    check_outputs([("--out", png)], reading=[path])

    def figure(ds):
        try:
            return figures.plot_dataset(ds)
        except (KeyError, AttributeError, IndexError, ValueError) as e:
            if figures.non_finite_variables(ds):
                raise  # draw_figure reports the NaN/inf result
            kind = ds.attrs.get("analysis", "(none)")
            click.echo(f"warning: {file} lacks what the {kind!r} figure needs ({type(e).__name__}: {first_line(e)}); "
                       "drew the generic figure of its variables", err=True)
            return figures.generic(ds)

    ds.attrs["path"] = str(path)
    draw_figure(png, figure, ds)
    click.echo(f"figure: {png}")


def default_figure(path: Path) -> Path:
    """``FILE.png`` beside the result file; with an existing one and no ``--overwrite`` (or one
    that a run or sweep directory owns, [`dynlab.store.own_file`][], which nothing replaces), the
    first free ``FILE-2.png``, ``FILE-3.png``, … (a default never replaces a figure)."""
    from dynlab import store

    png, n = path.with_suffix(".png"), 1
    while (png.exists() or png.is_symlink()) and (not overwrite_given() or store.own_file(png)):
        n += 1
        png = path.with_name(f"{path.stem}-{n}.png")
    return png
