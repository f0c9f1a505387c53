"""iris.models' exact mode at the level of its layers, split over two ranks the way `iris
shard` splits them (the columns of o and of an expert stack's down, cut unevenly on 32-column
blocks; the rows of q, k and v), with the ranks on the CPU over gloo: each rank's outputs after
the exchange are the whole layer's bit for bit. The fast FP32 sums of the same halves differ
from the whole's, which the test also checks, so that it can fail.

Runs wherever torch (2.4 or newer: iris.models' operators) is installed, GPU or not; skipped,
saying so, elsewhere."""

import os

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch.library, "custom_op"):
    pytest.skip(f"torch {torch.__version__} predates torch.library.custom_op, which iris.models needs", allow_module_level=True)
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("this torch has no gloo backend", allow_module_level=True)

from iris_archive.models import _layers as layers  # noqa: E402
from iris_archive.models._parallel import TensorParallel  # noqa: E402
from iris_archive.models._weights import Weights  # noqa: E402

K, N, CUT = 2880, 96, [0, 1472, 2880]


def _data():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(N, K, generator=g) * torch.exp2(torch.randint(-12, 3, (N, K), generator=g).float())
    wq = torch.randn(3 * 64, K, generator=g)
    stack = torch.randn(4, N, K, generator=g)
    bias = torch.randn(N, generator=g).to(torch.bfloat16)
    x = torch.randn(1, K, generator=g).to(torch.bfloat16)
    return w, wq, stack, bias, x


def _layers_of(tensors, source, out_of_range):
    w = Weights(tensors, {}, {n: 0 for n in tensors}, source)
    o, qkv = layers.Linear(w, "o"), layers.GroupedLinear(w, ["q", "k", "v"], "cpu", fuse=True)
    stack = layers.ExpertStack(tensors["e"], 0)
    for part in (o, qkv, stack):
        layers.use_exact_sums(part, out_of_range)
    return o, qkv, stack


IDS, ROWS = [2, 0], [0, 0]


def _rank(r, world, port, out):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=r, world_size=world)
    w, wq, stack, bias, x = _data()
    a, z = CUT[r], CUT[r + 1]
    mine = slice(r * 32, (r + 1) * 32)
    tensors = {"o.weight": w[:, a:z].contiguous(), "o.bias": bias, "q.weight": wq[:64][mine], "k.weight": wq[64:128][mine],
               "v.weight": wq[128:][mine], "e": stack[:, :, a:z].contiguous()}
    tp = TensorParallel(r, world, {"o.weight": {"shape": [N, K], "start": [0, a], "count": [N, z - a]}}, f"rank {r}")
    o, qkv, experts = _layers_of(tensors, f"rank {r}", torch.zeros((), dtype=torch.bool))
    ids, rows = torch.tensor(IDS, dtype=torch.int32), torch.tensor(ROWS, dtype=torch.int32)
    xs = x[:, a:z]
    out[r] = (o.finish_f32(tp.reduce(o.partial_f32(xs))), [t.clone() for t in qkv(x)],
              experts.finish_f32(tp.reduce(experts.partial_f32(xs, ids, rows))))
    dist.destroy_process_group()


def test_split_layers_give_the_whole_layers_bits():
    import numpy as np
    import torch.multiprocessing as mp

    w, wq, stack, bias, x = _data()
    out_of_range = torch.zeros((), dtype=torch.bool)
    o, qkv, experts = _layers_of({"o.weight": w, "o.bias": bias, "q.weight": wq[:64], "k.weight": wq[64:128],
                                  "v.weight": wq[128:], "e": stack}, "whole", out_of_range)
    ids, rows = torch.tensor(IDS, dtype=torch.int32), torch.tensor(ROWS, dtype=torch.int32)
    want_o, want_qkv, want_e = o(x), qkv(x), experts(x, ids, rows)
    assert not out_of_range
    out = mp.get_context("spawn").Manager().dict()
    mp.spawn(_rank, args=(2, 29000 + int(np.random.default_rng().integers(0, 900)), out), nprocs=2)
    bits = lambda t: t.view(torch.int16)  # noqa: E731 - BF16 outputs compared as bits
    for r in range(2):
        got_o, got_qkv, got_e = out[r]
        assert torch.equal(bits(got_o), bits(want_o)), f"o_proj, rank {r}"
        assert torch.equal(bits(got_e), bits(want_e)), f"expert down, rank {r}"
        for i in range(3):
            assert torch.equal(bits(got_qkv[i]), bits(want_qkv[i][:, r * 32:(r + 1) * 32])), f"q/k/v {i}, rank {r}"
    # the fast arithmetic's halves (FP32 sums, added) do differ from its whole: the split matters there
    halves = x[:, :1472].float() @ w[:, :1472].T + x[:, 1472:].float() @ w[:, 1472:].T
    assert (halves != x.float() @ w.T).any()


def test_a_product_beyond_the_limbs_sets_the_flag():
    out_of_range = torch.zeros((), dtype=torch.bool)
    w = Weights({"o.weight": torch.full((2, 4), 2.0 ** 30)}, {}, {"o.weight": 0}, "big")
    o = layers.Linear(w, "o")
    layers.use_exact_sums(o, out_of_range)
    o(torch.full((1, 4), 2.0 ** 8).to(torch.bfloat16))
    assert out_of_range
