"""``dynlab plot FILE``: the figure a result file's ``analysis`` attribute names."""

from __future__ import annotations

from pathlib import Path

import click

from dynlab.cli.analysis import check_writable, draw_figure, non_finite_variables
from dynlab.cli.main import _first_line, main


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Figure file. Default: FILE with .png.")
def plot(file, out):
    """Draw the figure that fits a result file (.nc): training curves, Lyapunov spectrum, spectra,
    sweep, or a generic plot of its variables."""
    import xarray as xr

    from dynlab import figures
    from dynlab.errors import DataError

    path = Path(file)
    if not path.is_file():
        raise DataError(f"no result file {file!r}")
    try:
        ds = xr.load_dataset(path, engine="h5netcdf")
    except Exception as e:
        raise DataError(f"{file!r} is not a readable netCDF result file ({type(e).__name__})") from None
    png = Path(out) if out else path.with_suffix(".png")
    check_writable(png.parent, "--out")

    def figure(ds):
        try:
            return figures.plot_dataset(ds)
        except (KeyError, AttributeError, IndexError, ValueError) as e:
            if non_finite_variables(ds):
                raise  # draw_figure reports the NaN/inf result
            kind = ds.attrs.get("analysis", "(none)")
            click.echo(f"warning: {file} lacks what the {kind!r} figure needs ({type(e).__name__}: {_first_line(e)}); "
                       "drew the generic figure of its variables", err=True)
            return figures.generic(ds)

    ds.attrs["path"] = str(path)
    draw_figure(png, figure, ds)
    click.echo(f"figure: {png}")
