"""The papers' published PyTorch models imported into dynlab (#36): the ELM neuron / Branch-ELM
(AaronSpieler/elmneuron), NonlinMod's ARUN and RNN+γ (vgeadah/NonlinMod) and SITHCon
(compmem/SITHCon).

The truth is a forward pass written here in NumPy (float64) from the authors' published code,
line by line, on state dicts with random weights in the authors' key layout, and on the one published trained
file kept in the data directory (the ELM authors' Branch-ELM ``models/num_memory_10``, read by
torch itself; skipped when ``DYNLAB_DATA`` is unset). Imported models must equal it to 1e-10 in
float64. Parameter counts are computed from the code's layer shapes, independently of dynlab,
and for the published file are its authors' ``model_stats.json``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import jax
import numpy as np
import pytest
from scipy.linalg import expm
from scipy.special import expit

import dynlab
from dynlab.errors import ConfigError, DataError
from dynlab.imports.aru import arun, rnn_gamma
from dynlab.imports.elm import elm_neuron
from dynlab.imports.sithcon import sithcon

TOL = 1e-10


def trajectory64(model, xs):
    """``model.trajectory(xs)`` with every floating-point array of the model in float64 (call
    inside ``jax.enable_x64``): outputs ``[T, O]`` and each layer's states. Compiled as one program,
    as the analyses run it (op by op costs more CPU)."""
    import equinox as eqx
    import jax.numpy as jnp

    model = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, model)
    return eqx.filter_jit(lambda m, xs: m.trajectory(xs))(model, jnp.asarray(xs, jnp.float64))


def _trainable(model) -> int:
    import equinox as eqx

    return sum(int(a.size) for a in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array)))


def _sigmoid(x):
    return expit(x)


# ---------------------------------------------------------------- ELM neuron (src/expressive_leaky_memory_neuron*.py)

def interlocking(n):
    """``create_interlocking_indices`` (src/modeling_utils.py)."""
    return (np.arange(n) % 2) * (n // 2) + np.arange(n) // 2


def overlapping(n, windows, per_window):
    """``create_overlapping_window_indices``: (indices, valid mask)."""
    stride = math.ceil(n / windows)
    idx = np.arange(windows)[:, None] * stride + np.arange(per_window)[None, :]
    valid = idx < n
    return np.minimum(idx, n - 1).ravel(), valid.ravel()


def elm_state_dict(rng, *, version, num_input, num_output, num_memory, mlp_num_layers, routing=None, num_branch=None,
                   per_branch=1, tau_min=1.0, tau_max=1000.0, learn_tau=False, tau_syn=5.0):
    """Random weights in the layout of the code's ``ELM.state_dict()``."""
    n_branch = num_input if num_branch is None else num_branch
    n_syn = n_branch * per_branch
    hidden = 2 * num_memory
    sizes = [n_branch + num_memory] + [hidden] * mlp_num_layers + [num_memory]
    sd = {}
    for i, (fi, fo) in enumerate(zip(sizes[:-1], sizes[1:])):
        sd[f"mlp.network.{2 * i}.weight"] = rng.uniform(-1, 1, (fo, fi)) / math.sqrt(fi)
        sd[f"mlp.network.{2 * i}.bias"] = rng.uniform(-1, 1, fo) / math.sqrt(fi)
    sd["_proto_w_s"] = rng.uniform(-0.2, 1.0, n_syn)  # some negative: the ReLU matters
    sd["w_y.weight"] = rng.normal(size=(num_output, num_memory))
    sd["w_y.bias"] = rng.normal(size=num_output)
    if version == 1:
        sd["tau_s"] = np.full(n_syn, tau_syn)
    else:
        sd["tau_b"] = np.full(n_branch, tau_syn)
    lo, hi = tau_min, max(tau_max, tau_min + 3e-6)
    tau = np.clip(np.logspace(np.log10(lo + 1e-6), np.log10(hi - 1e-6), num_memory), lo + 1e-6, hi - 1e-6)
    proto = np.log((tau - lo) / (hi - tau))
    sd["_proto_tau_m"] = proto + (rng.normal(scale=0.5, size=num_memory) if learn_tau else 0.0)
    if routing == "neuronio_routing":
        idx, valid = overlapping(num_input, n_branch, per_branch)
        # the mask is bool, as the code's (index < num_input)
        sd["input_to_synapse_indices"], sd["valid_indices_mask"] = interlocking(num_input)[idx], valid
    elif routing == "random_routing":
        sd["input_to_synapse_indices"] = rng.integers(0, num_input, n_syn)
        sd["valid_indices_mask"] = np.ones(n_syn, np.int64)
    else:
        sd["input_to_synapse_indices"] = np.zeros(0, np.int64)
        sd["valid_indices_mask"] = np.zeros(0, np.int64)
    return sd


def elm_reference(sd, X, *, version, num_branch, lam=5.0, tau_min=1.0, tau_max=1000.0, activation="relu", dt=1.0):
    """The code's ``ELM.forward`` (v1: per-synapse trace, lambda (1 - kappa_m); v2: per-branch trace,
    1 - kappa_lambda) in NumPy: outputs ``[T, O]`` and memories ``[T, d_m]``."""
    if sd["input_to_synapse_indices"].size:
        X = X[:, sd["input_to_synapse_indices"]] * sd["valid_indices_mask"]
    w_s = np.maximum(sd["_proto_w_s"], 0)
    hi = max(tau_max, tau_min + 3e-6)
    tau_m = (hi - tau_min) * _sigmoid(sd["_proto_tau_m"]) + tau_min
    kappa_m = np.exp(-dt / np.maximum(tau_m, 1e-6))
    kappa_lam = np.exp(-dt * lam / np.maximum(tau_m, 1e-6))
    tau_syn = sd["tau_s"] if version == 1 else sd["tau_b"]
    kappa_syn = np.exp(-dt / np.maximum(tau_syn, 1e-6))
    act = {"relu": lambda x: np.maximum(x, 0), "silu": lambda x: x * _sigmoid(x)}[activation]
    n_lin = len([k for k in sd if k.startswith("mlp.network.") and k.endswith(".weight")])
    s = np.zeros(len(tau_syn))
    m = np.zeros(len(tau_m))
    ys, ms = [], []
    for x in X:
        if version == 1:
            s = kappa_syn * s + w_s * x
            syn = s.reshape(num_branch, -1).sum(-1)
        else:
            s = kappa_syn * s + (w_s * x).reshape(num_branch, -1).sum(-1)
            syn = s
        z = np.concatenate([syn, kappa_m * m])
        for i in range(n_lin):
            z = sd[f"mlp.network.{2 * i}.weight"] @ z + sd[f"mlp.network.{2 * i}.bias"]
            if i < n_lin - 1:
                z = act(z)
        delta = np.tanh(z * 2 / 3) * 1.7159
        m = kappa_m * m + (lam * (1 - kappa_m) if version == 1 else 1 - kappa_lam) * delta
        ys.append(sd["w_y.weight"] @ m + sd["w_y.bias"])
        ms.append(m)
    return np.array(ys), np.array(ms)


def elm_code_count(sd, learn_tau) -> int:
    """``sum(p.numel() for p in ELM.parameters() if p.requires_grad)`` from the layer shapes."""
    count = sum(v.size for k, v in sd.items() if k.startswith(("mlp.", "w_y.")) or k == "_proto_w_s")
    return count + (sd["_proto_tau_m"].size if learn_tau else 0)


ELM_CASES = [
    # (state-dict settings, import options: the code's model_config keys)
    (dict(version=1, num_input=6, num_output=2, num_memory=4, mlp_num_layers=1),
     dict(num_output=2, num_memory=4)),
    (dict(version=1, num_input=10, num_output=2, num_memory=3, mlp_num_layers=2, routing="neuronio_routing",
          num_branch=3, per_branch=4, tau_min=1.0, tau_max=150.0, learn_tau=True),
     dict(num_input=10, mlp_activation="silu", num_branch=3, num_synapse_per_branch=4,
          input_to_synapse_routing="neuronio_routing", memory_tau_min=1.0, memory_tau_max=150.0, learn_memory_tau=True)),
    (dict(version=1, num_input=7, num_output=1, num_memory=5, mlp_num_layers=0, routing="random_routing",
          num_branch=2, per_branch=3, tau_syn=0.0),
     dict(num_input=7, num_synapse_per_branch=3, input_to_synapse_routing="random_routing")),
    (dict(version=2, num_input=8, num_output=2, num_memory=4, mlp_num_layers=1, routing="neuronio_routing",
          num_branch=2, per_branch=5, tau_min=2.0, tau_max=50.0),
     dict(num_input=8, mlp_activation="silu", num_synapse_per_branch=5, input_to_synapse_routing="neuronio_routing",
          memory_tau_min=2.0, memory_tau_max=50.0)),
]


@pytest.mark.parametrize("case", range(len(ELM_CASES)))
def test_imported_elm_equals_the_authors_forward_pass(case):
    """v1 and v2, vanilla and Branch-ELM (neuronio, random routing), ReLU and SiLU MLPs of 0–2
    hidden layers, fixed and learned tau_m: outputs and memories equal the code's to 1e-10, and the
    trainable parameters are the code's."""
    settings, options = ELM_CASES[case]
    rng = np.random.default_rng(case)
    sd = elm_state_dict(rng, **settings)
    X = rng.uniform(0, 1.5, (25, settings["num_input"])) * (rng.uniform(size=(25, settings["num_input"])) < 0.4)
    with jax.enable_x64(True):
        config, model = elm_neuron(sd, **options)
        ys, states = trajectory64(model, X)
    ref_y, ref_m = elm_reference(sd, X, version=settings["version"], num_branch=settings.get("num_branch") or settings["num_input"],
                                 tau_min=settings.get("tau_min", 1.0), tau_max=settings.get("tau_max", 1000.0),
                                 activation=options.get("mlp_activation", "relu"))
    np.testing.assert_allclose(np.asarray(ys), ref_y, rtol=0, atol=TOL * max(1.0, np.abs(ref_y).max()))
    np.testing.assert_allclose(np.asarray(states[0].h), ref_m, rtol=0, atol=TOL)
    assert _trainable(model) == elm_code_count(sd, settings.get("learn_tau", False))
    assert config["model"]["unit"] == "elm" and config["task"]["output_size"] == settings["num_output"]


def test_elm_builds_the_best_neuronio_model_with_the_published_parameter_count():
    """models/best_elm_neuron/model_config.json (num_memory 100, 45 x 100 synapses, SiLU MLP,
    tau_m fixed in [1, 150]) with the code's conventions: 54,002 parameters, the count published
    in its model_stats.json."""
    model = dynlab.build("model", unit="elm", input_size=1278, output_size=2, key=jax.random.key(0), d_m=100,
                         d_tree=45, d_branch=100, routing="neuronio", learn_tau=False, tau_min=1.0, tau_max=150.0,
                         tau_inset=1e-6, mlp_activation="silu", activation="scaled-tanh")
    assert _trainable(model) == 54002
    # and the same count from the code's layer shapes: MLP 145 -> 200 -> 100, w_s 4500, w_y 100 -> 2
    assert _trainable(model) == (145 * 200 + 200) + (200 * 100 + 100) + 45 * 100 + (100 * 2 + 2)


def test_elm_import_refuses_what_it_cannot_build():
    rng = np.random.default_rng(0)
    sd = elm_state_dict(rng, version=1, num_input=6, num_output=2, num_memory=4, mlp_num_layers=1)
    with pytest.raises(DataError, match="tau_s"):
        elm_neuron({**sd, "tau_s": np.arange(6.0) + 1})
    with pytest.raises(DataError, match="extra|cannot build"):
        elm_neuron({**sd, "mlp.network.9.weight": np.zeros((2, 2))})
    with pytest.raises(DataError, match="grid"):
        elm_neuron(sd, memory_tau_max=100.0)  # a fixed tau_m that is not the code's grid on [1, 100]
    with pytest.raises(DataError, match="has shape"):
        elm_neuron({**sd, "w_y.bias": np.zeros(3)})
    with pytest.raises(ConfigError, match="mlp_activation"):
        elm_neuron(sd, mlp_activation="gelu")
    routed = elm_state_dict(rng, version=1, num_input=10, num_output=2, num_memory=3, mlp_num_layers=1,
                            routing="neuronio_routing", num_branch=3, per_branch=4)
    options = dict(num_input=10, num_synapse_per_branch=4, input_to_synapse_routing="neuronio_routing")
    assert routed["valid_indices_mask"].dtype == bool and not routed["valid_indices_mask"].all()
    elm_neuron(routed, **options)  # the code's bool mask is taken
    elm_neuron({**routed, "valid_indices_mask": routed["valid_indices_mask"].astype(np.int64)}, **options)  # and 0/1
    with pytest.raises(DataError, match="must be 0 or 1"):  # a 2 would scale an input, not mask it
        elm_neuron({**routed, "valid_indices_mask": routed["valid_indices_mask"] * 2}, **options)
    with pytest.raises(DataError, match="a mask .bool, or integers 0 and 1. was expected"):
        elm_neuron({**routed, "valid_indices_mask": routed["valid_indices_mask"].astype(np.float32)}, **options)
    with pytest.raises(DataError, match="routes inputs to 12 synapses.*--options-file"):
        elm_neuron(routed)  # the routing options missing: the file's model_config.json has them
    with pytest.raises(DataError, match=r"num_input must lie in \[1, 3 \* 4 = 12\], got 10000000000"):
        elm_neuron(routed, **{**options, "num_input": 10**10})  # refused before a routing of 10^10 entries is built


PUBLISHED_ELM = Path(os.environ.get("DYNLAB_DATA", ".")) / "published" / "elmneuron" / "num_memory_10"


@pytest.mark.skipif(not os.environ.get("DYNLAB_DATA"), reason="DYNLAB_DATA is not set (CI sets it to ../shared/data)")
def test_the_authors_published_neuronio_model_imports_and_computes_their_neuron(tmp_path):
    """The ELM authors' published Branch-ELM (NeuronIO, d_m = 10, 45 x 100 synapses), as they
    published it: saved from cuda:0 tensors, its valid_indices_mask stored as bool (which was
    refused), its constructor arguments in model_config.json. ``dynlab import --options-file``
    takes it; the model has model_stats.json's 5,852 parameters, and computes Eq. 1 of the paper
    (the reference above, with the code's routing, scaled tanh and lambda (1 - kappa_m) update)
    on the file as torch itself reads it: to 1e-10 in float64, and to float32 rounding as loaded."""
    torch = pytest.importorskip("torch")
    from cli_runner import invoke
    from dynlab import experiment

    import zipfile

    weights, config = PUBLISHED_ELM / "neuronio_best_model_state.pt", PUBLISHED_ELM / "model_config.json"
    with zipfile.ZipFile(weights) as archive:  # torch's zip format: its pickle names each storage's device
        assert b"cuda:0" in archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))
    result = invoke(["import", str(weights), "--format", "elm-neuron", "--options-file", str(config), "--out", "run"],
                    tmp_path)
    assert result.exit_code == 0, (result.output, result.stderr)
    stats = json.loads((PUBLISHED_ELM / "model_stats.json").read_text())
    model = experiment.load_run(tmp_path / "run").model
    assert model.param_count()["total"] == _trainable(model) == stats["model_param_count"] == 5852
    assert f"{stats['model_param_count']:,} parameters" in result.output

    sd = {k: v.numpy() for k, v in torch.load(weights, weights_only=True, map_location="cpu").items()}
    assert sd["valid_indices_mask"].dtype == bool and not sd["valid_indices_mask"].all()  # the published case
    sd = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in sd.items()}
    cfg = json.loads(config.read_text())
    rng = np.random.default_rng(0)
    n_in = cfg["num_input"]
    X = (rng.uniform(size=(80, n_in)) < 0.05).astype(np.float64)  # sparse spikes, as NeuronIO's inputs
    X[::2, n_in - 1] = 1.0  # the input that the masked slots' clamped index points at: the mask matters
    ref = {"version": 1, "num_branch": cfg["num_branch"], "tau_min": cfg["memory_tau_min"],
           "tau_max": cfg["memory_tau_max"]}
    want, _ = elm_reference(sd, X, **ref)
    unmasked, _ = elm_reference({**sd, "valid_indices_mask": np.ones_like(sd["valid_indices_mask"])}, X, **ref)
    scale = np.abs(want).max()
    assert np.abs(unmasked - want).max() > 1e-3 * scale  # reading the masked slots would be seen
    # tau_m is fixed (learn_memory_tau false): the code's log grid, which the file holds as its
    # inverse sigmoid rounded to float32 and dynlab keeps as the grid itself. In float64 the
    # reference takes the code's grid before that rounding (its constructor's own arithmetic)
    lo, hi = cfg["memory_tau_min"], cfg["memory_tau_max"]
    grid = np.logspace(np.log10(lo + 1e-6), np.log10(hi - 1e-6), cfg["num_memory"])
    proto = np.log((grid - lo) / (hi - grid))
    stored = lo + (hi - lo) * expit(sd["_proto_tau_m"])
    np.testing.assert_allclose(stored, grid, rtol=3e-7)  # the file's tau_m: the grid, to float32 rounding
    exact, _ = elm_reference({**sd, "_proto_tau_m": proto}, X, **ref)
    with jax.enable_x64(True):
        ys64, _ = trajectory64(model, X)
    np.testing.assert_allclose(np.asarray(ys64), exact, rtol=0, atol=TOL * max(1.0, scale))
    # float32, as every analysis runs it, against the file's own parameters: float32 rounding
    # (eps 1.2e-7) of 80 steps of sums over 4,500 synapses and of the MLP; measured 1.1e-6 of
    # the output's scale (about 9 eps); 1e-5 leaves room for another BLAS's order of summation
    got = np.asarray(model(jax.numpy.asarray(X, jax.numpy.float32)))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * scale)


# ---------------------------------------------------------------- ARUN and RNN+gamma (NetworkCreation/*.py)

def batch_softplus(x, beta, threshold=20.0):
    """``gamma_function.batch_softplus``: log(1 + exp(beta x)) / beta, linear above beta x > threshold."""
    with np.errstate(over="ignore"):
        val = np.log(1 + np.exp(beta * x)) / beta
    return np.where(beta * x > threshold, np.sign(beta) * x, val)


def gamma_code(x, n, s):
    """``Gamma2.forward`` (``Gamma.forward``'s F.softplus(beta=n) is the same, threshold 20)."""
    return (1 - s) * batch_softplus(x, n) + s * _sigmoid(n * x)


def arun_state_dict(rng, d_in, hidden, n_g, classes):
    sd = {}
    for name, (o, i) in {"Uxh": (hidden, d_in), "Whh": (hidden, hidden), "Uag": (n_g, 1), "Wgg": (n_g, n_g),
                         "Wgn": (1, n_g), "Wgs": (1, n_g)}.items():
        sd[f"rnn.{name}.weight"] = rng.normal(scale=(0.9 if name == "Whh" else 2.0) / math.sqrt(i), size=(o, i))
        sd[f"rnn.{name}.bias"] = rng.normal(scale=0.3, size=o)
    # the controller's state follows sign(a) * sign(W_gn): the gain n = 2 +- 1.9 |g| swings from
    # about 0.1 (a < 0) to 3.9 (a > 0), below dynlab's default floor and past the softplus threshold
    w_gn = rng.uniform(0.5, 1, (1, n_g)) * rng.choice([-1, 1], (1, n_g))
    sd["rnn.Wgn.weight"] = 1.9 * w_gn / np.abs(w_gn).sum()
    sd["rnn.Wgn.bias"] = np.array([2.0])
    sd["rnn.Uag.weight"] = 3.0 * np.sign(w_gn.T)
    sd["rnn.Wgg.weight"] *= 0.1
    sd["rnn.Wgs.bias"] = np.array([0.3])
    sd["lin.weight"], sd["lin.bias"] = rng.normal(size=(classes, hidden)), rng.normal(size=classes)
    return sd


def arun_reference(sd, X):
    """``ARUN.forward`` over a sequence (state g zeros at the start, as ``init_states``)."""
    p = {k[4:]: v for k, v in sd.items() if k.startswith("rnn.")}
    lin = lambda name, z: p[f"{name}.weight"] @ z + p[f"{name}.bias"]  # noqa: E731
    h = np.zeros(p["Whh.weight"].shape[0])
    g = np.zeros((h.size, p["Wgg.weight"].shape[0]))
    hs, ys, gains = [], [], []
    for x in X:
        a = lin("Uxh", x) + lin("Whh", h)
        g = np.tanh(a[:, None] * p["Uag.weight"][:, 0] + p["Uag.bias"] + g @ p["Wgg.weight"].T + p["Wgg.bias"])
        n = g @ p["Wgn.weight"][0] + p["Wgn.bias"][0]
        s = g @ p["Wgs.weight"][0] + p["Wgs.bias"][0]
        h = gamma_code(a, n, s)
        hs.append(h)
        gains.append(n * a)
        ys.append(sd["lin.weight"] @ h + sd["lin.bias"])
    return np.array(ys), np.array(hs), np.array(gains)


def test_imported_arun_equals_the_authors_forward_pass():
    """ARUN with the code's conventions (no gain floor, softplus linear above 20, shared gain
    bias): outputs and hidden states to 1e-10; some gains fall below dynlab's default floor 0.5
    and some n·a cross the threshold, so both conventions are exercised."""
    rng = np.random.default_rng(1)
    sd = arun_state_dict(rng, d_in=2, hidden=6, n_g=4, classes=3)
    X = rng.normal(scale=3.0, size=(30, 2))
    with jax.enable_x64(True):
        config, model = arun(sd)
        ys, states = trajectory64(model, X)
        n = np.asarray(model.cells[0].activation_params(states[0].g)[0])
    ref_y, ref_h, na = arun_reference(sd, X)
    np.testing.assert_allclose(np.asarray(states[0].h), ref_h, rtol=0, atol=TOL * max(1.0, np.abs(ref_h).max()))
    np.testing.assert_allclose(np.asarray(ys), ref_y, rtol=0, atol=TOL * max(1.0, np.abs(ref_y).max()))
    assert (n < 0.5).any() and (na > 20).any(), "the conventions were not exercised"
    # the code's count (its layer shapes): each Linear's bias is a parameter of its own
    assert _trainable(model) == sum(v.size for v in sd.values())


def test_imported_rnn_gamma_equals_the_authors_forward_pass():
    rng = np.random.default_rng(2)
    hidden, d_in = 5, 1
    sd = {"rnn.U.weight": rng.normal(size=(hidden, d_in)), "rnn.U.bias": rng.normal(size=hidden),
          "rnn.V.weight": rng.normal(scale=0.6, size=(hidden, hidden)), "rnn.V.bias": rng.normal(size=hidden),
          "rnn.n": np.array([5.7]), "rnn.s": np.array([0.2]), "lin.weight": rng.normal(size=(10, hidden)),
          "lin.bias": rng.normal(size=10)}
    X = rng.normal(scale=4.0, size=(30, d_in))
    h = np.zeros(hidden)
    ref = []
    for x in X:
        h = gamma_code(sd["rnn.U.weight"] @ x + sd["rnn.U.bias"] + sd["rnn.V.weight"] @ h + sd["rnn.V.bias"], 5.7, 0.2)
        ref.append(h)
    with jax.enable_x64(True):
        _, model = rnn_gamma(sd)
        ys, states = trajectory64(model, X)
        _, fixed = rnn_gamma({k: v for k, v in sd.items() if k not in ("rnn.n", "rnn.s")}, n=5.7, s=0.2)
        ys_fixed = trajectory64(fixed, X)[0]
    np.testing.assert_allclose(np.asarray(states[0]), np.array(ref), rtol=0, atol=TOL)
    np.testing.assert_allclose(np.asarray(ys_fixed), np.asarray(ys), rtol=0, atol=0)
    assert _trainable(model) == sum(v.size for v in sd.values())  # U.bias and V.bias kept apart
    with pytest.raises(ConfigError, match="give the n"):
        rnn_gamma({k: v for k, v in sd.items() if k not in ("rnn.n", "rnn.s")})


def test_arun_import_refuses_other_architectures():
    rng = np.random.default_rng(3)
    sd = arun_state_dict(rng, d_in=1, hidden=4, n_g=2, classes=2)
    with pytest.raises(DataError, match="ARUN"):
        arun({k.replace("Wgg", "W_gg"): v for k, v in sd.items()})
    with pytest.raises(DataError, match="cannot build"):
        arun({**sd, "rnn.extra.weight": np.zeros(2)})
    with pytest.raises(DataError, match="has shape"):
        arun({**sd, "rnn.Wgn.bias": np.zeros(2)})


# ---------------------------------------------------------------- SITHCon (SITHCon/isith.py, sithcon.py)

def isith_reference(inp, tau_min, tau_max, ntau, k, dt, buff_max):
    """``iSITH.forward`` on ``inp[features, T]`` -> ``[ntau, features, T]`` (filters, flip, conv2d
    with the code's padding and slicing, the dt k/(k+1) scale)."""
    c = (tau_max / tau_min) ** (1.0 / (ntau - 1)) - 1
    tau_star = tau_min * (1 + c) ** np.arange(ntau)
    times = np.arange(dt, buff_max + dt, dt)
    a = math.log(k) * k
    b = np.log(np.arange(2, k)).sum()
    A = ((1 / tau_star) * np.exp(a - b))[:, None]
    filters = A * np.exp(np.log(times[None] / tau_star[:, None]) * (k + 1) + k * (-times[None] / tau_star[:, None]))
    filters = filters[:, ::-1]
    T = inp.shape[-1]
    w = filters[:, -T:]  # the kernel conv2d slides: [ntau, L]
    L = w.shape[1]
    padded = np.concatenate([np.zeros((inp.shape[0], L)), inp, np.zeros((inp.shape[0], L))], axis=1)
    out = np.stack([[np.array([w[i] @ padded[f, j:j + L] for j in range(T + L + 1)]) for f in range(inp.shape[0])]
                    for i in range(ntau)])
    return out[:, :, 1:T + 1] * dt * k / (k + 1)


def sithcon_reference(sd, X, n_layers, **sith):
    """The stack of ``SITHCon_Layer`` s (act_func None, no batch norm, eval-mode dropout) and
    ``to_out``, on one sample ``X[T, F]``: outputs ``[T, O]`` and every layer's ``[T, C]``."""
    x = X.T
    outs = []
    for l in range(n_layers):
        v, g = sd[f"sithcon_layers.{l}.tctct.conv.weight_v"], sd[f"sithcon_layers.{l}.tctct.conv.weight_g"]
        w = g * v / np.sqrt((v ** 2).sum(axis=(1, 2, 3), keepdims=True))
        m = isith_reference(x, **sith)  # [tau, F, T]
        conv = np.einsum("cf,ift->cit", w[:, 0, :, 0], m)  # kernel width 1: one position per tau
        x = conv.max(axis=1)  # MaxPool1d over all ntau positions
        outs.append(x.T)
    return x.T @ sd["to_out.weight"].T + sd["to_out.bias"], outs


def test_imported_sithcon_equals_the_authors_forward_pass():
    """Two SITHCon layers (k = 4, 6 time cells in [1, 8] at dt = 0.5, i.e. [2, 16] steps) with a
    weight-normed width-1 convolution shared by both: every layer's output equals the code's to
    1e-10 (40 steps, below buff_max / dt = 48, where the code truncates its filters)."""
    rng = np.random.default_rng(4)
    F, n_layers = 3, 2
    v, g = rng.normal(size=(F, 1, F, 1)), rng.uniform(0.5, 2.0, (F, 1, 1, 1))
    sd = {f"sithcon_layers.{l}.tctct.conv.{name}": a for l in range(n_layers) for name, a in (("weight_v", v), ("weight_g", g))}
    sd |= {"to_out.weight": rng.normal(size=(2, F)), "to_out.bias": rng.normal(size=2)}
    X = (rng.uniform(size=(40, F)) < 0.2) * rng.uniform(0.5, 1.0, (40, F))
    sith = dict(tau_min=1.0, tau_max=8.0, ntau=6, k=4, dt=0.5)
    ref_y, ref_layers = sithcon_reference(sd, X, n_layers, buff_max=24.0, **sith)
    with jax.enable_x64(True):
        config, model = sithcon(sd, **sith)
        ys = trajectory64(model, X)[0]
        layers = model.cells[0].scan_layers(jax.numpy.asarray(X))
    assert config["model"]["filter_order"] == 5 and config["model"]["lag_offset"] == 1
    for l in range(n_layers):
        np.testing.assert_allclose(np.asarray(layers[l]), ref_layers[l], rtol=0, atol=TOL)
    np.testing.assert_allclose(np.asarray(ys), ref_y, rtol=0, atol=TOL * np.abs(ref_y).max())
    # the code's trainable count: weight_v and weight_g per layer, shared in dynlab (Sarkar & Howard)
    assert _trainable(model) == F * F + 2 * F + 2


def test_sithcon_import_refuses_what_dynlab_cannot_build():
    rng = np.random.default_rng(5)
    w = rng.normal(size=(3, 1, 3, 1))
    sd = {"sithcon_layers.0.tctct.conv.weight": w, "sithcon_layers.1.tctct.conv.weight": w}
    with pytest.raises(DataError, match="shares one convolution"):
        sithcon({**sd, "sithcon_layers.1.tctct.conv.weight": w + 1})
    with pytest.raises(DataError, match="kernel width"):
        sithcon({"sithcon_layers.0.tctct.conv.weight": rng.normal(size=(3, 1, 3, 5))})
    with pytest.raises(DataError, match="cannot build"):
        sithcon({**sd, "sithcon_layers.0.batch_norm.weight": np.ones(3)})
    with pytest.raises(DataError, match="transform_linears"):
        sithcon({**sd, "transform_linears.0.weight": np.ones((3, 3))})
    with pytest.raises(ConfigError, match="g ="):
        sithcon(sd, g=0.5)


# ---------------------------------------------------------------- the conventions as values

def test_sith_public_code_impulse_peaks_where_the_code_does():
    """At tau* = 81, k = 15 the code's filter (the reference iSITH above) peaks at step 85, the
    paper's Post filter at 81; dynlab's SITH reproduces each with its convention."""
    from dynlab.units.sith import SITH, public_code

    code = isith_reference(np.eye(1, 300), tau_min=1.0, tau_max=81.0, ntau=5, k=15, dt=1.0, buff_max=300.0)[-1, 0]
    conv = {k: v for k, v in public_code(15).items() if k != "hidden_input"}
    ours = SITH(1.0, 81.0, 5, 15, **conv).kernels(np.arange(300))[-1]
    paper = SITH(1.0, 81.0, 5, 15).kernels(np.arange(300))[-1]
    assert np.argmax(code) == 85 and np.argmax(ours) == 85 and np.argmax(paper) == 81
    np.testing.assert_allclose(ours, code, rtol=1e-12, atol=1e-15)


def test_aru_public_code_initialisation():
    """init="public-code": Henaff's block rotations (orthogonal, angles in (-pi, 0)) for W_hh and
    the controller's W_gg, Kaiming-normal inputs (std sqrt(2 / fan-in)), and one gain bias
    5 + 2 U(0, 1) shared by all neurons."""
    import jax.numpy as jnp

    cells = [dynlab.build("unit", "aru", input_size=40, key=jax.random.key(s), hidden=10, n_g=5, init="public-code")
             for s in range(2)]
    for cell in cells:
        for w in (cell.w_hh, cell.w_gg):
            np.testing.assert_allclose(w @ w.T, np.eye(w.shape[0]), atol=1e-6)
            pairs = 2 * (w.shape[0] // 2)
            c, s = jnp.diagonal(w)[:pairs:2], jnp.diagonal(w, 1)[::2]
            assert (s < 0).all() and (np.abs(np.asarray(w)) > 1e-7).sum() == 4 * (w.shape[0] // 2) + w.shape[0] % 2
            np.testing.assert_allclose(c**2 + s**2, 1, atol=1e-6)
            # the code's construction: expm of the skew-symmetric matrix of these angles (common.create_diag)
            theta = np.arctan2(np.asarray(s, np.float64), np.asarray(c, np.float64))
            diag = np.zeros(w.shape[0] - 1)
            diag[::2] = theta
            A = np.diag(diag, k=1)
            np.testing.assert_allclose(np.asarray(w), expm(A - A.T), atol=1e-6)
        assert np.ptp(np.asarray(cell.b_n)) == 0 and 5 <= float(cell.b_n[0]) < 7
    w_xh = np.concatenate([np.asarray(c.w_xh).ravel() for c in cells])
    assert abs(w_xh.std() / math.sqrt(2 / 40) - 1) < 0.1  # 800 draws: the std's standard error is 2.5%
    paper = dynlab.build("unit", "aru", input_size=4, key=jax.random.key(0), hidden=10, n_g=5)
    assert np.ptp(np.asarray(paper.b_n)) > 1  # the paper's prior: one gain per neuron from N(5, 2^2)


def test_split_biases_are_the_codes_parameters():
    """split_biases=True: the same function as one bias b_h = b_xh + b_hh (b_g = b_ag + b_gg), the
    same weights from the same key, each bias a parameter with its own gradient (equal to b_h's);
    init="public-code" draws RNN+gamma's pair as nn.Linear's default U(+-1/sqrt(fan-in)) and ARUN's
    four biases as zeros (ARUN.init_weights)."""
    import equinox as eqx
    import jax.numpy as jnp

    key, d_in, hidden = jax.random.key(3), 4, 64
    rnn = dynlab.build("unit", "rnn-gamma", input_size=d_in, key=key, hidden=hidden, init="public-code", split_biases=True)
    for b, fan_in in ((rnn.b_xh, d_in), (rnn.b_hh, hidden)):
        bound = fan_in**-0.5
        assert np.abs(b).max() <= bound and np.abs(b).max() > 0.8 * bound  # 64 draws: fails with p < 1e-6
    kw = dict(input_size=d_in, key=key, hidden=6, n_g=3, init="public-code", n_min=0.0)
    split, whole = (dynlab.build("unit", "aru", split_biases=b, **kw) for b in (True, False))
    assert all((np.asarray(getattr(split, n)) == 0).all() for n in ("b_xh", "b_hh", "b_ag", "b_gg"))
    assert split.b_h is None and split.b_g is None and np.array_equal(split.w_hh, whole.w_hh)
    assert _trainable(split) == _trainable(whole) + 6 + 3
    r = np.random.default_rng(0)
    parts = [jnp.asarray(r.normal(size=n)) for n in (6, 6, 3, 3)]
    split = eqx.tree_at(lambda c: (c.b_xh, c.b_hh, c.b_ag, c.b_gg), split, parts)
    whole = eqx.tree_at(lambda c: (c.b_h, c.b_g), whole, (parts[0] + parts[1], parts[2] + parts[3]))
    x = jnp.asarray(r.normal(size=d_in))

    def loss(cell):
        state = cell.init_state()
        for _ in range(3):
            state, h = cell(state, x)
        return jnp.sum(h**2)

    value, grad = jax.jit(loss), jax.jit(jax.grad(loss))  # one program each, as training runs them
    np.testing.assert_allclose(value(split), value(whole), rtol=1e-6)
    gs, gw = grad(split), grad(whole)
    for a, b, total in ((gs.b_xh, gs.b_hh, gw.b_h), (gs.b_ag, gs.b_gg, gw.b_g)):
        assert np.abs(np.asarray(total)).max() > 1e-3
        np.testing.assert_allclose(a, total, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(b, total, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- through `dynlab import`

def test_dynlab_import_of_an_authors_file(tmp_path):
    """A published-format ELM file (here as safetensors) becomes a run directory whose model is
    the format's; the same file read as ARUN is refused with one line and exit status 2, leaving
    no directory."""
    from safetensors.numpy import save_file

    from cli_runner import invoke
    from dynlab import experiment

    sd = elm_state_dict(np.random.default_rng(6), version=1, num_input=6, num_output=2, num_memory=3,
                        mlp_num_layers=1)
    path = tmp_path / "elm.safetensors"
    save_file({k: (v.astype(np.float32) if v.dtype.kind == "f" else v) for k, v in sd.items()}, str(path))
    result = invoke(["import", str(path), "--format", "elm-neuron", "--option", "num_memory=3", "--out", "run"], tmp_path)
    assert result.exit_code == 0, result.output
    model = experiment.load_run(tmp_path / "run").model
    _, expected = elm_neuron({k: (v.astype(np.float32) if v.dtype.kind == "f" else v) for k, v in sd.items()})
    for a, b in zip(jax.tree_util.tree_leaves(model), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    refused = invoke(["import", str(path), "--format", "arun", "--out", "wrong"], tmp_path)
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1 and "ARUN" in refused.stderr
    assert not (tmp_path / "wrong").exists()
