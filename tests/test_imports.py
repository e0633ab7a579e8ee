"""Models trained in PyTorch, imported (issue 36): ``dynlab import`` and [`dynlab.imports`][].

The truth is PyTorch itself: the imported ``torch.nn.RNN`` (tanh, relu), ``GRU`` and ``LSTM``
give the modules' own outputs and final states on the same inputs; the fixed points that dynlab
finds on an imported GRU are those that SciPy finds by minimising the speed of the torch module.
Bad files are one line and exit 2, and a pickle's payload never runs.
"""

from __future__ import annotations

import os
import pickle
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import xarray as xr

from cli_runner import invoke, one_line_error
from dynlab.errors import DataError
from dynlab.imports.run import imported_model

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

D, H, T, B = 3, 5, 7, 2


def save(tmp_path, state_dict, name="w.pt"):
    path = tmp_path / name
    if name.endswith(".safetensors"):
        safetensors_torch.save_file({k: v.contiguous() for k, v in state_dict.items()}, str(path))
    else:
        torch.save(state_dict, path)
    return path


# (module, nonlinearity, layers, bias): every module with 1 and 2 layers, with and without biases;
# batch_first alternates so that each module is run both ways
CASES = [(kind, nl, layers, bias) for kind, nl in (("RNN", "tanh"), ("RNN", "relu"), ("GRU", None), ("LSTM", None))
         for layers in (1, 2) for bias in (True, False)]


@pytest.mark.parametrize("kind, nonlinearity, layers, bias", CASES,
                         ids=[f"{k}{'-' + n if n else ''}-{l}layer-{'bias' if b else 'nobias'}" for k, n, l, b in CASES])
def test_imported_modules_equal_pytorchs_own(kind, nonlinearity, layers, bias, tmp_path):
    batch_first = (layers + bias) % 2 == 0
    torch.manual_seed(layers + 2 * bias)
    extra = {"nonlinearity": nonlinearity} if nonlinearity else {}
    module = getattr(torch.nn, kind)(D, H, num_layers=layers, bias=bias, batch_first=batch_first, **extra).eval()
    x = torch.randn(B, T, D)  # [batch, time, features]
    with torch.no_grad():
        out, final = module(x if batch_first else x.transpose(0, 1))
    out = out if batch_first else out.transpose(0, 1)
    config, model = imported_model(save(tmp_path, module.state_dict()), f"torch-{kind.lower()}", **extra)
    assert config["model"]["layers"] == layers and config["task"]["input_size"] == D
    # compiled as one program, as training and the analyses run it (op by op costs more CPU)
    ys, states = eqx.filter_jit(lambda m, xs: jax.vmap(m.trajectory)(xs))(model, jnp.asarray(x.numpy()))
    np.testing.assert_allclose(np.asarray(ys), out.numpy(), atol=1e-5, rtol=0)  # output = last layer's h_t
    h_n, c_n = final if kind == "LSTM" else (final, None)
    for l in range(layers):
        h = states[l][0] if kind == "LSTM" else states[l]
        np.testing.assert_allclose(np.asarray(h[:, -1]), h_n[l].numpy(), atol=1e-5, rtol=0)
        if c_n is not None:
            np.testing.assert_allclose(np.asarray(states[l][1][:, -1]), c_n[l].numpy(), atol=1e-5, rtol=0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(D, H, num_layers=2, batch_first=True)
        self.fc = torch.nn.Linear(H, 2)

    def forward(self, x):
        return self.fc(self.rnn(x)[0])


def test_a_network_with_a_read_out_in_a_checkpoint_imports_through_the_command_line(tmp_path):
    """A checkpoint ``{"model": state_dict, "optimizer": ..., "epoch": 3}`` of a module holding an
    LSTM and a linear read-out: the prefix, the layers and the read-out are found, the optimizer's
    state is ignored (with a warning), and the run directory's model is the network."""
    torch.manual_seed(0)
    net = Net().eval()
    opt = torch.optim.Adam(net.parameters())
    net(torch.randn(1, 3, D)).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.pth"
    torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, path)
    res = invoke(["import", str(path), "--format", "torch-lstm", "--out", "run"], tmp_path)
    assert res.exit_code == 0, res.output
    assert "warning: ignored" in res.stderr and "optimizer" in res.stderr
    from dynlab import experiment, store
    from dynlab.imports.weights import sha256

    provenance = store.cfgmod.load_toml(tmp_path / "run" / store.IMPORTED)
    assert provenance["sha256"] == sha256(path) and provenance["source"] == str(path)
    model = experiment.load_run(tmp_path / "run").model
    x = torch.randn(T, D)
    with torch.no_grad():
        want = net(x[None])[0].numpy()
    np.testing.assert_allclose(np.asarray(model(jnp.asarray(x.numpy()))), want, atol=1e-5, rtol=0)


# -- fixed points and Lyapunov exponents of an imported GRU ------------------------------------


@pytest.fixture(scope="module")
def gru_run(tmp_path_factory):
    """A 4-unit GRU with three fixed points at zero input (a strong orthogonal recurrence of the
    candidate), saved with safetensors and imported."""
    root = tmp_path_factory.mktemp("gru")
    torch.manual_seed(3)
    gru = torch.nn.GRU(1, 4)
    with torch.no_grad():
        gru.weight_hh_l0[8:] = 3.0 * torch.nn.init.orthogonal_(torch.empty(4, 4))
        gru.bias_ih_l0[4:8] -= 1.0
    res = invoke(["import", str(save(root, gru.state_dict(), "gru.safetensors")), "--format", "torch-gru",
                  "--out", "run", "-q"], root)
    assert res.exit_code == 0, res.output
    return root, gru


def torch_fixed_points(gru, starts: int = 40) -> list[np.ndarray]:
    """Minima of q(h) = ½‖F(h) − h‖² of the torch module at zero input (float64, SciPy BFGS with
    torch's gradient) from random starts in [-1, 1]^H; distinct points with q < 1e-20."""
    f64 = torch.nn.GRU(1, 4).double()
    f64.load_state_dict({k: v.double() for k, v in gru.state_dict().items()})
    x0 = torch.zeros(1, 1, dtype=torch.float64)

    def q(h):
        h = torch.tensor(h, requires_grad=True)
        value = 0.5 * ((f64(x0, h[None])[1][0] - h) ** 2).sum()
        value.backward()
        return value.item(), h.grad.numpy()

    rng = np.random.default_rng(0)
    points = []
    for _ in range(starts):
        r = scipy.optimize.minimize(q, rng.uniform(-1, 1, 4), jac=True, method="BFGS",
                                    options={"gtol": 1e-14, "maxiter": 2000})
        if r.fun < 1e-20 and not any(np.linalg.norm(r.x - p) < 1e-6 for p in points):
            points.append(r.x)
    return points


def test_fixed_points_of_an_imported_gru_are_those_of_the_torch_module(gru_run, monkeypatch):
    root, gru = gru_run
    monkeypatch.setitem(sys.modules, "torch", None)  # analysing an imported model needs no torch
    res = invoke(["analyze", "fixed-points", "--checkpoint", "run", "--steps", "100", "--burn-in", "0",
                  "--ics", "32", "-q"], root)
    monkeypatch.undo()
    assert res.exit_code == 0, res.output
    found = xr.load_dataset(root / "run" / "fixed-points.nc").points.values
    want = torch_fixed_points(gru)
    assert len(want) >= 2, "the test network should have several fixed points"
    for p in want:
        assert np.min(np.linalg.norm(found - p, axis=1)) < 1e-6, (p, found)


def test_lyapunov_of_an_imported_gru_runs_without_torch(gru_run, monkeypatch):
    root, _ = gru_run
    monkeypatch.setitem(sys.modules, "torch", None)
    res = invoke(["analyze", "lyapunov", "--checkpoint", "run", "--steps", "20", "--k", "2", "--burn-in", "5",
                  "--realisations", "2", "--ics", "1", "-q"], root)
    assert res.exit_code == 0, res.output
    ds = xr.load_dataset(root / "run" / "lyapunov.nc")
    assert ds.attrs["checkpoint"] == "run" and np.isfinite(ds["exponents"].values).all()


# -- bad files: one line, exit 2, nothing executed ---------------------------------------------


class Payload:
    """Unpickling this creates a file (``open(path, "w")``): code run by loading."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_a_pickle_that_would_run_code_is_refused_and_its_code_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    pickle.loads(pickle.dumps(Payload(tmp_path / "control")))  # the payload does create its file
    assert (tmp_path / "control").exists()
    gru = torch.nn.GRU(D, H)
    path = tmp_path / "evil.pt"
    torch.save({**gru.state_dict(), "x": Payload(marker)}, path)
    res = invoke(["import", str(path), "--format", "torch-gru", "--out", "run"], tmp_path)
    one_line_error(res, "evil.pt", "needs code")
    assert not marker.exists() and not (tmp_path / "run").exists()


class System:
    """A payload whose loading calls ``os.system`` (the blocked global is ``posix.system`` on Linux)."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@pytest.mark.parametrize("payload, blocked", [
    (lambda marker: System(f"touch {marker}"), f"{os.system.__module__}.{os.system.__name__}"),
    (lambda marker: torch.nn.Linear(2, 2), "torch.nn.modules.linear.Linear"),  # a whole module, not its state dict
], ids=["os.system", "nn.Module"])
def test_a_refused_pickle_names_what_it_would_call_and_never_advises_unsafe_loading(payload, blocked, tmp_path):
    """Issue 48: torch's message advises re-running with weights_only=False (or allow-listing the
    global); dynlab relays neither, names the global the file would call, and says why it refuses."""
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({**gru_state(), "x": payload(marker)}, path)
    err = one_line_error(invoke(["import", str(path), "--format", "torch-gru", "--out", "run"], tmp_path),
                         "evil.pt", f"would call {blocked}", "arrays only", "runs no code")
    for advice in ("weights_only", "False", "safe_globals", "trusted"):
        assert advice not in err
    assert not marker.exists() and not (tmp_path / "run").exists()


def _not_blocking(seconds=20):
    """Fail (SIGALRM) instead of hanging, should anything open a FIFO for reading."""
    import signal

    def hung(signum, frame):
        raise AssertionError("the import blocked on a FIFO")

    signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
@pytest.mark.parametrize("which", ["weights", "options"])
def test_a_path_that_is_not_a_regular_file_says_so_and_never_blocks(kind, which, tmp_path):
    """Issue 48: a FIFO or a link to /dev/zero said "no weights file" for a path that exists (and a
    read would block or never end); each is one line naming what it is, checked before opening."""
    import signal

    odd = tmp_path / ("odd.json" if which == "options" else "odd.pt")
    if kind == "fifo":
        os.mkfifo(odd)
    elif kind == "dev-zero":
        odd.symlink_to("/dev/zero")
    else:
        odd.mkdir()
    weights = odd if which == "weights" else save(tmp_path, gru_state())
    extra = ["--options-file", str(odd)] if which == "options" else []
    _not_blocking()
    try:
        result = invoke(["import", str(weights), "--format", "torch-gru", *extra, "--out", "run"], tmp_path)
    finally:
        signal.alarm(0)
    if kind == "directory" and which == "weights":  # click's own check of FILE
        one_line_error(result, "is a directory", prefix="error: Invalid value for 'FILE'")
    else:
        expected = {"fifo": ["named pipe (FIFO)"], "dev-zero": ["character device", "'/dev/zero'"],
                    "directory": ["is a directory"]}[kind]
        err = one_line_error(result, "odd.", "not a regular file", *expected)
        assert "no weights file" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("text, fragments", [
    ('{"nonlinearity": NaN}', ["NaN is not a number an option may take"]),
    ('{"num_layers": 1, "num_layers": 2}', ["'num_layers' is given twice"]),
    ('[1, 2]', ["holds a JSON list", "an object of the format's options"]),
    ('{"num_layers": ' + "[" * 100_000 + "]" * 100_000 + "}", ["nested too deeply"]),
    ('{"hidden": 4', ["is not valid JSON"]),
    ('{"hidden": 4}', ["unknown config key import --format torch-gru.hidden", "valid keys: ", "prefix"]),
    ('{"num_layers": 1' + " " * (1 << 20) + "}", ["larger than 1 MiB"]),
], ids=["nan", "duplicate", "list", "nested", "truncated", "unknown-key", "too-large"])
def test_a_bad_options_file_is_one_line_before_the_weights_are_read(text, fragments, tmp_path):
    options = tmp_path / "model_config.json"
    options.write_text(text)
    result = invoke(["import", "missing.pt", "--format", "torch-gru", "--options-file", str(options)], tmp_path)
    one_line_error(result, *fragments)
    if "unknown config key" not in fragments[0]:  # the file's own faults name the file
        assert "model_config.json" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_an_options_file_gives_the_formats_options_and_the_command_line_overrides_them(tmp_path):
    """JSON (null: the option's None) and TOML; --nonlinearity given on the line wins over the file."""
    from dynlab import experiment
    from dynlab.imports.options import read_options

    path = save(tmp_path, torch.nn.RNN(D, H, nonlinearity="relu").state_dict())
    (tmp_path / "o.json").write_text('{"nonlinearity": "tanh", "readout_prefix": null}')
    res = invoke(["import", str(path), "--format", "torch-rnn", "--options-file", "o.json", "--nonlinearity", "relu",
                  "--out", "run"], tmp_path)
    assert res.exit_code == 0, (res.output, res.stderr)
    assert experiment.load_run(tmp_path / "run").config["model"]["activation"] == "relu"
    (tmp_path / "o.toml").write_text('nonlinearity = "relu"\nnum_layers = 1\n')
    assert read_options(tmp_path / "o.toml") == {"nonlinearity": "relu", "num_layers": 1}


def gru_state(layers=1):
    torch.manual_seed(0)
    return torch.nn.GRU(D, H, num_layers=layers).state_dict()


@pytest.mark.parametrize("case, state_dict, fmt, fragments", [
    ("missing", lambda: {k: v for k, v in gru_state().items() if k != "bias_hh_l0"}, "torch-gru",
     ("missing key 'bias_hh_l0'", "[15]")),
    ("extra", lambda: {**gru_state(), "scale": torch.ones(3)}, "torch-gru", ("extra key", "scale [3]")),
    ("shape", lambda: {**gru_state(2), "weight_ih_l1": torch.zeros(15, 4)}, "torch-gru",
     ("'weight_ih_l1' has shape [15, 4], expected [15, 5]",)),
    ("architecture", lambda: torch.nn.Conv1d(3, 4, 2).state_dict(), "torch-gru",
     ("no torch.nn.GRU", "weight_ih_l0")),
    ("gru-as-lstm", gru_state, "torch-lstm", ("torch.nn.GRU's", "not a torch.nn.LSTM's", "--format torch-gru")),
    ("lstm-as-rnn", lambda: torch.nn.LSTM(D, H).state_dict(), "torch-rnn", ("torch.nn.LSTM's", "--format torch-lstm")),
    ("bidirectional", lambda: torch.nn.GRU(D, H, bidirectional=True).state_dict(), "torch-gru", ("bidirectional",)),
    ("non-finite", lambda: {**gru_state(), "bias_ih_l0": torch.full((15,), float("nan"))}, "torch-gru", ("NaN",)),
])
def test_bad_state_dicts_are_one_line(case, state_dict, fmt, fragments, tmp_path):
    path = save(tmp_path, state_dict())
    extra = ["--nonlinearity", "tanh"] if fmt == "torch-rnn" else []
    res = invoke(["import", str(path), "--format", fmt, *extra, "--out", "run"], tmp_path)
    one_line_error(res, *fragments)
    assert not (tmp_path / "run").exists()  # a refused import leaves no directory


def test_torch_rnn_must_be_told_its_nonlinearity(tmp_path):
    path = save(tmp_path, torch.nn.RNN(D, H).state_dict())
    one_line_error(invoke(["import", str(path), "--format", "torch-rnn"], tmp_path), "nonlinearity", "'tanh' or 'relu'")


def test_without_torch_a_pt_file_names_the_extra_and_safetensors_still_reads(tmp_path, monkeypatch):
    state = gru_state()
    pt, st = save(tmp_path, state), save(tmp_path, state, "w.safetensors")
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails, as when it is not installed
    one_line_error(invoke(["import", str(pt), "--format", "torch-gru"], tmp_path), "dynlab[torch]", "safetensors")
    from dynlab.imports.weights import read_weights

    assert read_weights(st).keys() == state.keys()


def test_an_existing_run_directory_is_never_replaced(tmp_path):
    path = save(tmp_path, gru_state())
    assert invoke(["import", str(path), "--format", "torch-gru", "--out", "run", "-q"], tmp_path).exit_code == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()}
    one_line_error(invoke(["import", str(path), "--format", "torch-gru", "--out", "run"], tmp_path), "--out", "run")
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()} == before


@pytest.mark.parametrize("name", ["e_3.pth.tar", "E_3.PT.TAR"])
def test_a_checkpoint_named_pth_tar_is_read_as_a_torch_file(name, tmp_path):
    """NonlinMod saves its checkpoints as ``e_N.pth.tar`` (a torch.save file, not a tar archive):
    read as a PyTorch file, its state dict flattened under ``state_dict.``; a bare ``.tar`` is not."""
    from dynlab.imports.weights import read_weights

    state = gru_state()
    path = save(tmp_path, {"state_dict": state, "epoch": 3}, name)
    weights = read_weights(path)
    assert weights.keys() == {f"state_dict.{k}" for k in state}
    for k, v in state.items():
        np.testing.assert_array_equal(weights[f"state_dict.{k}"], v.numpy())
    bare = save(tmp_path, state, "w.tar")
    with pytest.raises(DataError, match=r"unknown weights format '\.tar'.*\.pth\.tar"):
        read_weights(bare)


def test_unknown_suffix_and_missing_file(tmp_path):
    (tmp_path / "w.npz").write_bytes(b"")
    with pytest.raises(DataError, match="valid: .safetensors"):
        imported_model(tmp_path / "w.npz", "torch-gru")
    one_line_error(invoke(["import", "nothing.pt", "--format", "torch-gru"], tmp_path), "no weights file")
    assert not os.path.exists(tmp_path / "runs")


def test_the_task_it_was_trained_on_must_have_its_widths(tmp_path):
    """``--task adding`` (2 inputs, 1 output) fits a GRU on 2 inputs with a 1-wide read-out; a
    task of other widths is one line, and no directory is left."""
    torch.manual_seed(0)
    net = torch.nn.ModuleDict({"rnn": torch.nn.GRU(2, H), "head": torch.nn.Linear(H, 1)})
    path = save(tmp_path, net.state_dict())
    res = invoke(["import", str(path), "--format", "torch-gru", "--task", "adding", "--set", "task.length=9",
                  "--out", "run", "-q"], tmp_path)
    assert res.exit_code == 0, res.output
    from dynlab import experiment

    exp = experiment.load_run(tmp_path / "run")
    assert exp.config["task"]["name"] == "adding" and exp.task.length == 9
    one_line_error(invoke(["import", str(path), "--format", "torch-gru", "--task", "recall", "--out", "other"], tmp_path),
                   "task 'recall' has input_size 5 and output_size 4", "2 inputs and has 1 outputs")
    assert not (tmp_path / "other").exists()
