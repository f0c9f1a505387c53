"""The decode kernels as PyTorch ops (torch.ops.iris.moe_route, attention_decode) on the GPU
(skipped, saying why, without torch, CUDA or libiris with CUDA). The C++ tests hold the kernels
to their CPU references bit for bit; these hold the ops to oracles written in torch in FP64:

- gemv_bf16: within FP32-sum and BF16 rounding of x W^T + b, at 1, 3 and 17 rows;
- gemv_bf16_f32: within the FP32 sums' bound alone, and gemv_bf16's output is its rounding;
- moe_route: the logits within FP32-sum and BF16 rounding of x W^T + b, the ids torch.topk's
  picks over those logits (ties to the lower index), the weights the FP64 softmax of the
  picked logits; gpt-oss's and Mixtral's shapes, several rows, a NaN logit;
- attention_decode: transformers' eager attention with sinks in FP64 (sliding window, full,
  GQA, positions at both ends of the cache), and NaN outputs for a position past the cache;
- attention_decode_rope: the cache rows written within one BF16 rounding of the FP64 rotation,
  the rest untouched, the output within bound of the FP64 attention over them;
- residual_norm: x' within four BF16 roundings of the FP64 residual sum (exactly torch's BF16
  add for one plain term), h within two of the FP64 RMSNorm of that x';
- gated_silu: torch's own F.silu(gate) * up on BF16 tensors, bit for bit but where torch's
  expf and iris's exponential part at a BF16 rounding boundary (then one BF16 step), on the
  halves of one [R, 2N] output as on tensors of their own, NaN and infinities included;
- all through torch.library.opcheck and torch.compile(fullgraph=True) in a CUDA graph."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here; these run on the GPU machine (bench/gpu_run.sh)", allow_module_level=True)

from iris_archive import _native  # noqa: E402

if _native.library() is None:
    pytest.skip(f"libiris not found: {_native.why_not()}", allow_module_level=True)

import iris_archive.torch  # noqa: F401,E402 - registers torch.ops.iris


def _randn(*shape, seed, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen) * scale).to(torch.bfloat16).cuda()


@pytest.mark.parametrize("rows,experts,k,top_k,bias", [(1, 32, 2880, 4, True), (1, 128, 2880, 4, True), (1, 8, 4096, 2, False),
                                                       (3, 64, 1000, 6, True)])
def test_moe_route_against_fp64(rows, experts, k, top_k, bias):
    x, w = _randn(rows, k, seed=1), _randn(experts, k, seed=2, scale=0.05)
    b = _randn(experts, seed=3, scale=0.5) if bias else None
    ws = torch.zeros(rows, dtype=torch.int32, device="cuda")
    weights, ids, logits = torch.ops.iris.moe_route(x, w, b, top_k, ws)
    exact = x.double() @ w.double().T + (b.double() if bias else 0)
    bound = exact.abs() * 2.0 ** -8 + (x.double().abs() @ w.double().abs().T) * (k + 1) * 2.0 ** -24
    assert ((logits.double() - exact).abs() <= bound).all()
    # torch.topk over the op's own BF16 logits, ties broken towards the lower index by a
    # stable descending sort
    order = torch.sort(logits.float(), dim=-1, descending=True, stable=True).indices[:, :top_k]
    assert torch.equal(ids.long(), order)
    picked = logits.double().gather(1, ids.long())
    want = torch.softmax(picked, dim=-1)
    assert ((weights.double() - want).abs() <= want * 2.0 ** -8 + 1e-30).all()
    assert torch.equal(ws, torch.zeros_like(ws)), "the workspace must be left zero"


def test_moe_route_ranks_nan_first():
    x, w = _randn(1, 256, seed=4), _randn(16, 256, seed=5)
    w[5, 0] = float("nan")
    ws = torch.zeros(1, dtype=torch.int32, device="cuda")
    weights, ids, logits = torch.ops.iris.moe_route(x, w, None, 3, ws)
    assert ids[0, 0].item() == 5 and torch.isnan(logits[0, 5]) and torch.isnan(weights).all()


def _attention_fp64(q, k, v, pos, sinks, window, scale):
    heads, dim = q.shape
    kv_heads = k.shape[0]
    lo = max(0, pos - window + 1) if window else 0
    keys = k[:, lo:pos + 1].double().repeat_interleave(heads // kv_heads, dim=0)
    vals = v[:, lo:pos + 1].double().repeat_interleave(heads // kv_heads, dim=0)
    scores = torch.einsum("hd,hld->hl", q.double(), keys) * scale
    if sinks is not None:
        scores = torch.cat([scores, sinks.double().view(heads, 1)], dim=-1)
    probs = torch.softmax(scores, dim=-1)[:, :pos + 1 - lo]
    return torch.einsum("hl,hld->hd", probs, vals).reshape(1, heads * dim), vals.abs().max()


@pytest.mark.parametrize("heads,kv_heads,dim,max_len,window,sinks", [(64, 8, 64, 88, 128, True), (64, 8, 64, 300, 128, True),
                                                                     (32, 8, 128, 96, 0, False), (12, 4, 80, 50, 0, True)])
def test_attention_decode_against_fp64(heads, kv_heads, dim, max_len, window, sinks):
    q, k, v = _randn(heads, dim, seed=6), _randn(kv_heads, max_len, dim, seed=7), _randn(kv_heads, max_len, dim, seed=8)
    s = _randn(heads, seed=9) if sinks else None
    scale = dim ** -0.5
    for p in (0, max_len // 2, max_len - 1):
        pos = torch.tensor([p], dtype=torch.int64, device="cuda")
        got = torch.ops.iris.attention_decode(q, k, v, pos, s, window, scale)
        want, vmax = _attention_fp64(q, k, v, p, s, window, scale)
        bound = want.abs() * 2.0 ** -8 + vmax * 2.0 ** -12
        assert ((got.double() - want).abs() <= bound).all(), f"position {p}"


def _rope_tables(max_len, dim):
    freqs = torch.arange(max_len, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(torch.bfloat16).cuda(), emb.sin().to(torch.bfloat16).cuda()


def _rotate_fp64(x, cos, sin):
    half = x.shape[-1] // 2
    xd = x.double()
    return xd * cos.double() + torch.cat((-xd[..., half:], xd[..., :half]), dim=-1) * sin.double()


@pytest.mark.parametrize("heads,kv_heads,dim,max_len,window,sinks", [(64, 8, 64, 88, 128, True), (32, 8, 128, 96, 0, False)])
def test_attention_decode_rope_against_fp64(heads, kv_heads, dim, max_len, window, sinks):
    """q and this position's k rotated, k and v written into the caches at pos, then the
    attention: the cache rows within one BF16 rounding of the FP64 rotation (the rest of the
    caches untouched), the output within bound of the FP64 attention over the caches as the op
    left them and q rotated in FP64, rounded to BF16."""
    q, kn, vn = _randn(heads, dim, seed=16), _randn(kv_heads, dim, seed=17), _randn(kv_heads, dim, seed=18)
    k0, v0 = _randn(kv_heads, max_len, dim, seed=19), _randn(kv_heads, max_len, dim, seed=20)
    cos, sin = _rope_tables(max_len, dim)
    s = _randn(heads, seed=21) if sinks else None
    scale = dim ** -0.5
    for p in (0, max_len // 2, max_len - 1):
        k, v = k0.clone(), v0.clone()
        pos = torch.tensor([p], dtype=torch.int64, device="cuda")
        got = torch.ops.iris.attention_decode_rope(q, kn, vn, cos, sin, k, v, pos, s, window, scale)
        k_rot = _rotate_fp64(kn, cos[p], sin[p])
        assert ((k[:, p].double() - k_rot).abs() <= k_rot.abs() * 2.0 ** -8 * 1.0001 + 1e-38).all(), f"position {p}"
        assert torch.equal(v[:, p], vn), f"position {p}"
        others = torch.arange(max_len, device="cuda") != p
        assert torch.equal(k[:, others], k0[:, others]) and torch.equal(v[:, others], v0[:, others])
        # q rotated in FP64 and rounded to BF16 as the kernel rounds it (a rounding tie can leave
        # one element an ulp apart: the looser vmax term covers that)
        q_rot = _rotate_fp64(q, cos[p], sin[p]).to(torch.bfloat16)
        want, vmax = _attention_fp64(q_rot, k, v, p, s, window, scale)
        bound = want.abs() * 2.0 ** -8 + vmax * 2.0 ** -10
        assert ((got.double() - want).abs() <= bound).all(), f"position {p}"


def test_attention_decode_position_past_the_cache_is_nan():
    q, k = _randn(8, 64, seed=1), _randn(2, 16, 64, seed=2)
    out = torch.ops.iris.attention_decode(q, k, k, torch.tensor([16], device="cuda"), None, 0, 0.125)
    assert torch.isnan(out).all()


@pytest.mark.parametrize("rows,n,k,bias", [(1, 5120, 2880, True), (1, 2880, 4096, True), (3, 300, 1000, False), (17, 64, 512, True)])
def test_gemv_bf16_against_fp64(rows, n, k, bias):
    x, w = _randn(rows, k, seed=11), _randn(n, k, seed=12, scale=0.05)
    b = _randn(n, seed=13, scale=0.5) if bias else None
    got = torch.ops.iris.gemv_bf16(x, w, b)
    exact = x.double() @ w.double().T + (b.double() if bias else 0)
    bound = exact.abs() * 2.0 ** -8 + (x.double().abs() @ w.double().abs().T) * (k + 1) * 2.0 ** -24
    assert got.shape == (rows, n) and ((got.double() - exact).abs() <= bound).all()


@pytest.mark.parametrize("rows,n,k,bias", [(1, 32064, 2880, False), (3, 300, 1000, True), (17, 64, 512, False)])
def test_gemv_bf16_f32_is_the_unrounded_sum(rows, n, k, bias):
    """gemv_bf16_f32 (a dense lm_head's logits): within the FP32 sums' bound of the exact
    product (no BF16 rounding), and gemv_bf16's output is its BF16 rounding."""
    x, w = _randn(rows, k, seed=31), _randn(n, k, seed=32, scale=0.05)
    b = _randn(n, seed=33, scale=0.5) if bias else None
    got = torch.ops.iris.gemv_bf16_f32(x, w, b)
    assert got.shape == (rows, n) and got.dtype == torch.float32
    exact = x.double() @ w.double().T + (b.double() if bias else 0)
    magnitude = x.double().abs() @ w.double().abs().T + (b.double().abs() if bias else 0)
    assert ((got.double() - exact).abs() <= magnitude * (k + 1) * 2.0 ** -24).all()
    assert torch.equal(got.to(torch.bfloat16), torch.ops.iris.gemv_bf16(x, w, b))


@pytest.mark.parametrize("rows,terms,n,bias,weights,weight_in_f32", [(1, 4, 2880, True, True, True), (1, 1, 4096, False, False, False),
                                                                       (1, 2, 4096, False, True, False), (3, 3, 1000, True, True, True),
                                                                       (2, 1, 1003, False, False, True), (1, 1, 20000, False, False, False)])
def test_residual_norm_against_fp64(rows, terms, n, bias, weights, weight_in_f32):
    x, y, w = _randn(rows, n, seed=21), _randn(rows * terms, n, seed=22, scale=0.5), _randn(n, seed=23)
    b = _randn(32, n, seed=24, scale=0.5) if bias else None
    ids = torch.randint(0, 32, (rows, terms), generator=torch.Generator().manual_seed(26), dtype=torch.int32).cuda() if bias else None
    wt = _randn(rows, terms, seed=25, scale=0.5) if weights else None
    xo, h = torch.ops.iris.residual_norm(x, y, w, 1e-5, weight_in_f32, b, ids, wt)
    assert xo.shape == h.shape == (rows, n) and xo.dtype == h.dtype == torch.bfloat16
    # x': four BF16 roundings at most (2^-8 relative each) on the terms' magnitudes
    terms_fp64 = y.double().view(rows, terms, n)
    if bias:
        terms_fp64 = terms_fp64 + b.double()[ids.long()]
    if weights:
        terms_fp64 = terms_fp64 * wt.double().unsqueeze(-1)
    exact = x.double() + terms_fp64.sum(1)
    magnitude = x.double().abs() + terms_fp64.abs().sum(1)
    assert ((xo.double() - exact).abs() <= magnitude * 2.0 ** -6 + 1e-38).all()
    if terms == 1 and not bias and not weights:
        assert torch.equal(xo, x + y)  # one rounding: torch's own BF16 add
    # h: two BF16 roundings of the FP64 norm of the op's own x'
    xd = xo.double()
    want = w.double() * xd / torch.sqrt((xd * xd).mean(-1, keepdim=True) + 1e-5)
    assert ((h.double() - want).abs() <= want.abs() * (2.0 ** -7 + 2.0 ** -14) + 1e-37).all()


def test_residual_norm_refuses_mismatched_shapes():
    x, w = _randn(1, 64, seed=1), _randn(64, seed=2)
    with pytest.raises(iris_archive.IrisError):
        torch.ops.iris.residual_norm(x, _randn(1, 60, seed=3), w, 1e-5, True)
    with pytest.raises(iris_archive.IrisError):
        torch.ops.iris.residual_norm(x, _randn(1, 64, seed=3), _randn(32, seed=4), 1e-5, True)
    with pytest.raises(iris_archive.IrisError):  # a bias without ids
        torch.ops.iris.residual_norm(x, _randn(2, 64, seed=3), w, 1e-5, True, _randn(4, 64, seed=5))


@pytest.mark.parametrize("rows,n,halves", [(1, 14336, True), (2, 14336, False), (3, 1003, True), (2, 5, False), (1, 4096, False)])
def test_gated_silu_is_torchs_silu_times_up(rows, n, halves):
    import torch.nn.functional as F

    if halves:
        both = _randn(rows, 2 * n, seed=31, scale=4.0)
        gate, up = both[:, :n], both[:, n:]
    else:
        gate, up = _randn(rows, n, seed=31, scale=4.0), _randn(rows, n, seed=32, scale=4.0)
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), -100.0, 88.5, -88.5, 1e-38, 3e38],
                            dtype=torch.bfloat16, device="cuda")
    k = min(n, specials.numel())
    gate[0, :k] = specials[:k]
    up[-1, -k:] = specials[:k]
    got = torch.ops.iris.gated_silu(gate, up)
    want = F.silu(gate) * up  # transformers' step: two BF16 roundings
    assert got.shape == (rows, n) and got.dtype == torch.bfloat16
    same = (got == want) | (got.isnan() & want.isnan())
    assert same.float().mean().item() >= 0.995
    off = ~same
    if off.any():  # a SiLU at a rounding boundary: one BF16 step of the product
        g, w = got[off].double(), want[off].double()
        assert (g.isfinite() & w.isfinite()).all()
        assert ((g - w).abs() <= w.abs() * 2.0 ** -7 * 1.01 + 1e-40).all()
    bits = lambda t: t.view(torch.int16)  # noqa: E731 - NaNs compared as bits (every NaN out is 0x7fc0)
    assert torch.equal(bits(torch.ops.iris.gated_silu(gate.contiguous(), up.contiguous())), bits(got))  # strided rows or not
    assert torch.equal(bits(torch.ops.iris.gated_silu(gate[0], up[0])), bits(got[0]))  # a 1-D row
    assert torch.equal(bits(got[got.isnan()]), torch.full_like(bits(got[got.isnan()]), 0x7fc0))


def test_gated_silu_refuses_what_it_cannot_take():
    g = _randn(2, 64, seed=1)
    with pytest.raises(iris_archive.IrisError):
        torch.ops.iris.gated_silu(g, _randn(2, 63, seed=2))
    with pytest.raises(iris_archive.IrisError):
        torch.ops.iris.gated_silu(g, g.float())
    with pytest.raises(iris_archive.IrisError):  # columns not contiguous
        torch.ops.iris.gated_silu(g[:, ::2], g[:, 1::2])


def test_ops_pass_opcheck_and_compile_into_a_graph():
    x, w, b = _randn(1, 512, seed=1), _randn(32, 512, seed=2), _randn(32, seed=3)
    ws = torch.zeros(1, dtype=torch.int32, device="cuda")
    q, k, v = _randn(16, 64, seed=4), _randn(4, 40, 64, seed=5), _randn(4, 40, 64, seed=6)
    s = _randn(16, seed=7)
    pos = torch.tensor([17], dtype=torch.int64, device="cuda")
    torch.library.opcheck(torch.ops.iris.moe_route.default, (x, w, b, 4, ws))
    torch.library.opcheck(torch.ops.iris.attention_decode.default, (q, k, v, pos, s, 8, 0.125))
    torch.library.opcheck(torch.ops.iris.gemv_bf16.default, (x, w, b))
    torch.library.opcheck(torch.ops.iris.gemv_bf16_f32.default, (x, w, None))
    cos, sin = _rope_tables(40, 64)
    torch.library.opcheck(torch.ops.iris.attention_decode_rope.default,
                          (q, _randn(4, 64, seed=11), _randn(4, 64, seed=12), cos, sin, k.clone(), v.clone(), pos, s, 8, 0.125))
    y4, nb = _randn(4, 512, seed=8), _randn(32, 512, seed=9)
    ids = torch.tensor([[3, 0, 31, 7]], dtype=torch.int32, device="cuda")
    torch.library.opcheck(torch.ops.iris.residual_norm.default, (x, y4, w[0], 1e-5, True, nb, ids, _randn(1, 4, seed=10)))
    gu = _randn(2, 1024, seed=13)
    torch.library.opcheck(torch.ops.iris.gated_silu.default, (gu[:, :512], gu[:, 512:]))

    def step(x, q, pos):
        weights, ids, _ = torch.ops.iris.moe_route(x, w, b, 4, ws)
        x2, h = torch.ops.iris.residual_norm(x, y4, w[0], 1e-5, True, nb, ids, weights)
        return (weights, ids, torch.ops.iris.attention_decode(q, k, v, pos, s, 8, 0.125), x2, h,
                torch.ops.iris.gated_silu(gu[:, :512], gu[:, 512:]))

    eager = step(x, q, pos)
    compiled = torch.compile(step, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        got = compiled(x, q, pos)
    for a, b_ in zip(eager, got):
        assert torch.equal(a, b_)
