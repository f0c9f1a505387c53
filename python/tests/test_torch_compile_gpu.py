"""iris's kernels as PyTorch custom ops (iris/_ops.py, torch.ops.iris.*) on the GPU (skipped,
saying why, without torch, CUDA or libiris with CUDA):

- torch.library.opcheck of every op: its schema, its fake (meta) implementation against the
  real one, and its registration for the compiler's passes;
- an IrisLinear compiled with torch.compile(fullgraph=True), and with mode="reduce-overhead"
  (CUDA graphs), gives the eager GEMV's result bit for bit at 1, 7 and 16 rows, in every
  format; so does the grouped expert GEMV;
- an IrisLinear captured by hand in a CUDA graph and replayed on new input gives the eager
  result bit for bit (no host synchronisation, allocation or copy inside the op)."""

import functools

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here; these run on the GPU machine (bench/gpu_run.sh)", allow_module_level=True)

from iris_archive import _native  # noqa: E402

if _native.library() is None:
    pytest.skip(f"libiris not found: {_native.why_not()}", allow_module_level=True)

import iris_archive.torch as itorch  # noqa: E402

FORMATS = [("llama-bf16", ("--quant", "mxfp4")), ("llama-bf16", ("--quant", "nf4")), ("llama-bf16", ("--quant", "fp8-block")),
           ("llama-bf16", ("--quant", "fp8-channel")), ("llama-nf4-dq", ())]
WEIGHT = "model.layers.0.mlp.down_proj.weight"


def _weight(converted, fixture, options):
    sd = itorch.load(converted(fixture, *options))
    return sd[WEIGHT]


def _x(rows, k, seed):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(rows, k, generator=gen) * 2 - 1).to(torch.bfloat16).cuda()


def test_opcheck_every_op(converted):
    q = _weight(converted, "llama-bf16", ("--quant", "nf4"))
    n, k = q.shape
    torch.library.opcheck(torch.ops.iris.gemv.default, (_x(3, k, 1), q._handle, n))
    torch.library.opcheck(torch.ops.iris.gemv_f32.default, (_x(3, k, 1), q._handle, n))
    # The FP32 output is the BF16 one before its rounding: rounded, the same bits.
    x = _x(5, k, 7)
    assert torch.equal(torch.ops.iris.gemv_f32(x, q._handle, n).to(torch.bfloat16), torch.ops.iris.gemv(x, q._handle, n))
    torch.library.opcheck(torch.ops.iris.dequantize.default, (q._handle, list(q.shape), torch.bfloat16, q.device))
    sd = itorch.load(converted("gptoss-mxfp4"))
    stack = sd["model.layers.0.mlp.experts.gate_up_proj"]
    e, n2, k2 = stack.shape
    torch.library.opcheck(torch.ops.iris.gemv_matrix.default, (_x(2, k2, 2), stack._handle, e - 1, n2))
    experts = itorch.Experts(stack)
    ids = torch.tensor([0, e - 1, 1, 0], dtype=torch.int32, device="cuda")
    rows = torch.tensor([0, 0, 1, 1], dtype=torch.int32, device="cuda")
    torch.library.opcheck(torch.ops.iris.gemv_experts.default, (_x(2, k2, 3), ids, rows, experts._handle, experts.n))
    torch.library.opcheck(torch.ops.iris.gemv_experts.default, (_x(4, k2, 4), ids, None, experts._handle, experts.n))
    torch.library.opcheck(torch.ops.iris.gemv_experts_f32.default, (_x(2, k2, 3), ids, rows, experts._handle, experts.n))
    # As for gemv_f32: the FP32 sums, rounded, are the BF16 launch's bits.
    x2 = _x(2, k2, 8)
    f32 = torch.ops.iris.gemv_experts_f32(x2, ids, rows, experts._handle, experts.n)
    assert f32.dtype == torch.float32
    assert torch.equal(f32.to(torch.bfloat16), torch.ops.iris.gemv_experts(x2, ids, rows, experts._handle, experts.n))


@pytest.mark.parametrize("fixture,options", FORMATS)
def test_compiled_linear_equals_eager(converted, fixture, options):
    torch._dynamo.reset()
    q = _weight(converted, fixture, options)
    lin = itorch.IrisLinear(q)
    compiled = torch.compile(lin, fullgraph=True)
    graphed = torch.compile(lin, fullgraph=True, mode="reduce-overhead")
    for rows in (1, 7, 16):
        for seed in (1, 2, 3):  # reduce-overhead records on the first calls, then replays
            x = _x(rows, q.shape[1], seed + rows)
            want = lin(x)
            assert torch.equal(compiled(x), want), f"{fixture} {options}: rows {rows}, torch.compile"
            assert torch.equal(graphed(x).clone(), want), f"{fixture} {options}: rows {rows}, reduce-overhead"


def test_compiled_expert_gemv_equals_eager(converted):
    torch._dynamo.reset()
    sd = itorch.load(converted("gptoss-mxfp4"))
    experts = itorch.Experts(sd["model.layers.0.mlp.experts.gate_up_proj"])
    gen = torch.Generator().manual_seed(5)
    tokens, top_k = 3, 2
    ids = torch.randint(0, experts.count, (tokens, top_k), generator=gen).cuda()
    rows = torch.arange(tokens).repeat_interleave(top_k).cuda()
    f = torch.compile(lambda x, i, r: experts.gemv(x, i, r), fullgraph=True)
    for seed in (1, 2):
        x = _x(tokens, experts.k, seed)
        assert torch.equal(f(x, ids, rows), experts.gemv(x, ids, rows))


@pytest.mark.parametrize("fixture,options", FORMATS[:3])
def test_linear_captured_in_a_cuda_graph(converted, fixture, options):
    q = _weight(converted, fixture, options)
    lin = itorch.IrisLinear(q)
    static_x = _x(4, q.shape[1], 1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture, as torch's docs ask
        lin(static_x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = lin(static_x)
    for seed in (2, 3):
        x = _x(4, q.shape[1], seed)
        static_x.copy_(x)
        g.replay()
        assert torch.equal(static_y, lin(x)), f"{fixture} {options}: replay {seed}"


@pytest.mark.parametrize("quant", ["nf4", "mxfp4"])
def test_patched_llama_decodes_compiled_and_graphed(converted, quant):
    """A transformers Llama patched onto iris, its forward under torch.compile(fullgraph=True)
    with the cudagraphs backend (the same aten ops as eager, replayed as CUDA graphs), decoding
    16 greedy tokens with transformers' static cache: the tokens eager decoding gives."""
    transformers = pytest.importorskip("transformers")
    from conftest import FIXTURES

    torch._dynamo.reset()
    model = transformers.AutoModelForCausalLM.from_pretrained(FIXTURES / "llama-bf16", dtype=torch.bfloat16).to("cuda").eval()
    keep = itorch.patch(model, converted("llama-bf16", "--quant", quant))
    prompts = torch.tensor([[1, 15, 27, 8, 99, 3, 42, 7], [1, 200, 5, 61, 17, 33, 2, 90]], device="cuda")
    # disable_compile: transformers would otherwise compile a static-cache decode itself
    # (inductor), so that "eager" is eager and the compiled run is the forward compiled here.
    args = dict(attention_mask=torch.ones_like(prompts), max_new_tokens=16, do_sample=False, pad_token_id=0,
                cache_implementation="static", disable_compile=True)
    with torch.no_grad():
        eager = model.generate(prompts, **args)
        model.forward = torch.compile(model.forward, backend="cudagraphs", fullgraph=True)
        compiled_forward = model.forward
        calls = []
        @functools.wraps(compiled_forward)  # generate reads the forward's signature
        def counted(*a, **k):
            calls.append(1)
            return compiled_forward(*a, **k)

        model.forward = counted
        graphed = model.generate(prompts, **args)
        again = model.generate(prompts, **args)  # replays
    assert len(calls) == 2 * 16, f"the compiled forward ran {len(calls)} times"
    assert torch.equal(graphed, eager) and torch.equal(again, eager), f"{quant}: {graphed.tolist()} != {eager.tolist()}"
    del keep
