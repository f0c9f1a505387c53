"""iris_archive._exact_sum, the order-free dot products of a reproducible tensor-parallel
decode, against an independent oracle: Python's exact rational arithmetic (fractions), and
the property it exists for -- any split of K, any order of the terms, the same integers."""

from fractions import Fraction

import numpy as np
import pytest

from iris_archive import _exact_sum as ex

BE = ex.numpy_backend()


def bf16_values(rng, shape, scale_bits=(-30, 12)):
    """FP32 arrays holding BF16 values: random signs, significands and exponents over a wide
    range (the activations' format), with zeros and tiny values among them."""
    mant = rng.integers(0, 128, size=shape)
    exp = rng.integers(*scale_bits, size=shape)
    sign = rng.choice([-1.0, 1.0], size=shape)
    v = sign * (1.0 + mant / 128.0) * np.exp2(exp.astype(np.float64))
    v[rng.random(shape) < 0.05] = 0.0
    return v.astype(np.float32)


def fp32_values(rng, shape):
    """FP32 weights: full 24-bit significands, exponents from 2^-40 to 2^6, some subnormal."""
    v = rng.standard_normal(shape) * np.exp2(rng.integers(-40, 6, size=shape).astype(np.float64))
    v = v.astype(np.float32)
    v.flat[:: 97] = np.float32(1.5e-42)  # FP32 subnormals
    return v


def exact(w_row, x_row):
    return sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(w_row, x_row)), Fraction(0))


@pytest.mark.parametrize("k", [1, 7, 64, 2880])
def test_value_is_the_exact_sum_to_within_the_grid(k):
    rng = np.random.default_rng(k)
    w, x = fp32_values(rng, (5, k)), bf16_values(rng, (2, k))
    hi, lo, bad = ex.matvec_limbs(w, x, BE)
    value = ex.limbs_value(hi, lo, bad, BE)
    assert not bad.any()
    for b in range(2):
        for n in range(5):
            want = exact(w[n], x[b])
            # each term is cut below 2^-53 (at most one unit of the grid), and the value is
            # one FP64 rounding of hi's and lo's sums and one of their sum
            err = abs(Fraction(float(value[b, n])) - want)
            assert err <= Fraction(k, 2 ** 53) + abs(want) * Fraction(3, 2 ** 53), (b, n, float(err))


def test_any_split_and_any_order_give_the_same_integers():
    rng = np.random.default_rng(27)
    k = 2880
    w, x = fp32_values(rng, (16, k)), bf16_values(rng, (3, k))
    hi, lo, _ = ex.matvec_limbs(w, x, BE)
    for cuts in ([1440], [736, 1472, 2176], [1, 2, 3, 2879], sorted(rng.choice(np.arange(1, k), 6, replace=False))):
        edges = [0, *cuts, k]
        parts = [ex.matvec_limbs(w[:, a:b], x[:, a:b], BE) for a, b in zip(edges, edges[1:])]
        assert np.array_equal(sum(p[0] for p in parts), hi), cuts
        assert np.array_equal(sum(p[1] for p in parts), lo), cuts
    order = rng.permutation(k)
    hi2, lo2, _ = ex.matvec_limbs(w[:, order], x[:, order], BE)
    assert np.array_equal(hi2, hi) and np.array_equal(lo2, lo)


def test_fp32_sums_in_another_order_do_differ():
    """What the limbs are for: the same terms summed in FP32 by halves differ from one pass in
    some rows (if they never did, the limbs would buy nothing and this test says so)."""
    rng = np.random.default_rng(5)
    w, x = rng.standard_normal((256, 2880)).astype(np.float32), bf16_values(rng, (1, 2880), (-8, 4))
    p = (w * x).astype(np.float32)
    one_pass = np.add.reduce(p, axis=-1, dtype=np.float32)
    halves = np.add.reduce(p[:, :1472], axis=-1, dtype=np.float32) + np.add.reduce(p[:, 1472:], axis=-1, dtype=np.float32)
    assert (one_pass != halves).any()
    hi, lo, bad = ex.matvec_limbs(w, x, BE)
    whole = ex.limbs_value(hi, lo, bad, BE).astype(np.float32)
    a = ex.matvec_limbs(w[:, :1472], x[:, :1472], BE)
    b = ex.matvec_limbs(w[:, 1472:], x[:, 1472:], BE)
    split = ex.limbs_value(a[0] + b[0], a[1] + b[1], a[2] | b[2], BE).astype(np.float32)
    assert np.array_equal(whole.view(np.uint32), split.view(np.uint32))


def test_a_non_finite_product_makes_its_row_nan_and_no_other():
    rng = np.random.default_rng(1)
    w, x = fp32_values(rng, (4, 96)), bf16_values(rng, (1, 96))
    w[2, 17] = np.nan
    w[3, 5] = np.inf
    hi, lo, bad = ex.matvec_limbs(w, x, BE)
    value = ex.limbs_value(hi, lo, bad, BE)
    assert bad.tolist() == [[False, False, True, True]]
    assert np.isnan(value[0, 2]) and np.isnan(value[0, 3])
    assert np.isfinite(value[0, :2]).all()


def test_zero_negative_and_exactly_representable_terms_sum_exactly():
    w = np.array([[0.5, -0.25, 3.0, -0.0, 2.0 ** -40, -(2.0 ** -40)]], dtype=np.float32)
    x = np.array([[2.0, 4.0, -1.0, 7.0, 1.0, 1.0]], dtype=np.float32)
    hi, lo, bad = ex.matvec_limbs(w, x, BE)
    assert float(ex.limbs_value(hi, lo, bad, BE)[0, 0]) == 1.0 - 1.0 - 3.0


def test_a_range_flag_is_set_instead_of_a_refusal_where_asked():
    flag = np.zeros((), dtype=bool)
    ex.partial_limbs(np.array([[1.0, 2.0]], np.float32), np.array([[3.0, 4.0]], np.float32), BE, out_of_range=flag)
    assert not flag
    ex.partial_limbs(np.array([[2.0 ** 30, 1.0]], np.float32), np.array([[2.0 ** 8, 1.0]], np.float32), BE, out_of_range=flag)
    assert flag
    ex.partial_limbs(np.array([[1.0]], np.float32), np.array([[1.0]], np.float32), BE, out_of_range=flag)
    assert flag  # it stays set


def test_ranges_beyond_the_limbs_are_refused():
    with pytest.raises(ValueError, match="2\\^37"):
        ex.matvec_limbs(np.array([[2.0 ** 30]], np.float32), np.array([[2.0 ** 8]], np.float32), BE)
    with pytest.raises(ValueError, match="131072"):
        ex.matvec_limbs(np.zeros((1, ex.MAX_TERMS + 1), np.float32), np.zeros((1, ex.MAX_TERMS + 1), np.float32), BE)


def test_rows_taken_a_few_at_a_time_give_the_same_limbs():
    rng = np.random.default_rng(3)
    w, x = fp32_values(rng, (37, 300)), bf16_values(rng, (2, 300))
    whole = ex.partial_limbs(w, x, BE)
    assert whole.shape == (3, 2, 37) and whole.dtype == np.int64
    assert np.array_equal(ex.partial_limbs(w, x, BE, budget=72 * 300 * 2 * 4), whole)  # 4 rows a pass
    assert np.array_equal(ex.finish(whole, BE).view(np.uint32), ex.limbs_value(*ex.matvec_limbs(w, x, BE), BE).astype(np.float32).view(np.uint32))


def _torch():
    torch = pytest.importorskip("torch")
    return torch


def test_torch_gives_numpy_s_limbs_and_sums():
    """The backend a decoder runs (torch; here on the CPU, on the GPU machines in CUDA) against
    the numpy reference, bit for bit, NaN rows included."""
    torch = _torch()
    rng = np.random.default_rng(11)
    w, x = fp32_values(rng, (64, 2880)), bf16_values(rng, (2, 2880))
    w[5, 9] = np.nan
    want = ex.partial_limbs(w, x, BE)
    got = ex.partial_limbs(torch.from_numpy(w), torch.from_numpy(x), ex.torch_backend())
    assert np.array_equal(got.numpy(), want)
    sums = ex.finish(got, ex.torch_backend()).numpy()
    assert np.array_equal(sums.view(np.uint32), ex.finish(want, BE).view(np.uint32))
    assert np.isnan(sums[:, 5]).all() and np.isfinite(np.delete(sums, 5, axis=1)).all()


def _rank(rank, world, port, w, x, cuts, out):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    be = ex.torch_backend()
    a, b = cuts[rank], cuts[rank + 1]
    limbs = ex.partial_limbs(torch.from_numpy(w[:, a:b]), torch.from_numpy(x[:, a:b]), be)
    dist.all_reduce(limbs)  # int64: exact in any order
    out[rank] = ex.finish(limbs, be).numpy().tobytes()
    dist.destroy_process_group()


def test_ranks_that_split_k_and_sum_their_limbs_give_one_process_s_bits():
    """Three processes over gloo (the CPU), each with an uneven slice of K (gpt-oss's 2880 cut
    on MXFP4 blocks: 960 / 992 / 928), all_reduce their limbs: every rank's FP32 sums are the
    whole's bit for bit -- the property a tensor-parallel decode needs to give one GPU's tokens."""
    torch = _torch()
    import torch.multiprocessing as mp

    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    rng = np.random.default_rng(29)
    w, x = fp32_values(rng, (48, 2880)), bf16_values(rng, (1, 2880))
    whole = ex.finish(ex.partial_limbs(w, x, BE), BE)
    ctx = mp.get_context("spawn")
    out = ctx.Manager().dict()
    port = 29000 + np.random.default_rng().integers(0, 900)
    mp.start_processes(_rank, args=(3, int(port), w, x, [0, 960, 1952, 2880], out), nprocs=3, start_method="spawn")
    for r in range(3):
        got = np.frombuffer(out[r], dtype=np.float32).reshape(whole.shape)
        assert np.array_equal(got.view(np.uint32), whole.view(np.uint32)), r


def test_pairs_meet_their_own_matrices():
    """w [P, N, K]: row p of x against matrix p, as an expert GEMV's picked pairs are; each
    pair's limbs are those of its own matrix alone."""
    rng = np.random.default_rng(8)
    w, x = fp32_values(rng, (3, 20, 160)), bf16_values(rng, (3, 160))
    got = ex.partial_limbs(w, x, BE, budget=72 * 160 * 3 * 7)  # 7 rows a pass
    assert got.shape == (3, 3, 20)
    for p in range(3):
        assert np.array_equal(got[:, p], ex.partial_limbs(w[p], x[p : p + 1], BE)[:, 0])
