"""Third-party plug-ins through the ``dynlab.plugins`` entry-point group: one file adds a unit,
which then works everywhere a built-in unit does, with no table to edit.

The plug-in is a real installed distribution as Python sees one (a ``*.dist-info`` folder with
``entry_points.txt`` beside the module on ``sys.path``), exercised in a fresh interpreter. One such
interpreter serves every check of the installed plug-ins: it finds them through their entry points
as a ``dynlab`` process does, then takes the tests' steps in order (each ``dynlab`` command
through click's runner, exit status and stdout and stderr apart, and the Python snippet) and hands
back what each gave. Starting a process (importing JAX and dynlab) costs more than most of these
commands, and ten processes were started before. Beside the working plug-in is a broken one
(its entry point names a module that does not exist): the first command, which loads the plug-ins,
shows that it is one warning and that the working plug-in and the built-ins still load.
"""

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

PLUGIN = '''
"""A leaky tanh unit: h' = (1 - a) h + a tanh(W h + U x + drive)."""
import jax
import jax.numpy as jnp

from dynlab.registry import register
from dynlab.units.base import Cell


@register("unit", "toy-leaky", "leaky tanh unit from a test plug-in")
class ToyLeaky(Cell):
    """A leaky tanh layer (test plug-in)."""

    w: jax.Array
    u: jax.Array
    leak: float = 0.5

    def __init__(self, input_size: int, *, hidden: int = 8, key):
        self.input_size, self.hidden = input_size, hidden
        k1, k2 = jax.random.split(key)
        self.w = 0.9 * jax.random.normal(k1, (hidden, hidden)) / hidden**0.5
        self.u = jax.random.normal(k2, (hidden, input_size))

    def __call__(self, state, x, *, drive=None):
        a = self.w @ state + self.u @ x + (0.0 if drive is None else drive)
        h = (1 - self.leak) * state + self.leak * jnp.tanh(a)
        return h, h


def norm_figure(ds):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot(ds.time, ds.norm)
    ax.set_title("toy-norm figure")
    return fig


@register("analysis", "toy-norm", "state norm of layer 0 along a driven run (test plug-in)", figure=norm_figure)
def toy_norm(model, *, steps: int = 50, level: float = 1.0, seed: int = 0):
    """The norm of layer 0's state under a constant input ``level`` for ``steps`` steps."""
    import numpy as np
    import xarray as xr

    xs = jnp.full((steps, model.input_size), level)
    _, states = model.trajectory(xs)
    norm = np.linalg.norm(np.asarray(states[0]), axis=-1)
    return xr.Dataset({"norm": ("time", norm)}, coords={"time": np.arange(steps)},
                      attrs={"analysis": "toy-norm", "level": level, "seed": seed})
'''


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    """A folder on ``sys.path`` with two installed plug-ins: ``toy`` (the [`PLUGIN`][] module) and
    ``broken`` (an entry point naming a module that does not exist)."""
    root = tmp_path_factory.mktemp("site")
    (root / "toy_dynlab_plugin.py").write_text(textwrap.dedent(PLUGIN))
    info = root / "toy_dynlab_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-dynlab-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dynlab.plugins]\ntoy = toy_dynlab_plugin\n")
    info = root / "broken_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dynlab.plugins]\nbroken = no_such_module_anywhere\n")
    return root


def python(args, site, cwd):
    """``python ARGS`` in a fresh interpreter with ``site`` on its path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


DRIVER = """
import contextlib, io, json, os, sys, traceback
from click.testing import CliRunner
from dynlab.cli import main

answers = []
for cwd, step in json.loads(sys.argv[1]):
    os.chdir(cwd)
    if isinstance(step, list):  # dynlab ARGS
        r = CliRunner().invoke(main, step)
        answers.append({"returncode": r.exit_code, "stdout": r.stdout, "stderr": r.stderr})
        continue
    out, err, code = io.StringIO(), io.StringIO(), 0  # Python code
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(step, {})
        except BaseException:
            traceback.print_exc()
            code = 1
    answers.append({"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
print(json.dumps(answers))
"""


@dataclass
class Answer:
    """What one step gave, named as ``subprocess.run``'s result names it."""

    returncode: int
    stdout: str
    stderr: str


BUILD = textwrap.dedent("""
    import jax, numpy as np
    import dynlab
    from dynlab.scenarios.every_unit import model_section
    section = model_section("toy-leaky", 12)
    assert section == {"unit": "toy-leaky", "hidden": 12}, section
    model = dynlab.build("model", input_size=1, output_size=1, key=jax.random.key(0),
                         **section)
    y = model(np.ones((5, 1), np.float32))
    assert y.shape[-1] == 1 and np.isfinite(np.asarray(y)).all()
    print("ok")
""")

STEPS = {
    "unit": [
        ("listed", ["list", "units"]),
        ("built", BUILD),
        ("trained", ["train", "--model", "toy-leaky", "--task", "adding", "--steps", "10", "--out", "r",
                     "--set", "model.hidden=6", "--set", "task.length=5", "--set", "train.batch_size=4",
                     "--set", "train.eval_size=8", "--set", "train.eval_every=10", "-q"]),
        ("analysed", ["analyze", "lyapunov", "--checkpoint", "r", "--k", "2", "--steps", "40", "--burn-in", "10",
                      "--ics", "2", "-q"]),
    ],
    "analysis": [
        ("helped", ["analyze", "toy-norm", "--help"]),
        ("bad", ["analyze", "toy-norm", "--level", "nan"]),
        ("done", ["analyze", "toy-norm", "--model", "rnn", "--set", "model.hidden=5", "--level", "0.5",
                  "--steps", "20", "--out", "n.nc", "-q"]),
        ("unlinked", "import os; os.remove('n.png')"),  # so that the figure is the plot's
        ("plotted", ["plot", "n.nc"]),
    ],
}
"""Each test's steps, in order, by the name its test reads the answer under."""


@pytest.fixture(scope="module")
def answers(plugin_path, tmp_path_factory) -> dict[str, tuple[Path, dict[str, Answer]]]:
    """Every test's steps in one fresh interpreter with the plug-in installed, each test's in its own
    directory: ``{test: (its directory, {step: answer})}``."""
    dirs = {test: tmp_path_factory.mktemp(test) for test in STEPS}
    steps = [(str(dirs[test]), step) for test, named in STEPS.items() for _, step in named]
    done = python(["-c", DRIVER, json.dumps(steps)], plugin_path, dirs["unit"])
    assert done.returncode == 0, done.stderr
    given = iter(Answer(**a) for a in json.loads(done.stdout.strip().splitlines()[-1]))
    return {test: (dirs[test], {name: next(given) for name, _ in named}) for test, named in STEPS.items()}


def test_a_plugin_unit_is_listed_built_and_sized_with_no_table(answers):
    _, got = answers["unit"]
    listed, built = got["listed"], got["built"]
    assert listed.returncode == 0 and "toy-leaky" in listed.stdout and "test plug-in" in listed.stdout, listed.stderr
    assert built.returncode == 0 and "ok" in built.stdout, built.stderr


def test_a_plugin_unit_trains_and_is_analysed_from_the_command_line(answers):
    where, got = answers["unit"]
    assert got["trained"].returncode == 0, got["trained"].stderr
    assert got["analysed"].returncode == 0, got["analysed"].stderr
    assert (where / "r" / "lyapunov.nc").is_file()


def test_a_broken_plugin_is_a_warning_not_a_failure(answers):
    """The first command of the plug-ins' process (``dynlab list units``, which loads them) with a
    broken plug-in installed: exit 0, the built-in units listed, one warning naming the plug-in."""
    listed = answers["unit"][1]["listed"]
    assert listed.returncode == 0 and "gru" in listed.stdout, listed.stderr
    assert "plug-in 'broken'" in listed.stderr and "Traceback" not in listed.stderr, listed.stderr


def test_a_plugin_analysis_gets_a_command_a_dataset_and_its_figure(answers):
    """One file adds an analysis: 'dynlab analyze NAME --help', its run and 'dynlab plot' of the
    result work with no other file touched (the command is generated from its signature)."""
    where, got = answers["analysis"]
    helped, bad, done, unlinked, plotted = (got[k] for k in ("helped", "bad", "done", "unlinked", "plotted"))
    assert helped.returncode == 0 and "--level" in helped.stdout and "constant input" in helped.stdout, helped.stderr
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --level is nan: give a finite number"
    assert done.returncode == 0, done.stderr
    import xarray as xr

    ds = xr.load_dataset(where / "n.nc", engine="h5netcdf")
    assert ds.sizes["time"] == 20 and ds.attrs["level"] == 0.5 and ds.attrs["model"] == "rnn"
    assert unlinked.returncode == 0, unlinked.stderr
    assert plotted.returncode == 0 and (where / "n.png").stat().st_size > 1000, plotted.stderr
