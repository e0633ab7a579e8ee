"""Training-step throughput of ``elm`` (Branch-ELM) and ``elm-net`` against plain PyTorch, one run.

A training step is forward + backward + Adam update of a whole model (unit + linear read-out, MSE
on every step), batch of random inputs:

* ``elm``: the NeuronIO Branch-ELM (1278 inputs, d_tree = 45, d_branch = 100, NeuronIO routing,
  d_m = 20, d_mlp = 40, 2 outputs), T = 500, batch 8;
* ``elm-net``: N = 256, d_m = 10 with the paper's scaling recipe (d_mlp = 2 d_m, d_tree = 2 d_mlp,
  d_branch = d_tree), 204 one-hot inputs (x3, Enwik8-like) and 204 outputs, read-out layer of 204
  neurons (d_m = 3), rho_rec = N / (N + 204), windows of T = 100, batch 8.

Comparator, same process: the same neurons written in plain PyTorch (CPU) as a PyTorch user
would, with the time loop in Python. Like the authors' PyTorch port it routes the whole sequence
to the synapses first and then loops over time, and it gathers each neuron's synapses with an
index, as the paper describes the wiring. It is timed with PyTorch's default intra-op threads and
with one thread, and the faster counts (on a busy machine the thread pool's contention can slow
the small per-step ops ~10x). The PyTorch models get the JAX models' initial
weights, and the first losses of both are printed side by side to show that they compute the
same thing. dynlab's step is one ``eqx.filter_jit`` call (``lax.scan`` over time, ``vmap`` over
the batch); its synaptic wiring is a matrix product with the effective weight matrix
(``ElmLayer.effective_weights``, ``ELMCell.branch_matrix``), so the ratio measures compilation
*and* that formulation; ``--with-gather`` also times dynlab's ``elm-net`` with ``wiring="gather"``
(the paper's formulation, same numbers) to separate the two.
Needs the ``bench`` extra (``pip install -e .[bench]``, torch 2.13.0).

Measured (2-core CPU, this script, ``--steps 5``, 2026-11-23): ``elm`` 17.6 ms/step vs PyTorch
220.9 ms/step, **12.5x** (before the sequence model computed the first layer's input projection
for all steps outside its time loop, ``Cell.project_input``: 42.5 ms/step, 5.4x); ``elm-net``
847 ms/step vs 3031 ms/step, **3.6x** (2.6x, then 3.2x at 1011 ms/step before the read-out
layer's branch sums moved out of the time loop, ``ElmNet.run_sequence``; an A/B of that change in
one session: 1015 -> 790 ms/step). The ``elm-net`` step is bound by its backward pass (~3-4x the
~170 ms forward). Not the cost, measured by interleaved A/B in one process: building the
effective weight matrix (no change with it precomputed), and the recurrent weights' gradient
accumulated in the reverse scan (``stop_gradient`` on them: 534-574 vs 518-613 ms/step). The
per-neuron MLPs are a large part: alone, in the same scan and batch, 25 ms forward and 165 ms
value-and-grad (their ``"...i,...io->...o"`` batched contractions are tiny GEMMs per neuron and
step; a broadcast-multiply-sum form is 3.5x slower). This machine is a shared VM: the same
step measured 520-950 ms across runs minutes apart, so only ratios from one run mean much.

Why ``elm-net`` stays far from 10x (``--steps 3 --dispatch``, idle machine, 2026-11-23: ``elm``
18.1 vs 221.8 ms/step, 12.3x; ``elm-net`` 904 vs 2963 ms/step, 3.3x): the same ``elm-net`` graph
at N = 8 (same ops per time step, same batch and T) takes PyTorch 77 ms/step against dynlab's
3.4 ms (23x). That is PyTorch's per-time-step dispatch cost, the part ``lax.scan`` removes, and
it is 2.6% of PyTorch's full-size step: at N = 256 PyTorch spends ~2.9 s in arithmetic
(index gathers, scatter-adds, einsums), so 10x would need dynlab's arithmetic ~10x faster than
PyTorch's on the same CPU. Batch 1 tells the same (measured separately: PyTorch 681 ms/step,
dynlab 197 ms/step, 3.5x).

Run: ``python benchmarks/elm.py`` (a few minutes on 2 cores); ``--steps N`` timed steps each
(after one warm-up / compilation step).
"""

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch

import dynlab

LR = 1e-3


# ---------------------------------------------------------------------------------------------
# dynlab


def jax_trainer(model):
    opt = optax.adam(LR)
    params, static = eqx.partition(model, eqx.is_inexact_array)

    @eqx.filter_jit
    def step(params, static, opt_state, x, y):  # static passed, not closed over: its index arrays stay traced
        def loss_fn(p):
            ys = jax.vmap(eqx.combine(p, static))(x)
            return jnp.mean(jnp.square(ys - y))

        loss, grads = eqx.filter_value_and_grad(loss_fn)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return eqx.apply_updates(params, updates), opt_state, loss

    state = [params, opt.init(params)]

    def run(x, y):
        state[0], state[1], loss = step(state[0], static, state[1], x, y)
        return float(loss)  # blocks until the step is done

    return run


# ---------------------------------------------------------------------------------------------
# plain PyTorch


def _t(a):
    return torch.tensor(np.asarray(a), dtype=torch.float32)


class TorchBranchELM(torch.nn.Module):
    """Branch-ELM (neuron paper Eq. 1), the authors' v2 layout: route, then loop over time."""

    def __init__(self, model):
        super().__init__()
        cell = model.cells[0]
        self.d_tree, self.d_branch, self.lam, self.dt, self.tau_s = cell.d_tree, cell.d_branch, cell.lam, cell.dt, cell.tau_s
        self.lo, self.hi = cell.tau_bounds
        self.theta_tau = torch.nn.Parameter(_t(cell.theta_tau))
        self.w_s_raw = torch.nn.Parameter(_t(cell.w_s_raw))
        self.register_buffer("index", torch.tensor(np.asarray(cell.synapse_index), dtype=torch.long))
        self.mlp = torch.nn.ModuleList()
        for w, b in zip(cell.mlp.weights, cell.mlp.biases):
            lin = torch.nn.Linear(*w.shape)
            lin.weight.data, lin.bias.data = _t(w).T.contiguous(), _t(b)
            self.mlp.append(lin)
        self.w_y = torch.nn.Linear(cell.d_m, model.output_size)
        self.w_y.weight.data, self.w_y.bias.data = _t(model.readout.weight), _t(model.readout.bias)

    def forward(self, x):
        B, T, _ = x.shape
        tau_m = self.lo + (self.hi - self.lo) * torch.sigmoid(self.theta_tau)
        kappa_m = torch.exp(-self.dt / tau_m)
        gain = self.lam * (1 - kappa_m)
        kappa_s = float(np.exp(-self.dt / self.tau_s))
        w_s = torch.relu(self.w_s_raw)
        routed = torch.cat([x, x.new_zeros(B, T, 1)], dim=-1)[:, :, self.index]
        s = x.new_zeros(B, self.d_tree)
        m = x.new_zeros(B, len(tau_m))
        outs = []
        for t in range(T):
            s = kappa_s * s + (w_s * routed[:, t]).view(B, self.d_tree, self.d_branch).sum(-1)
            h = torch.cat([s, kappa_m * m], dim=-1)
            for i, lin in enumerate(self.mlp):
                h = lin(h)
                if i < len(self.mlp) - 1:
                    h = torch.relu(h)
            m = kappa_m * m + gain * torch.tanh(h)
            outs.append(self.w_y(m))
        return torch.stack(outs, dim=1)


class TorchElmLayer(torch.nn.Module):
    """N ELM neurons (scaling paper Eq. 1) with per-neuron MLPs as batched einsums."""

    def __init__(self, layer):
        super().__init__()
        self.n, self.d_tree, self.d_branch, self.c = layer.n, layer.d_tree, layer.d_branch, layer.c
        kappa_m, gain = layer.gains()
        self.register_buffer("kappa_m", _t(kappa_m))
        self.register_buffer("gain", _t(gain))
        self.register_buffer("index", torch.tensor(np.asarray(layer.index), dtype=torch.long))
        self.w_s = torch.nn.Parameter(_t(layer.w_s))
        self.weights = torch.nn.ParameterList([torch.nn.Parameter(_t(w)) for w in layer.mlp.weights])
        self.biases = torch.nn.ParameterList([torch.nn.Parameter(_t(b)) for b in layer.mlp.biases])
        self.w_r = torch.nn.Parameter(_t(layer.w_r))
        self.b = torch.nn.Parameter(_t(layer.b))

    def update(self, src, m):
        B = src.shape[0]
        z = src[:, self.index] * self.w_s
        h = torch.cat([self.c * z.view(B, self.n, self.d_tree, self.d_branch).sum(-1), self.kappa_m * m], dim=-1)
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.einsum("bni,nio->bno", h, w) + b
            if i < len(self.weights) - 1:
                h = torch.relu(h) ** 2
        m = self.kappa_m * m + self.gain * torch.tanh(h)
        return m, (self.w_r * m).sum(-1)


class TorchElmNet(torch.nn.Module):
    """ELM network: recurrent ELM layer with high-pass + ReLU, read-out ELM layer, linear output."""

    def __init__(self, model):
        super().__init__()
        net = model.cells[0]
        self.hidden, self.readout = TorchElmLayer(net.layer), TorchElmLayer(net.readout_layer)
        self.kappa_r = float(np.exp(-1.0 / net.tau_r))
        self.out = torch.nn.Linear(net.output_size, model.output_size)
        self.out.weight.data, self.out.bias.data = _t(model.readout.weight), _t(model.readout.bias)

    def forward(self, x):
        B, T, _ = x.shape
        hid, ro = self.hidden, self.readout
        m = x.new_zeros(B, hid.n, len(hid.kappa_m))
        r, a = x.new_zeros(B, hid.n), x.new_zeros(B, hid.n)
        m_out = x.new_zeros(B, ro.n, len(ro.kappa_m))
        outs = []
        for t in range(T):
            m, y = hid.update(torch.cat([x[:, t], a], dim=-1), m)
            r = self.kappa_r * r + (1 - self.kappa_r) * y
            a = torch.relu(hid.b + y - r)
            m_out, y_out = ro.update(a, m_out)
            outs.append(self.out(ro.b + y_out))
        return torch.stack(outs, dim=1)


def torch_trainer(module):
    opt = torch.optim.Adam(module.parameters(), lr=LR)

    def run(x, y):
        opt.zero_grad()
        loss = torch.mean((module(x) - y) ** 2)
        loss.backward()
        opt.step()
        return loss.item()

    return run


# ---------------------------------------------------------------------------------------------


def timed(run, x, y, steps):
    first = run(x, y)  # compilation (JAX) / warm-up (PyTorch)
    t0 = time.perf_counter()
    for _ in range(steps):
        run(x, y)
    return first, (time.perf_counter() - t0) / steps


def compare(name, model, torch_cls, x, y, steps):
    """Time both; PyTorch with its default intra-op threads and with one thread, the faster one counts."""
    first_jax, t_jax = timed(jax_trainer(model), jnp.asarray(x), jnp.asarray(y), steps)
    t_torch = {}
    default_threads = torch.get_num_threads()
    for threads in sorted({default_threads, 1}, reverse=True):
        torch.set_num_threads(threads)
        first_torch, t_torch[threads] = timed(torch_trainer(torch_cls(model)), torch.tensor(x), torch.tensor(y), steps)
    torch.set_num_threads(default_threads)
    best = min(t_torch.values())
    B, T = x.shape[:2]
    print(f"{name}: {model.param_count()['total']:,} parameters, batch {B}, T = {T}; "
          f"first loss dynlab {first_jax:.6f} / PyTorch {first_torch:.6f}")
    print(f"  dynlab  {t_jax * 1e3:9.1f} ms/step  ({B * T / t_jax:10.0f} sample-steps/s)")
    for threads, t in t_torch.items():
        print(f"  PyTorch {t * 1e3:9.1f} ms/step  ({B * T / t:10.0f} sample-steps/s), {threads} thread(s)")
    print(f"  ratio PyTorch (faster setting) / dynlab: {best / t_jax:.1f}x", flush=True)
    return best / t_jax


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2, help="timed training steps per implementation")
    parser.add_argument("--with-gather", action="store_true", help="also time elm-net with wiring='gather'")
    parser.add_argument("--dispatch", action="store_true",
                        help="also time both on the same elm-net graph at a tiny size (the per-step dispatch floor)")
    args = parser.parse_args()
    print(f"JAX {jax.__version__} on {jax.devices()[0].platform}, PyTorch {torch.__version__} "
          f"({torch.get_num_threads()} threads); machine may be shared: timings include contention")
    rng = np.random.default_rng(0)

    # Branch-ELM, NeuronIO configuration: sparse E/I spikes in {-1, 0, 1}
    B, T, D = 8, 500, 1278
    x = (rng.random((B, T, D)) < 0.01).astype(np.float32) * np.where(np.arange(D) < D // 2, 1, -1).astype(np.float32)
    y = rng.normal(size=(B, T, 2)).astype(np.float32)
    elm = dynlab.build("model", unit="elm", input_size=D, output_size=2, key=jax.random.key(0),
                       d_m=20, d_mlp=40, d_tree=45, d_branch=100, routing="neuronio")
    r_elm = compare("elm (Branch-ELM, NeuronIO)", elm, TorchBranchELM, x, y, args.steps)

    # ELM network, N = 256, d_m = 10, Enwik8-like one-hot input
    B, T, D, N = 8, 100, 204, 256
    x = 3 * np.eye(D, dtype=np.float32)[rng.integers(0, D, (B, T))]
    y = rng.normal(size=(B, T, D)).astype(np.float32)
    config = dict(hidden=N, d_m=10, d_mlp=20, d_tree=40, d_branch=40, rho_rec=N / (N + D), tau_min=0.1,
                  tau_max=100.0, tau_r=2.0, readout_neurons=D)
    net = dynlab.build("model", unit="elm-net", input_size=D, output_size=D, key=jax.random.key(0), **config)
    r_net = compare("elm-net (N = 256, d_m = 10)", net, TorchElmNet, x, y, args.steps)
    print(f"summary: PyTorch / dynlab training-step time: elm {r_elm:.1f}x, elm-net {r_net:.1f}x")
    if args.with_gather:
        gathered = dynlab.build("model", unit="elm-net", input_size=D, output_size=D, key=jax.random.key(0),
                                wiring="gather", **config)
        _, t_gather = timed(jax_trainer(gathered), jnp.asarray(x), jnp.asarray(y), args.steps)
        _, t_dense = timed(jax_trainer(net), jnp.asarray(x), jnp.asarray(y), args.steps)
        print(f"elm-net dynlab wiring: gather {t_gather * 1e3:.1f} ms/step, dense {t_dense * 1e3:.1f} ms/step "
              f"(ratio {t_gather / t_dense:.1f}x)")
    if args.dispatch:
        dispatch_floor(B, T, args.steps)


def dispatch_floor(B, T, steps):
    """The same elm-net step (same ops per time step, same T and batch) at a tiny size (N = 8,
    4 inputs, 2 x 2 synapses): its PyTorch time is the per-time-step dispatch cost that
    ``lax.scan`` removes, and bounds what that removal can gain at the full size."""
    D = 4
    tiny = dynlab.build("model", unit="elm-net", input_size=D, output_size=D, key=jax.random.key(0), hidden=8, d_m=2,
                        d_mlp=4, d_tree=2, d_branch=2, rho_rec=8 / 12, tau_min=0.1, tau_max=100.0, tau_r=2.0,
                        readout_neurons=4)
    rng = np.random.default_rng(1)
    x = 3 * np.eye(D, dtype=np.float32)[rng.integers(0, D, (B, T))]
    y = rng.normal(size=(B, T, D)).astype(np.float32)
    _, t_torch = timed(torch_trainer(TorchElmNet(tiny)), torch.tensor(x), torch.tensor(y), steps)
    _, t_jax = timed(jax_trainer(tiny), jnp.asarray(x), jnp.asarray(y), steps)
    print(f"elm-net dispatch floor (N = 8, batch {B}, T = {T}): PyTorch {t_torch * 1e3:.1f} ms/step, "
          f"dynlab {t_jax * 1e3:.1f} ms/step ({t_torch / t_jax:.0f}x)")


if __name__ == "__main__":
    main()
