"""Issue 20, item 4: every paper scenario's ``--preset paper`` at toy step counts on CPU, so it cannot rot.

Each test loads its paper scenario exactly as ``dynlab run NAME --preset paper --set ...`` does
([`dynlab.scenarios.spec.load`][] with the preset, then the user's ``--set`` overrides) and keeps
every size the preset sets. Only step counts, batch sizes, evaluation sizes, seeds and which cells
of a grid get a training step are reduced: through ``--set params.X=...`` or by calling the
program's own building blocks, which the program itself uses to make its runs
(``aru_table1.run_configs``, ``elm_shd.run_configs``, ``elm_budget.run_configs``,
``pc_width_depth.grids`` / ``task_data``, ``sith_trw.build`` / ``training_steps``).

For every network the preset builds, its parameter and state shapes are checked against the
papers' numbers, written out below from the papers and ``../shared/papers/notes`` (not read from
dynlab's code), and one training step runs on a tiny batch with a finite loss and finite
parameters: the trainer's own step (``dynlab.train``'s compiled chunk of one step, i.e.
[`dynlab.train.update`][] on a sampled batch, or truncated BPTT on the next window of a stateful
task), or for PC the comparison's own step ([`dynlab.analyses.pc_bp.compare_pc_bp`][], which
trains PC and BP with ``dynlab.train.update``).

Not stepped at full size, and why (one CPU step of each is seconds to tens of seconds of XLA
compilation; the file must stay near a minute on one core):

* ``elm-budget``: all 18 networks (3 budgets x 6 d_m, N = 100 ... 4671) are built abstractly at
  full size and their N, k_e, k_c checked; one step runs on the paper preset's cheapest network
  (P = 1.6M, d_m = 50, N = 100, the full 204-neuron read-out, window 100), not on N = 4671 (about
  20 s to build and 40 s for one step on one core).
* ``pc-width-depth``: all 42 networks are built abstractly in float64 at full size; one step runs
  at the widest cell of each comparison and the deepest of the no-skip MLPs (N = 2048 x L = 32
  would hold ~1 GB of float64 weights per copy).
* ``elm-shd-adding``: one step per network at the paper's 2 ms bins (T = 1000, the longest); the
  10 and 50 ms bins (T = 200, 40) are checked for their task shapes only.
* ``sith-trw``: all six networks are built at full size; Net 1 and SITH-RNN, whose training the
  preset changes, take a step; the other four are built and trained exactly as at the laptop
  preset (asserted), so there is nothing of the preset left to step.

Measured (pytest -n 0, pinned to one core of the 2-core CPU machine while others ran tests; wall
time, about 0.75 of it CPU): elm-shd-adding 21-28 s (most of it compiling: building an ELM network
compiles its random initialisers shape by shape), aru-table1 17-21 s, elm-budget 15-19 s,
pc-width-depth 11-13 s, sith-trw 9-10 s; the file 83-90 s wall, 62-69 s CPU.
"""

from __future__ import annotations

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynlab import experiment, train
from dynlab.analyses import pc_bp
from dynlab.scenarios import aru_table1, elm_budget, elm_shd, pc_width_depth, sith_trw, spec
from dynlab.scenarios.papers import PAPERS

from cli_runner import invoke

PRESET = "paper"


def paper(name: str, *sets: str):
    """Scenario ``name`` as ``dynlab run NAME --preset paper --set S ...`` loads it."""
    scenario = spec.load(name, preset=PRESET, sets=list(sets))
    assert isinstance(scenario, spec.Program) and scenario.preset == PRESET and scenario.claims()
    return scenario


def arguments(fn, params: dict) -> dict:
    """The program's resolved ``params`` that ``fn`` (one of its building blocks) takes."""
    names = inspect.signature(fn).parameters
    return {k: v for k, v in params.items() if k in names}


def shapes(tree) -> dict[str, tuple]:
    """``{path: shape}`` of every array (or abstract array) in ``tree``."""
    return {jax.tree_util.keystr(path): tuple(leaf.shape) for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
            if hasattr(leaf, "shape")}


def state_shapes(model) -> list[tuple]:
    return [tuple(s.shape) for s in jax.tree_util.tree_leaves(eqx.filter_eval_shape(model.init_state))]


def one_step(exp) -> dict:
    """One training step of ``exp`` exactly as [`dynlab.train.train`][] takes it (its compiled chunk of
    one step), at the experiment's own batch size; the step's metrics, checked finite."""
    cfg = exp.train
    optimizer = cfg.optimizer_fn()
    params, static = eqx.partition(exp.model, eqx.is_inexact_array)
    state = (optimizer.init(params), train._initial_carry(exp.model, exp.task, cfg.batch_size))
    data_key, rule_key, _ = train._keys(exp.seed)
    _, _, metrics = train._run_chunk(params, static, state, jnp.asarray(0), 1, exp.rule, exp.task, optimizer,
                                     cfg.batch_size, data_key, rule_key)
    metrics = jax.device_get(metrics)
    assert np.isfinite(metrics["loss"]).all(), metrics["loss"]
    assert bool(np.all(metrics["finite"])), "non-finite parameters after one step"
    assert np.isfinite(metrics["grad_norm"]).all() and (metrics["grad_norm"] > 0).all()
    return metrics


def test_every_paper_has_a_paper_preset_tested_here():
    tested = {"aru": "aru-table1", "elm-neuron": "elm-shd-adding", "elm-scaling": "elm-budget",
              "pc-width-depth": "pc-width-depth", "sith": "sith-trw"}
    assert set(tested) == set(PAPERS)
    for paper_id, name in tested.items():
        assert spec.load(name).paper == paper_id and PRESET in spec.load(name).presets


# ---------------------------------------------------------------------------------------------
# ARU (Geadah et al.): Table 1, psMNIST. §5.3 / notes §1-2: one pixel per step (T = 784, N_x = 1),
# 10 classes, N_h = 400, N_g = 50; RNN+gamma heterogeneous (2 N_h more); the controller's weights
# W_ag [N_g x 1], W_gg [N_g x N_g], b_g, W_gn, W_gs [1 x N_g]; GRU and LSTM within 2% of the ARUN.

T_PSMNIST, N_X, CLASSES, N_H, N_G = 784, 1, 10, 400, 50


def test_aru_table1_paper_preset_builds_table_1s_networks_and_each_trains_a_step():
    scenario = paper("aru-table1", "params.seeds=[0]", "params.steps=1", "params.batch_size=2", "params.eval_size=2",
                     "params.n_test=2")
    params = scenario.resolved_params()
    assert (params["downsample"], params["hidden"], params["n_g"], params["lr"]) == (1, N_H, N_G, 1e-4)
    configs = aru_table1.run_configs(**arguments(aru_table1.run_configs, params))
    assert list(configs) == ["rnn-relu", "rnn-gamma", "aru", "gru", "lstm"]  # Table 1's rows
    rnn = N_H * N_H + N_H * N_X + N_H + CLASSES * N_H + CLASSES  # W_hh, W_xh, b_h (Eq. 1), linear read-out
    totals = {}
    for net, (config,) in configs.items():
        exp = experiment.build(config)
        assert (exp.task.length, exp.task.input_size, exp.task.output_size) == (T_PSMNIST, N_X, CLASSES)
        got, total = shapes(exp.model), exp.model.param_count()["total"]
        totals[net] = total
        if net in ("rnn-relu", "rnn-gamma", "aru"):
            assert {k: got[k] for k in (".cells[0].w_hh", ".cells[0].w_xh", ".cells[0].b_h", ".readout.weight")} == {
                ".cells[0].w_hh": (N_H, N_H), ".cells[0].w_xh": (N_H, N_X), ".cells[0].b_h": (N_H,),
                ".readout.weight": (CLASSES, N_H)}
        if net == "rnn-relu":
            assert total == rnn and state_shapes(exp.model) == [(N_H,)]
        if net == "rnn-gamma":  # heterogeneous (n, s): one pair per neuron
            assert got[".cells[0].n"] == got[".cells[0].s"] == (N_H,) and total == rnn + 2 * N_H
        if net == "aru":
            assert {k: got[k] for k in (".cells[0].w_ag", ".cells[0].w_gg", ".cells[0].b_g", ".cells[0].w_gn",
                                        ".cells[0].w_gs")} == {
                ".cells[0].w_ag": (N_G,), ".cells[0].w_gg": (N_G, N_G), ".cells[0].b_g": (N_G,),
                ".cells[0].w_gn": (N_G,), ".cells[0].w_gs": (N_G,)}
            # the paper's controller has N_g^2 + 4 N_g + 2 weights (scalar b_n, b_s); dynlab's b_n, b_s are
            # per neuron (the prior n ~ N(5, 2^2) drawn per neuron) or scalar
            assert got[".cells[0].b_n"] in ((), (N_H,))
            biases = 2 * int(np.prod(got[".cells[0].b_n"]))
            assert total == rnn + N_G * N_G + 4 * N_G + biases
            assert state_shapes(exp.model) == [(N_H,), (N_H, N_G)]  # h, and one controller state g per neuron
        if net in ("gru", "lstm"):
            hidden = config["model"]["hidden"]
            assert state_shapes(exp.model) == [(hidden,)] * (2 if net == "lstm" else 1)
        one_step(exp)
    for net in ("gru", "lstm"):  # "hidden sizes set so the parameter count is within 2%"
        assert abs(totals[net] - totals["aru"]) <= 0.02 * totals["aru"], (net, totals)


# ---------------------------------------------------------------------------------------------
# ELM neuron paper, SHD-Adding (§4, App.): 700 channels, two 1 s digits binned at 2 ms (T = 2000 ms / bin:
# 1000 steps at 2 ms), 19 classes. The network is the scaling paper's SHD-Adding reference (its Table 1):
# N = 96, d_m = 5, d_mlp = 10, d_tree = 30, d_branch = 10 (d_s = 300), k_e = 420, k_c = 300, P = 69,120,
# 19 read-out neurons; the LSTM's count matched to the ELM network's.

SHD_CHANNELS, SHD_CLASSES = 700, 19


def elm_k_e(d_m: int, d_tree: int, d_mlp: int | None = None, l_mlp: int = 1) -> int:
    """k_e = #w_p + #w_r of one ELM neuron (scaling paper notes §2: MLP (d_tree + d_m) -> d_mlp -> d_m with biases)."""
    d_mlp = 2 * d_m if d_mlp is None else d_mlp
    w_p = (d_tree + d_m) * d_mlp + d_mlp + (l_mlp - 1) * (d_mlp ** 2 + d_mlp) + d_mlp * d_m + d_m
    return w_p + d_m


def test_elm_shd_adding_paper_preset_runs_2ms_bins_on_700_channels():
    scenario = paper("elm-shd-adding", "params.seeds=[0]", "params.steps=1", "params.batch_size=2",
                     "params.eval_size=2")
    params = scenario.resolved_params()
    configs = elm_shd.run_configs(**arguments(elm_shd.run_configs, params))
    assert list(configs) == [(2.0, "elm-net"), (2.0, "elm-constant-tau"), (2.0, "lstm"),
                             *((b, net) for b in (10.0, 50.0) for net in ("elm-net", "lstm"))]
    tau = configs[2.0, "elm-constant-tau"][0]["model"]  # Fig. 3e at the smallest bin: 25 ms = 12.5 steps of 2 ms
    assert tau["tau_min"] == tau["tau_max"] == 12.5
    assert elm_k_e(5, 30) == 420
    counts = {}
    for (bin_ms, net), (config,) in configs.items():
        if net == "elm-constant-tau":
            continue  # the elm-net with other (static) timescales, checked above
        if bin_ms != 2.0:  # the shorter sequences: the task's shapes (the networks do not depend on the bin)
            task = experiment.build(config).task
            assert (task.length, task.input_size, task.output_size) == (round(2000 / bin_ms), SHD_CHANNELS, SHD_CLASSES)
            continue
        exp = experiment.build(config)
        assert (exp.task.length, exp.task.input_size, exp.task.output_size) == (1000, SHD_CHANNELS, SHD_CLASSES)
        counts[net] = exp.model.param_count()["total"]
        if net == "elm-net":
            pc = exp.model.cells[0].param_count()
            assert {k: pc[k] for k in ("N", "k_e", "k_c", "P")} == {"N": 96, "k_e": 420, "k_c": 300, "P": 69_120}
            got = shapes(exp.model)
            assert got[".cells[0].layer.w_s"] == (96, 300) and got[".cells[0].layer.index"] == (96, 300)
            assert got[".cells[0].layer.mlp.weights[0]"] == (96, 30 + 5, 10)  # [b_t, m] -> d_mlp, per neuron
            assert got[".cells[0].layer.mlp.weights[1]"] == (96, 10, 5)
            assert got[".cells[0].readout_layer.w_s"][0] == SHD_CLASSES  # 19 read-out neurons
            assert state_shapes(exp.model)[0] == (96, 5)  # memory m: N x d_m
        one_step(exp)
    assert abs(counts["lstm"] - counts["elm-net"]) <= params["match_tol"] * counts["elm-net"]


# ---------------------------------------------------------------------------------------------
# ELM scaling laws paper, Fig. 3 (Enwik8 budgets): P = N (k_e + k_c) with N = floor(P / (k_e + k_c)), the
# Enwik8 neuron (Table 1: d_tree = 50, d_branch = 15 -> k_c = 750; d_mlp = 2 d_m; at d_m = 15 k_e = 2460),
# 204 read-out neurons, stateful truncated BPTT over windows of 100 characters, one-hot x 3 input.

ENWIK8_D_TREE, ENWIK8_D_BRANCH, ENWIK8_READOUT = 50, 15, 204


def test_elm_budget_paper_preset_sizes_every_network_from_its_budget_and_one_trains_a_step():
    scenario = paper("elm-budget", "params.steps=1", "params.batch_size=1", "params.eval_size=1")
    params = scenario.resolved_params()
    assert params["budgets"] == [1_600_000, 3_200_000, 6_400_000] and params["d_ms"] == [5, 10, 15, 25, 35, 50]
    configs = elm_budget.run_configs(**arguments(elm_budget.run_configs, params))
    assert elm_k_e(15, ENWIK8_D_TREE) == 2460
    k_c = ENWIK8_D_TREE * ENWIK8_D_BRANCH
    neurons = {}
    for (budget, d_m), (config,) in configs.items():
        model = eqx.filter_eval_shape(lambda c=config: experiment.build(c).model)
        pc = model.cells[0].param_count()
        k_e = elm_k_e(d_m, ENWIK8_D_TREE)
        assert (pc["k_e"], pc["k_c"], pc["N"]) == (k_e, k_c, budget // (k_e + k_c)), (budget, d_m)
        assert budget - (k_e + k_c) < pc["P"] <= budget
        got = shapes(model)
        assert got[".cells[0].layer.w_s"] == (pc["N"], k_c)
        assert got[".cells[0].readout_layer.w_s"][0] == ENWIK8_READOUT
        assert state_shapes(model)[0] == (pc["N"], d_m)
        neurons[budget, d_m] = pc["N"]
    assert min(neurons.values()) == neurons[1_600_000, 50] == 100 and max(neurons.values()) == neurons[6_400_000, 5]
    # one step on the cheapest paper network (N = 100; N = 4671 takes about a minute on one CPU core)
    exp = experiment.build(configs[1_600_000, 50][0])
    assert exp.task.length == 100 and exp.task.reset_steps == 40_000  # the paper's window and reset schedule
    x = exp.task.window(0, 1)[0]
    assert x.shape == (1, 100, exp.task.input_size) and float(x.max()) == 3.0  # one-hot x 3
    one_step(exp)


# ---------------------------------------------------------------------------------------------
# PC width/depth (Innocenti et al.), Fig. 1/3 and A.7/A.19: CIFAR-10 (D = 3072), 10 one-hot outputs, one
# fixed batch of 64, float64; linear residual mean-field grid N in {2..2048} x L in {2..32}; SP MLP L = 5,
# N in {8..512}; mean-field MLPs without skips at L = 8, 32. A network of depth L has an input layer
# [N x D], L - 2 hidden layers [N x N] and an output layer [10 x N].

CIFAR_D, PC_BATCH = 3 * 32 * 32, 64


@pytest.mark.filterwarnings("ignore:CIFAR-10 files not found")
def test_pc_width_depth_paper_preset_builds_its_grid_in_float64_and_steps_its_extreme_cells():
    scenario = paper("pc-width-depth", "params.seeds=1", "params.steps=1")
    params = scenario.resolved_params()
    assert params["x64"] is True and params["task"] == "cifar10"
    data = pc_width_depth.task_data(params["task"])
    x, y = data.fixed_batch("train")
    assert x.shape == (PC_BATCH, CIFAR_D) and y.shape == (PC_BATCH, 10)
    grids = pc_width_depth.grids(**arguments(pc_width_depth.grids, params))
    assert grids == {"mf-residual": ([2, 8, 32, 128, 512, 2048], [2, 4, 8, 16, 32]),
                     "sp-mlp": ([8, 32, 128, 512], [5]), "mf-mlp": ([16, 64, 256, 1024], [8, 32])}
    with jax.enable_x64(True):
        for name, (widths, depths) in grids.items():
            cfg = pc_bp.CompareConfig.from_options(steps=params["steps"], x64=params["x64"],
                                                   **pc_width_depth.COMPARISONS[name])
            for n in widths:
                for depth in depths:
                    model = eqx.filter_eval_shape(pc_bp.make_model, cfg, n, depth, CIFAR_D, 10, 0)
                    assert (model.w_in.shape, model.w_hidden.shape, model.w_out.shape) == (
                        (n, CIFAR_D), (depth - 2, n, n), (10, n)), (name, n, depth)
                    assert {a.dtype for a in (model.w_in, model.w_hidden, model.w_out)} == {jnp.dtype("float64")}
                    assert model.residual == (name == "mf-residual") and model.param.name == name[:2]
    for name, n, depth in (("mf-residual", 2048, 2), ("sp-mlp", 512, 5), ("mf-mlp", 16, 32)):
        ds = pc_bp.compare_pc_bp(data, [n], [depth], seeds=params["seeds"], steps=params["steps"], x64=params["x64"],
                                 **pc_width_depth.COMPARISONS[name])
        assert ds.attrs["dtype"] == "float64" and ds.sizes["step"] == 1
        for var in ("loss_pc", "loss_bp", "energy", "cosine", "grad_norm_pc", "grad_norm_bp"):
            assert np.isfinite(ds[var].values).all(), (name, n, depth, var)


# ---------------------------------------------------------------------------------------------
# SITH (Sarkar & Howard): the hierarchical language, 9 sequences of 3^4 = 81 symbols, 9 one-hot channels,
# 9 classes; 4 layers of n_f = 9 features x n_tau = 50 time constants (N_hid = 450). Parameters (notes §5,
# weights shared across layers): Net 1 450^2 + 2 (450 x 9) = 210,600; Net 2 2500 + 50 + 2500 + 81 = 5,131;
# Nets 3/4 2500 + 81 = 2,581; SITH-RNN 7 + 81 = 88; SITHCon's conv 9 x 9 = 81; each + a 9 x 9 bias-free
# read-out (81).

SITH_UNIT_PARAMS = {"rnn-generic": 210_600, "rnn-blockdiag": 5_131, "rnn-diag-uniform": 2_581,
                    "rnn-diag-geometric": 2_581, "sith-rnn": 88, "sithcon": 81}


def test_sith_trw_paper_preset_builds_all_six_networks_at_the_papers_sizes():
    scenario = paper("sith-trw", "params.seeds=[0]")
    laptop = spec.load("sith-trw", sets=["params.seeds=[0]"]).resolved_params()
    params = scenario.resolved_params()
    assert params["generic_steps"] == params["sith_rnn_steps"] == params["steps"] == 200  # 200 epochs for every net
    assert list(params["networks"]) == list(SITH_UNIT_PARAMS)
    for net, unit_params in SITH_UNIT_PARAMS.items():
        steps = sith_trw.training_steps(net, **arguments(sith_trw.training_steps, params))
        assert steps == 200
        exp = sith_trw.build(net, params["seeds"][0], steps)
        assert (exp.task.length, exp.task.input_size, exp.task.output_size, exp.train.batch_size) == (81, 9, 9, 9)
        count = exp.model.param_count()
        assert count["layer0"] == unit_params and count["readout"] == 81, (net, count)
        state = state_shapes(exp.model)[0]
        assert state == ((4, 450) if net == "rnn-generic" else (4, 9, 50, 16) if net == "sithcon" else (4, 9, 50))
        if steps != sith_trw.training_steps(net, **arguments(sith_trw.training_steps, laptop)):
            one_step(exp)  # Net 1 and SITH-RNN: the preset changes their training
        else:  # the other four are built and trained exactly as at the laptop preset: nothing of the preset to step
            assert exp.config == sith_trw.build(net, laptop["seeds"][0], steps).config
    assert SITH_UNIT_PARAMS["sith-rnn"] / SITH_UNIT_PARAMS["rnn-generic"] < 5e-4  # "< 0.05% of Net 1"


# ---------------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit 2


@pytest.mark.parametrize("args, message", [
    (("run", "aru-table1", "--preset", "nonexistent"), "no preset 'nonexistent'; presets: laptop, paper"),
    (("reproduce", "nosuchpaper"), "unknown paper 'nosuchpaper'; papers: aru, elm-neuron"),
])
def test_unknown_preset_or_paper_is_one_line_and_exit_2(args, message, tmp_path):
    res = invoke(list(args), tmp_path)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and message in res.stderr, res.stderr
    assert not any(tmp_path.iterdir())  # nothing written
