"""GPTQ (v1, v2), AWQ (GEMM) and compressed-tensors pack-quantized checkpoints read by
`iris convert`, against an oracle written here from the formats' descriptions (FORMATS.md
7.1-7.3), not from iris's decoder: numpy packs random codes, zero points and scales the way
each tool lays them out, numpy's float16 arithmetic (one rounding of the exact product) or a
bit-level BF16 rounding gives the weights, and the archive `iris convert` writes must hold
exactly those. Then the hostile cases: zero, NaN and huge scales, a g_idx that is not a
permutation of groups, GPTQ zero points of the other checkpoint_format, missing or misshapen
companions -- each refused with one line naming the file and tensor, and no archive."""

import json
import subprocess

import numpy as np
import pytest

import iris_archive as iris
from conftest import IRIS, assert_exports_back, write_safetensors

RNG = np.random.default_rng(20261129)


# --- a safetensors writer (the format's own rules: 8-byte length, JSON header, data) ---

def write_snapshot(folder, tensors, quantization_config, dtype="float16"):
    """tensors: name -> numpy array, or (array, "BF16") for BF16 bit patterns held as uint16."""
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "model.safetensors", tensors)
    config = {"model_type": "llama", "dtype": dtype}
    if quantization_config is not None:
        config["quantization_config"] = quantization_config
    (folder / "config.json").write_text(json.dumps(config))


# --- the arithmetic: w = (q - z) * s, rounded once to the scale's dtype ---

def bf16_bits_round(x32):
    """FP32 -> BF16 bit patterns, nearest even (NaN kept quiet)."""
    u = x32.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x32)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def dequantize(q, z, s, scale_dtype):
    """q [N, K] codes, z and s [N, K] per column (already spread by group)."""
    diff = (q.astype(np.int64) - z.astype(np.int64))
    if scale_dtype == "F16":
        return (s.astype(np.float16) * diff.astype(np.float16)).astype(np.float32)  # numpy rounds the product once
    bits = bf16_bits_round(s.astype(np.float32) * diff.astype(np.float32))
    return (bits.astype(np.uint32) << 16).view(np.float32)


def random_scales(n, groups, scale_dtype):
    s = (RNG.standard_normal((n, groups)) * 0.01).astype(np.float32)
    s[0, 0] = -s[0, 0]  # negative scales decode as the tools do
    s.flat[1] = 6e-8 if scale_dtype == "F16" else 1e-39  # subnormal in the scale's dtype
    s[s == 0] = 1e-3
    if scale_dtype == "F16":
        return s.astype(np.float16)
    return bf16_bits_round(s)


def scale_values(s, scale_dtype):
    return s.astype(np.float32) if scale_dtype == "F16" else (s.astype(np.uint32) << 16).view(np.float32)


# --- packers, from FORMATS.md's descriptions ---

def pack_stream(values, bits, axis):
    """Codes along `axis` as one little-endian bit stream of int32 words (GPTQ; 3 bits straddle)."""
    v = np.moveaxis(values.astype(np.uint64), axis, 0)
    count = v.shape[0]
    words = np.zeros(((count * bits + 31) // 32,) + v.shape[1:], dtype=np.uint64)
    for i in range(count):
        bit = i * bits
        words[bit // 32] |= (v[i] << np.uint64(bit % 32)) & np.uint64(0xFFFFFFFF)
        if bit % 32 + bits > 32:
            words[bit // 32 + 1] |= v[i] >> np.uint64(32 - bit % 32)
    return np.moveaxis(words.astype(np.uint32).view(np.int32), 0, axis)


def pack_awq(values):
    """[R, N] 4-bit codes -> [R, N/8]: word w holds columns 8w + (0, 2, 4, 6, 1, 3, 5, 7) at nibbles 0..7."""
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    r, n = values.shape
    words = np.zeros((r, n // 8), dtype=np.uint32)
    for j, col in enumerate(order):
        words |= values[:, col::8].astype(np.uint32) << np.uint32(4 * j)
    return words.view(np.int32)


def pack_words(values, bits):
    """[R, C] codes -> [R, ceil(C / (32 / bits))]: 32 / bits codes a word along C (compressed-tensors)."""
    per = 32 // bits
    r, c = values.shape
    padded = np.zeros((r, -(-c // per) * per), dtype=np.uint32)
    padded[:, :c] = values
    words = np.zeros((r, padded.shape[1] // per), dtype=np.uint32)
    for j in range(per):
        words |= padded[:, j::per] << np.uint32(bits * j)
    return words.view(np.int32)


# --- the cases ---

def gptq_case(bits, group, v2, sym, desc_act, n=64, k=256):
    groups = -(-k // group)
    q = RNG.integers(0, 1 << bits, size=(n, k))
    zero = np.full((n, groups), 1 << (bits - 1)) if sym else RNG.integers(0, 1 << bits, size=(n, groups))
    if not sym:
        zero[0, :] = 0  # v1's zero - 1 of a zero of 0 borrows from the field above (or wraps at the top)
    s = random_scales(n, groups, "F16")
    if desc_act:
        perm = RNG.permutation(k)
        g_idx = np.empty(k, dtype=np.int32)
        g_idx[perm] = np.arange(k) // group
    else:
        g_idx = (np.arange(k) // group).astype(np.int32)
    if v2:
        qzeros = pack_stream(zero.T, bits, 1)  # [G, N * bits / 32]
    elif bits == 3:
        qzeros = pack_stream((zero.T - 1) & 7, bits, 1)  # per field, (zero - 1) & 7
    else:
        # GPTQModel's v1: one subtracted from every field of the word at once (0x11111111 at 4
        # bits), mod 2^32, so a zero of 0 borrows from the field above.
        ones = {2: 0x55555555, 4: 0x11111111, 8: 0x01010101}[bits]
        words = pack_stream(zero.T, bits, 1).view(np.uint32).astype(np.int64)
        qzeros = ((words - ones) % (1 << 32)).astype(np.uint32).view(np.int32)
    tensors = {
        "m.p.qweight": pack_stream(q.T, bits, 0),                     # [K * bits / 32, N]
        "m.p.qzeros": qzeros,
        "m.p.scales": np.ascontiguousarray(s.T),                      # [G, N]
        "m.p.g_idx": g_idx,
        "m.p.bias": RNG.standard_normal(n).astype(np.float16),
    }
    qc = {"quant_method": "gptq", "bits": bits, "group_size": group if group < k else -1, "desc_act": desc_act, "sym": sym,
          "checkpoint_format": "gptq_v2" if v2 else "gptq"}
    expected = dequantize(q, zero[:, g_idx], s[:, g_idx], "F16")
    return tensors, qc, expected


def awq_case(group, n=64, k=256):
    groups = k // group
    q = RNG.integers(0, 16, size=(k, n))
    zero = RNG.integers(0, 16, size=(groups, n))
    s = random_scales(n, groups, "F16").T.copy()
    tensors = {"m.p.qweight": pack_awq(q), "m.p.qzeros": pack_awq(zero), "m.p.scales": s}
    qc = {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True, "version": "gemm"}
    gi = np.arange(k) // group
    expected = dequantize(q.T, zero[gi].T, s[gi].T, "F16")
    return tensors, qc, expected


def ct_case(bits, group, sym, actorder, scale_dtype="BF16", n=64, k=200):
    groups = 1 if group is None else -(-k // group)
    size = k if group is None else group
    half = 1 << (bits - 1)
    q = RNG.integers(-half, half, size=(n, k))  # signed codes, stored + 2^(bits-1)
    zero = np.zeros((n, groups), dtype=np.int64) if sym else RNG.integers(-half, half, size=(n, groups))
    s = random_scales(n, groups, scale_dtype)
    g_idx = None
    if actorder:
        perm = RNG.permutation(k)
        g_idx = np.empty(k, dtype=np.int32)
        g_idx[perm] = np.arange(k) // size
    cols = g_idx if g_idx is not None else np.arange(k) // size
    tensors = {"m.p.weight_packed": pack_words(q + half, bits),
               "m.p.weight_scale": (s, scale_dtype) if scale_dtype == "BF16" else s,
               "m.p.weight_shape": np.array([n, k], dtype=np.int64)}
    if not sym:
        tensors["m.p.weight_zero_point"] = pack_words((zero + half).T, bits).T.copy()  # packed along N: [ceil(N / per), G]
    if g_idx is not None:
        tensors["m.p.weight_g_idx"] = g_idx
    weights = {"num_bits": bits, "type": "int", "symmetric": sym, "strategy": "channel" if group is None else "group",
               "group_size": group, "actorder": "group" if actorder else None}
    qc = {"quant_method": "compressed-tensors", "format": "pack-quantized",
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "format": "pack-quantized"}}}
    expected = dequantize(q, zero[:, cols], scale_values(s, scale_dtype)[:, cols].astype(np.float32) if scale_dtype == "BF16"
                          else s[:, cols], scale_dtype)
    return tensors, qc, expected


CASES = {
    "gptq-4bit-g128-sym-v1": lambda: gptq_case(4, 128, False, True, False),
    "gptq-4bit-g64-asym-descact-v1": lambda: gptq_case(4, 64, False, False, True),
    "gptq-8bit-channel-sym-v2": lambda: gptq_case(8, 256, True, True, False),
    "gptq-3bit-g128-asym-v1": lambda: gptq_case(3, 128, False, False, False),
    "gptq-3bit-g32-asym-descact-v2": lambda: gptq_case(3, 32, True, False, True, n=96),
    "gptq-2bit-g64-asym-v2": lambda: gptq_case(2, 64, True, False, False),
    "gptq-2bit-g64-asym-v1": lambda: gptq_case(2, 64, False, False, False),
    "gptq-8bit-g128-asym-v1": lambda: gptq_case(8, 128, False, False, False),
    "awq-g128": lambda: awq_case(128),
    "awq-g64-n72": lambda: awq_case(64, n=72),
    "ct-w4-g128-sym": lambda: ct_case(4, 128, True, False),
    "ct-w4-g64-asym-n70": lambda: ct_case(4, 64, False, False, n=70),
    "ct-w8-channel-sym-f16": lambda: ct_case(8, None, True, False, scale_dtype="F16"),
    "ct-w8-g32-asym": lambda: ct_case(8, 32, False, False),
    "ct-w4-g32-actorder": lambda: ct_case(4, 32, True, True),
    "ct-w2-g64-sym": lambda: ct_case(2, 64, True, False),
}


def convert(snapshot, out, *options):
    return subprocess.run([IRIS, "convert", str(snapshot), "-o", str(out), "-q", *options], capture_output=True, text=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_decoded_weights_are_the_oracle_s_bit_for_bit(tmp_path, case):
    tensors, qc, expected = CASES[case]()
    write_snapshot(tmp_path / "snap", tensors, qc)
    r = convert(tmp_path / "snap", tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    a = iris.open(tmp_path / "a.iris")
    a.verify()
    t = a.tensors["m.p.weight"]
    # carried as stored: int_group (FORMAT.md 4.5), decoded by the numpy reader and by libiris
    assert t.format == "int_group" and list(t.shape) == list(expected.shape)
    for backend in ("numpy", "native"):
        got32 = t.dequantize(backend=backend)
        same = (got32.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got32) & np.isnan(expected))
        assert same.all(), f"{case} ({backend}): {np.count_nonzero(~same)} weights differ, first at {np.argwhere(~same)[0]}"
    assert not any(name.startswith("m.p.q") or "weight_packed" in name for name in a.tensors)  # the companions became the weight
    # and the same values through a requantization's decoder: --quant bf16 is the oracle rounded once
    r = convert(tmp_path / "snap", tmp_path / "b.iris", "--quant", "bf16")
    assert r.returncode == 0, r.stderr
    bf = iris.open(tmp_path / "b.iris").tensors["m.p.weight"].numpy().view(np.uint16)  # (ml_dtypes bfloat16 or uint16 bits)
    assert (bf == _bf16_bits(expected)).all(), case


def _bf16_bits(x32):
    return bf16_bits_round(x32)


@pytest.mark.parametrize("case", ["gptq-4bit-g128-sym-v1", "awq-g128", "ct-w4-g64-asym-n70"])
def test_requantized_to_every_target(tmp_path, case):
    tensors, qc, _ = CASES[case]()
    write_snapshot(tmp_path / "snap", tensors, qc)
    for quant in ["mxfp4", "nf4", "fp8-block", "bf16"]:
        r = convert(tmp_path / "snap", tmp_path / f"{quant}.iris", "--quant", quant)
        assert r.returncode == 0, f"{quant}: {r.stderr}"


def refused(tmp_path, tensors, qc, *needles, options=()):
    write_snapshot(tmp_path / "snap", tensors, qc)
    r = convert(tmp_path / "snap", tmp_path / "out.iris", *options)
    assert r.returncode != 0, "accepted"
    assert r.stderr.count("\n") == 1, r.stderr
    for needle in needles:
        assert needle in r.stderr, r.stderr
    assert not (tmp_path / "out.iris").exists()
    return r


@pytest.mark.parametrize("value,word", [(0.0, "zero"), (np.nan, "NaN"), (np.inf, "infinite")])
def test_suspect_scales_are_refused_unless_allowed(tmp_path, value, word):
    tensors, qc, _ = gptq_case(4, 128, False, True, False)
    tensors["m.p.scales"][1, 5] = value
    refused(tmp_path, tensors, qc, "model.safetensors: tensor 'm.p.scales'", "output row 5, group 1 is " + word)
    # (a non-finite weight also needs --allow-nonfinite: the pipeline's own guard)
    extra = () if value == 0 else ("--allow-nonfinite",)
    r = convert(tmp_path / "snap", tmp_path / "allowed.iris", "--allow-suspect-scales", *extra)
    assert r.returncode == 0, r.stderr
    w = iris.open(tmp_path / "allowed.iris").tensors["m.p.weight"].dequantize()
    row = w[5, 128:]  # group 1 of row 5, as the tool decodes it
    if np.isnan(value):
        assert np.isnan(row).all()
    elif value == 0:
        assert (row == 0).all()


def test_huge_scales_overflow_as_the_tool_s_float16_does(tmp_path):
    tensors, qc, _ = gptq_case(4, 128, True, False, False)
    tensors["m.p.scales"][:] = np.float16(60000)
    # Carried as stored, the archive holds the tool's scales and codes: decoding overflows as the
    # tool's float16 does. Decoded to requantize, the pipeline's guard refuses the infinities.
    write_snapshot(tmp_path / "snap", tensors, qc)
    assert convert(tmp_path / "snap", tmp_path / "a.iris").returncode == 0
    for backend in ("numpy", "native"):
        w = iris.open(tmp_path / "a.iris").tensors["m.p.weight"].dequantize(backend=backend)
        assert np.isinf(w).any() and not np.isnan(w).any()
    refused(tmp_path, tensors, qc, "non-finite", options=("--quant", "bf16"))
    assert convert(tmp_path / "snap", tmp_path / "b.iris", "--quant", "bf16", "--allow-nonfinite").returncode == 0


def test_g_idx_not_a_permutation_of_groups_is_refused(tmp_path):
    tensors, qc, _ = gptq_case(4, 64, False, False, True)
    tensors["m.p.g_idx"][:70] = 0  # group 0 now holds 70+ columns
    refused(tmp_path, tensors, qc, "tensor 'm.p.g_idx'", "not a permutation of groups")


def test_g_idx_contradicting_desc_act_false_is_refused(tmp_path):
    tensors, qc, _ = gptq_case(4, 64, False, False, True)
    qc["desc_act"] = False
    refused(tmp_path, tensors, qc, "tensor 'm.p.g_idx'", "desc_act false")
    assert convert(tmp_path / "snap", tmp_path / "ok.iris", "--allow-g-idx-mismatch").returncode == 0


def test_g_idx_out_of_range_is_refused_even_when_allowed(tmp_path):
    tensors, qc, _ = gptq_case(4, 64, False, False, True)
    tensors["m.p.g_idx"][3] = 99
    refused(tmp_path, tensors, qc, "tensor 'm.p.g_idx'", "group 99", options=("--allow-g-idx-mismatch",))


@pytest.mark.parametrize("declared_v2", [False, True])
def test_gptq_zeros_of_the_other_convention_are_refused(tmp_path, declared_v2):
    tensors, qc, _ = gptq_case(4, 128, not declared_v2, True, False)  # written in the other convention
    qc["checkpoint_format"] = "gptq_v2" if declared_v2 else "gptq"
    refused(tmp_path, tensors, qc, "tensor 'm.p.qzeros'", "the other checkpoint_format's convention")
    assert convert(tmp_path / "snap", tmp_path / "ok.iris", "--allow-zero-convention-mismatch").returncode == 0


@pytest.mark.parametrize("drop", ["m.p.scales", "m.p.qzeros"])
def test_a_missing_gptq_companion_is_refused(tmp_path, drop):
    tensors, qc, _ = gptq_case(4, 128, False, True, False)
    del tensors[drop]
    refused(tmp_path, tensors, qc, "tensor 'm.p.qweight'", drop)


def test_declared_group_size_disagreeing_with_the_scales_is_refused(tmp_path):
    tensors, qc, _ = gptq_case(4, 128, False, True, False)
    qc["group_size"] = 64
    refused(tmp_path, tensors, qc, "tensor 'm.p.scales'", "declared and stored group size disagree")


def test_gptq_desc_act_without_g_idx_is_refused(tmp_path):
    tensors, qc, _ = gptq_case(4, 64, False, False, True)
    del tensors["m.p.g_idx"]
    refused(tmp_path, tensors, qc, "tensor 'm.p.qweight'", "desc_act true")


def test_packed_codes_without_a_method_are_refused_by_name(tmp_path):
    tensors, qc, _ = gptq_case(4, 128, False, True, False)
    refused(tmp_path, tensors, None, "GPTQ or AWQ")


def test_compressed_tensors_zero_point_on_a_symmetric_group_is_refused(tmp_path):
    tensors, qc, _ = ct_case(4, 64, False, False)
    qc["config_groups"]["group_0"]["weights"]["symmetric"] = True
    refused(tmp_path, tensors, qc, "tensor 'm.p.weight_zero_point'", "symmetric")


def test_compressed_tensors_misshapen_scales_are_refused(tmp_path):
    tensors, qc, _ = ct_case(4, 64, True, False, scale_dtype="F16")
    tensors["m.p.weight_scale"] = tensors["m.p.weight_scale"][:, :2].copy()
    refused(tmp_path, tensors, qc, "tensor 'm.p.weight_packed'", "fits no config group")


def test_compressed_tensors_without_config_is_read_from_its_shapes(tmp_path):
    tensors, _, expected = ct_case(4, 64, False, False, scale_dtype="F16")
    write_snapshot(tmp_path / "snap", tensors, None)
    r = convert(tmp_path / "snap", tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    got = iris.open(tmp_path / "a.iris").tensors["m.p.weight"].dequantize()
    assert (got.view(np.uint32) == expected.view(np.uint32)).all()


def test_compressed_tensors_g_idx_holding_minus_one_means_column_order(tmp_path):
    # The tool initialises g_idx to -1 and ignores the whole tensor if any entry is still -1.
    tensors, qc, expected = ct_case(4, 64, True, False)
    g = (np.arange(200) // 64).astype(np.int32)[::-1].copy()  # a real permutation of groups, but...
    g[7] = -1  # ...one unset entry: the tool decodes in column order
    tensors["m.p.weight_g_idx"] = g
    qc["config_groups"]["group_0"]["weights"]["actorder"] = "group"
    write_snapshot(tmp_path / "snap", tensors, qc)
    r = convert(tmp_path / "snap", tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    got = iris.open(tmp_path / "a.iris").tensors["m.p.weight"].dequantize()
    assert (got.view(np.uint32) == expected.view(np.uint32)).all()
    # the g_idx the decode ignores is carried as a tensor of its own, so export gives it back
    assert iris.open(tmp_path / "a.iris").tensors["m.p.weight_g_idx"].dtype == "i32"
    (tmp_path / "x").mkdir()
    assert_exports_back(tmp_path / "snap", tmp_path / "x")


# --- the producing tools' own checkpoints (tests/data/fixtures, README-gptq-awq.md and
# README-compressed-tensors.md): every reference weight, as the tool dequantized it ---

from conftest import FIXTURES, read_safetensors  # noqa: E402

TOOL_FIXTURES = sorted(p.name.split(".dequant.")[0] for p in (FIXTURES / "refs").glob("llama-*.dequant.*.safetensors")
                       if any(s in p.name for s in ("gptq", "awq", "-ct-w")))  # (integers: not -ct-nvfp4, -ct-mxfp4, -ct-fp8)


def test_every_tool_fixture_has_its_reference():
    assert len(TOOL_FIXTURES) >= 11 and all((FIXTURES / name).is_dir() for name in TOOL_FIXTURES)


@pytest.mark.parametrize("fixture", TOOL_FIXTURES)
def test_tool_fixtures_decode_as_the_tool_dequantized_them(tmp_path, fixture):
    r = convert(FIXTURES / fixture, tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    a = iris.open(tmp_path / "a.iris")
    (ref_path,) = (FIXTURES / "refs").glob(fixture + ".dequant.*.safetensors")
    refs = read_safetensors(ref_path)
    assert refs
    for name, want in refs.items():
        t = a.tensors[name]
        assert t.format == "int_group", name  # carried as stored
        want32 = want.astype(np.float32) if want.dtype == np.float16 else (want.astype(np.uint32) << 16).view(np.float32)
        for backend in ("numpy", "native"):
            got = t.dequantize(backend=backend)
            same = got.view(np.uint32) == want32.view(np.uint32)
            assert same.all(), f"{fixture} {name} ({backend}): {np.count_nonzero(~same)} weights differ, first at {np.argwhere(~same)[0]}"
    # kept as the tool's dequantized values, where asked to requantize to the tool's own dtype
    r = convert(FIXTURES / fixture, tmp_path / "f.iris", "--quant", "bf16")
    assert r.returncode == 0, r.stderr


def test_uneven_groups_allowed_are_kept_as_the_tool_s_values(tmp_path):
    # A g_idx whose groups are not whole runs of group_size columns cannot be an int_group;
    # accepted with --allow-g-idx-mismatch, the weight is kept as the tool decodes it, in F16.
    tensors, qc, _ = gptq_case(4, 64, True, False, True)
    g = tensors["m.p.g_idx"]
    g[:10] = 0  # group 0 gets 10 more columns, others fewer
    s = np.ascontiguousarray(tensors["m.p.scales"].T).astype(np.float16)  # [N, G]
    write_snapshot(tmp_path / "snap", tensors, qc)
    refused(tmp_path, tensors, qc, "not a permutation of groups")
    r = convert(tmp_path / "snap", tmp_path / "a.iris", "--allow-g-idx-mismatch")
    assert r.returncode == 0, r.stderr
    t = iris.open(tmp_path / "a.iris").tensors["m.p.weight"]
    assert not t.quantized and t.dtype == "f16"
    # the oracle: unpack with this file's packers' inverse and decode by g_idx
    words = tensors["m.p.qweight"].view(np.uint32)
    codes = np.stack([(words[k // 8] >> np.uint32(4 * (k % 8))) & 15 for k in range(256)], axis=1).astype(np.int64)  # [N, K]
    zw = tensors["m.p.qzeros"].view(np.uint32)  # v2
    zeros = np.stack([(zw[:, n // 8] >> np.uint32(4 * (n % 8))) & 15 for n in range(64)], axis=1).astype(np.int64)  # [G, N]
    want = dequantize(codes, zeros.T[:, g], s[:, g], "F16")
    assert (t.numpy().astype(np.float32).view(np.uint32) == want.view(np.uint32)).all()


def test_a_permutation_that_is_not_one_is_refused_by_every_reader(tmp_path):
    tensors, qc, _ = gptq_case(4, 64, True, False, True)
    write_snapshot(tmp_path / "snap", tensors, qc)
    assert convert(tmp_path / "snap", tmp_path / "a.iris").returncode == 0
    inspected = json.loads(subprocess.run([IRIS, "inspect", str(tmp_path / "a.iris"), "--json"], capture_output=True, text=True,
                                          check=True).stdout)
    (t,) = [t for t in inspected["tensors"] if t["name"] == "m.p.weight"]
    (perm,) = [c for c in t["components"] if c["role"] == "permutation"]
    data = bytearray((tmp_path / "a.iris").read_bytes())
    at = perm["offset"]  # (inspect --json gives components' offsets in the file)
    data[at + 4 : at + 8] = data[at : at + 4]  # place 1 names place 0's column again
    (tmp_path / "bad.iris").write_bytes(bytes(data))
    bad = iris.open(tmp_path / "bad.iris")
    for backend in ("numpy", "native"):
        with pytest.raises(iris.IrisError, match="permutation"):
            bad.tensors["m.p.weight"].dequantize(backend=backend)
    r = subprocess.run([IRIS, "export", str(tmp_path / "bad.iris"), "-o", str(tmp_path / "x.safetensors"), "--dtype", "f16"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and not (tmp_path / "x.safetensors").exists()
    assert subprocess.run([IRIS, "verify", str(tmp_path / "bad.iris")], capture_output=True, text=True).returncode != 0


@pytest.mark.parametrize("fixture", TOOL_FIXTURES)
def test_tool_fixtures_export_back_byte_for_byte(tmp_path, fixture):
    out = assert_exports_back(FIXTURES / fixture, tmp_path)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["quantization_config"] == json.loads((FIXTURES / fixture / "config.json").read_text())["quantization_config"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_synthetic_cases_export_back_byte_for_byte(tmp_path, case):
    tensors, qc, _ = CASES[case]()
    write_snapshot(tmp_path / "snap", tensors, qc)
    assert convert(tmp_path / "snap", tmp_path / "a.iris").returncode == 0
    assert iris.open(tmp_path / "a.iris").tensors["m.p.weight"].format == "int_group", case  # carried, not decoded
    assert_exports_back(tmp_path / "snap", tmp_path)
