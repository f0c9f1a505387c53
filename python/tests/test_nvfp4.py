"""NVFP4 (FORMAT.md 4.6): ModelOpt and compressed-tensors checkpoints read exactly, carried as
stored, exported back byte for byte; `convert --quant nvfp4` byte for byte ModelOpt's
arithmetic. The oracle is written here from the tools' source (ModelOpt's
NVFP4QTensor.quantize / .dequantize, compressed-tensors' NVFP4PackedCompressor.decompress;
FORMATS.md 7.1 and 7.4) in numpy's float32 arithmetic -- searchsorted over the E2M1
midpoints, an exhaustive nearest E4M3 -- not from iris's encoder (bit tricks in
quant/element_encode.h)."""

import json
import subprocess

import numpy as np
import pytest

import iris_archive as iris
from conftest import IRIS, assert_exports_back, raw_safetensors, read_safetensors, write_safetensors

RNG = np.random.default_rng(20261130)
F32 = np.float32


# --- the tools' arithmetic ---

def e2m1_values(negative_zero):
    mags = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    v = np.array(mags + [-m for m in mags], dtype=F32)
    if not negative_zero:
        v[8] = F32(0.0)  # ModelOpt's table holds 0 at index 8; compressed-tensors multiplies 0 by -1
    return v


def e4m3_value_table():
    out = np.empty(256, dtype=np.float64)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        v = np.nan if (e == 15 and m == 7) else (m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
        out[b] = -v if s else v
    return out


E4M3 = e4m3_value_table()


def e4m3_nearest(x):
    """torch's float -> float8_e4m3fn for non-negative x <= 448: the nearest, ties to even."""
    cand = E4M3[:127]  # 0x00..0x7E, increasing
    d = np.abs(x.astype(np.float64)[..., None] - cand)
    best = d.min(axis=-1, keepdims=True)
    ties = d == best
    even = ties & (np.arange(127) % 2 == 0)
    return np.where(even.any(-1), even.argmax(-1), ties.argmax(-1)).astype(np.uint8)


BOUNDS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5], dtype=F32)
ODD_BOUNDS = np.array([0.75, 1.75, 3.5], dtype=F32)  # e2m1_bounds[[1, 3, 5]]


def modelopt_cast_fp4(y):
    sign = (y < 0).astype(np.uint8)
    a = np.abs(y)
    order = np.searchsorted(BOUNDS, a, side="left").astype(np.uint8)
    eq = np.isin(a, ODD_BOUNDS).astype(np.uint8)
    return (sign << 3) + order + eq


def modelopt_quantize(w, t):
    """w [N, K] float32 (K a multiple of 16), t the FP32 weight_scale_2 -> codes [N, K/2],
    E4M3 scale bytes [N, K/16]."""
    n, k = w.shape
    blocks = w.reshape(n, k // 16, 16)
    amax = np.abs(blocks).max(axis=-1).astype(F32)
    q = (amax / (F32(6.0) * t)).astype(F32)
    q[q == 0] = F32(1.0)
    s = e4m3_nearest(q)
    denom = (E4M3[s].astype(F32) * t).astype(F32)
    with np.errstate(all="ignore"):
        y = (blocks / denom[..., None]).astype(F32).reshape(n, k)
    c = modelopt_cast_fp4(y)
    return (c[:, 1::2] << 4) | c[:, 0::2], s


def global_scale(amax):
    return F32(amax) / F32(2688.0)


def unpack(codes):
    c = np.empty((codes.shape[0], codes.shape[1] * 2), dtype=np.uint8)
    c[:, 0::2] = codes & 15
    c[:, 1::2] = codes >> 4
    return c


def tool_dequantize_f32(codes, scales, t, divides):
    """ModelOpt: e2m1 * (e4m3 * t); compressed-tensors: e2m1 * (e4m3 / t) with code 8 -0.
    Each operation one FP32 rounding: the value before the tools' final cast to BF16."""
    s = E4M3[scales].astype(F32)
    with np.errstate(all="ignore"):
        per_block = (s / t if divides else s * t).astype(F32)
        return (e2m1_values(divides)[unpack(codes)] * np.repeat(per_block, 16, axis=1)).astype(F32)


def bf16_bits(x32):
    u = x32.astype(F32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


# --- checkpoints written as each tool lays them out ---

def write_snapshot(folder, tensors, config, extra_files=None):
    """tensors: name -> array, or (array, safetensors dtype)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "model.safetensors", tensors)
    (folder / "config.json").write_text(json.dumps(config))
    for name, body in (extra_files or {}).items():
        (folder / name).write_text(json.dumps(body))


def random_weight(n, k):
    w = (RNG.standard_normal((n, k)) * 0.02).astype(F32)
    w[0, :16] = 0.0                   # an all-zero block: scale 1.0
    w[1, :16] = -1e-4                 # negative values that round to zero: ModelOpt's code 8
    w[2, 5] = 0.3                     # one large value: its block's scale saturates at 448
    return bf16_rounded(w)


def bf16_rounded(w):
    return (bf16_bits(w).astype(np.uint32) << 16).view(F32)


PROJ = ["q_proj", "k_proj", "v_proj"]


def modelopt_case(n=48, k=64):
    tensors, expected = {}, {}
    ws = {p: random_weight(n, k) for p in PROJ}
    t = global_scale(max(np.abs(w).max() for w in ws.values()))  # shared by the fused q/k/v, as ModelOpt's export shares it
    for p in PROJ:
        w = ws[p]
        codes, scales = modelopt_quantize(w, t)
        name = f"model.layers.0.self_attn.{p}"
        tensors[f"{name}.weight"] = codes
        tensors[f"{name}.weight_scale"] = (scales, "F8_E4M3")
        tensors[f"{name}.weight_scale_2"] = np.array(t, dtype=F32)  # a 0-dim scalar, as ModelOpt exports it
        tensors[f"{name}.input_scale"] = np.array(F32(0.01), dtype=F32)
        expected[f"{name}.weight"] = tool_dequantize_f32(codes, scales, t, divides=False)
    qc = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "producer": {"name": "modelopt", "version": "0.39.0"}}
    hf = {"producer": {"name": "modelopt", "version": "0.39.0"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}}
    return tensors, {"model_type": "llama", "dtype": "bfloat16", "quantization_config": qc}, {"hf_quant_config.json": hf}, expected


def ct_case(n=48, k=64):
    tensors, expected = {}, {}
    ws = {p: random_weight(n, k) for p in PROJ}
    amax = max(np.abs(w).max() for w in ws.values())  # shared by the fused q/k/v, as llm-compressor links them
    gs = F32(2688.0) / F32(amax)  # compressed-tensors' global scale: 448 * 6 / amax
    for p in PROJ:
        w = ws[p]
        codes, scales = modelopt_quantize(w, (F32(1.0) / gs).astype(F32))
        name = f"model.layers.0.self_attn.{p}"
        tensors[f"{name}.weight_packed"] = codes
        tensors[f"{name}.weight_scale"] = (scales, "F8_E4M3")
        tensors[f"{name}.weight_global_scale"] = np.array([gs], dtype=F32)
        tensors[f"{name}.input_global_scale"] = np.array([F32(100.0)], dtype=F32)
        expected[f"{name}.weight"] = tool_dequantize_f32(codes, scales, gs, divides=True)
    group = {"targets": ["Linear"], "format": "nvfp4-pack-quantized",
             "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True}}
    qc = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "config_groups": {"group_0": group}}
    return tensors, {"model_type": "llama", "dtype": "bfloat16", "quantization_config": qc}, {}, expected


CASES = {"modelopt": modelopt_case, "compressed-tensors": ct_case}


def convert(snapshot, out, *options):
    return subprocess.run([IRIS, "convert", str(snapshot), "-o", str(out), "-q", *options], capture_output=True, text=True)


def export(archive, out, *options):
    return subprocess.run([IRIS, "export", str(archive), "-o", str(out) + "/", "-q", *options], capture_output=True, text=True)  # a folder


@pytest.mark.parametrize("case", sorted(CASES))
def test_checkpoints_decode_as_the_tool_dequantizes_them(tmp_path, case):
    tensors, config, files, expected = CASES[case]()
    write_snapshot(tmp_path / "snap", tensors, config, files)
    r = convert(tmp_path / "snap", tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    a = iris.open(tmp_path / "a.iris")
    a.verify()
    for name, want in expected.items():
        t = a.tensors[name]
        assert t.format == "nvfp4", name  # carried as stored
        for backend in ("numpy", "native"):
            got = t.dequantize(backend=backend)
            same = got.view(np.uint32) == want.view(np.uint32)
            assert same.all(), f"{case} {name} ({backend}): {np.count_nonzero(~same)} weights differ, first at {np.argwhere(~same)[0]}"
    # the tools cast to BF16 last: --quant bf16 is that value rounded once
    r = convert(tmp_path / "snap", tmp_path / "b.iris", "--quant", "bf16")
    assert r.returncode == 0, r.stderr
    b = iris.open(tmp_path / "b.iris")
    for name, want in expected.items():
        assert (b.tensors[name].numpy().view(np.uint16) == bf16_bits(want)).all(), name
    # code 8 is in the checkpoints and decodes by each tool's convention
    codes = unpack(tensors["model.layers.0.self_attn.q_proj." + ("weight" if case == "modelopt" else "weight_packed")])
    assert (codes == 8).any()
    neg_zero = want.view(np.uint32) == 0x80000000
    assert neg_zero.any() == (case == "compressed-tensors")


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_writes_the_checkpoint_back_byte_for_byte(tmp_path, case):
    tensors, config, files, _ = CASES[case]()
    write_snapshot(tmp_path / "snap", tensors, config, files)
    out = assert_exports_back(tmp_path / "snap", tmp_path)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["quantization_config"] == config["quantization_config"]


def bf16_snapshot(folder, n=40, k=72, layers=1):
    """A BF16 checkpoint with fused projections: q/k/v and gate/up share their inputs."""
    tensors, weights = {}, {}
    for layer in range(layers):
        for proj, scale in [("self_attn.q_proj", 0.02), ("self_attn.k_proj", 0.05), ("self_attn.v_proj", 0.01),
                            ("self_attn.o_proj", 0.03), ("mlp.gate_proj", 0.02), ("mlp.up_proj", 0.04), ("mlp.down_proj", 0.02)]:
            name = f"model.layers.{layer}.{proj}.weight"
            w = bf16_rounded((RNG.standard_normal((n, k)) * scale).astype(F32))
            weights[name] = w
            tensors[name] = (bf16_bits(w), "BF16")
    write_snapshot(folder, tensors, {"model_type": "llama", "dtype": "bfloat16"})
    return weights


SIBLINGS = {"q_proj": ["q_proj", "k_proj", "v_proj"], "k_proj": ["q_proj", "k_proj", "v_proj"], "v_proj": ["q_proj", "k_proj", "v_proj"],
            "gate_proj": ["gate_proj", "up_proj"], "up_proj": ["gate_proj", "up_proj"]}


def test_quant_nvfp4_is_modelopt_s_arithmetic_byte_for_byte(tmp_path):
    weights = bf16_snapshot(tmp_path / "snap")
    r = convert(tmp_path / "snap", tmp_path / "a.iris", "--quant", "nvfp4")
    assert r.returncode == 0, r.stderr
    a = iris.open(tmp_path / "a.iris")
    a.verify()
    r = export(tmp_path / "a.iris", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    out = raw_safetensors(tmp_path / "out")
    for name, w in weights.items():
        proj = name.split(".")[-2]
        group = [name.replace(proj, s) for s in SIBLINGS.get(proj, [proj])]
        t = global_scale(max(np.abs(weights[g]).max() for g in group))  # shared, as ModelOpt's export shares it
        k = w.shape[1]
        padded = np.zeros((w.shape[0], -(-k // 16) * 16), dtype=F32)
        padded[:, :k] = w  # (72 columns: the last block zero padded, as ModelOpt pads)
        codes, scales = modelopt_quantize(padded, t)
        stem = name
        assert out[stem][0] == "U8" and out[stem][2] == codes.tobytes(), name
        assert out[stem + "_scale"][0] == "F8_E4M3" and out[stem + "_scale"][2] == scales.tobytes(), name
        assert out[stem + "_scale_2"] == ("F32", [], np.array(t, dtype=F32).tobytes()), name
        # and the archive decodes them as ModelOpt does
        want = tool_dequantize_f32(codes, scales, t, divides=False)[:, :k]
        got = a.tensors[name].dequantize(backend="native")
        assert (got.view(np.uint32) == want.view(np.uint32)).all(), name
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())["quantization_config"]
    assert cfg["quant_method"] == "modelopt" and cfg["quant_algo"] == "NVFP4" and cfg["group_size"] == 16
    # The ModelOpt checkpoint written reads back as the same weights. (Its rows hold whole
    # blocks: ModelOpt records no K, so 72 columns come back as 80, the last 8 zero.)
    r = convert(tmp_path / "out", tmp_path / "b.iris")
    assert r.returncode == 0, r.stderr
    b = iris.open(tmp_path / "b.iris")
    for name in weights:
        got, want = b.tensors[name].dequantize(backend="native"), a.tensors[name].dequantize(backend="native")
        assert got.shape == (want.shape[0], 80)
        assert (got[:, :72].view(np.uint32) == want.view(np.uint32)).all() and (got[:, 72:] == 0).all(), name


def test_quant_nvfp4_of_an_all_zero_matrix_is_zero(tmp_path):
    z = np.zeros((16, 32), dtype=np.uint16)
    write_snapshot(tmp_path / "snap", {"model.layers.0.mlp.down_proj.weight": (z, "BF16")}, {"model_type": "llama"})
    assert convert(tmp_path / "snap", tmp_path / "a.iris", "--quant", "nvfp4").returncode == 0
    t = iris.open(tmp_path / "a.iris").tensors["model.layers.0.mlp.down_proj.weight"]
    got = t.dequantize(backend="native")
    assert t.format == "nvfp4" and got.dtype == np.float32 and (got.view(np.uint32) == 0).all()


def test_quant_nvfp4_refuses_nan_weights(tmp_path):
    w = np.zeros((16, 32), dtype=np.uint16)
    w[3, 4] = 0x7FC0
    write_snapshot(tmp_path / "snap", {"model.layers.0.mlp.down_proj.weight": (w, "BF16")}, {"model_type": "llama"})
    r = convert(tmp_path / "snap", tmp_path / "a.iris", "--quant", "nvfp4")
    assert r.returncode != 0 and "down_proj" in r.stderr and not (tmp_path / "a.iris").exists()


def refused(tmp_path, tensors, config, *needles):
    write_snapshot(tmp_path / "snap", tensors, config)
    r = convert(tmp_path / "snap", tmp_path / "out.iris")
    assert r.returncode != 0, "accepted"
    assert r.stderr.count("\n") == 1, r.stderr
    for needle in needles:
        assert needle in r.stderr, r.stderr
    assert not (tmp_path / "out.iris").exists()


@pytest.mark.parametrize("case", sorted(CASES))
def test_misshapen_or_missing_companions_are_refused(tmp_path, case):
    tensors, config, _, _ = CASES[case]()
    stem = "model.layers.0.self_attn.k_proj"
    bad = dict(tensors)
    bad[f"{stem}.weight_scale"] = (tensors[f"{stem}.weight_scale"][0][:, :-1].copy(), "F8_E4M3")
    refused(tmp_path / "shape", bad, config, f"{stem}.weight_scale", "16 elements")
    bad = dict(tensors)
    scale_name = f"{stem}.weight_scale_2" if case == "modelopt" else f"{stem}.weight_global_scale"
    bad[scale_name] = np.array([1.0, 2.0], dtype=F32)
    refused(tmp_path / "global", bad, config, scale_name, "one value per matrix")
    bad = dict(tensors)
    del bad[f"{stem}.weight_scale"]
    refused(tmp_path / "missing", bad, config, "k_proj", "weight_scale")
    if case == "compressed-tensors":
        bad = dict(tensors)
        del bad[f"{stem}.weight_packed"]
        refused(tmp_path / "orphan", bad, config, f"{stem}.weight_packed")


def test_a_modelopt_row_that_is_not_whole_blocks_is_refused(tmp_path):
    codes = np.zeros((16, 12), dtype=np.uint8)  # 24 elements a row
    tensors = {"m.p.weight": codes, "m.p.weight_scale": (np.zeros((16, 1), np.uint8), "F8_E4M3"), "m.p.weight_scale_2": np.array(F32(1))}
    refused(tmp_path, tensors, {"model_type": "llama"}, "m.p.weight", "multiple of the 16-element block")


# --- the producing tools' own checkpoints (tests/data/fixtures/README-nvfp4.md) ---

from conftest import FIXTURES  # noqa: E402

TOOL_FIXTURES = {"llama-modelopt-nvfp4": "modelopt", "llama-ct-nvfp4a16": "compressed-tensors", "moe-ct-nvfp4a16": "compressed-tensors"}


@pytest.mark.parametrize("fixture", sorted(TOOL_FIXTURES))
def test_tool_fixtures_decode_as_the_tool_dequantized_them(tmp_path, fixture):
    r = convert(FIXTURES / fixture, tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    a = iris.open(tmp_path / "a.iris")
    a.verify()
    (ref_path,) = (FIXTURES / "refs").glob(fixture + ".dequant.*.safetensors")
    refs = read_safetensors(ref_path)
    assert refs
    for name, want in refs.items():
        t = a.tensors[name]
        assert t.format == "nvfp4", name
        for backend in ("numpy", "native"):  # the tools cast their FP32 value to BF16 last
            got = bf16_bits(t.dequantize(backend=backend))
            same = got == want
            assert same.all(), f"{fixture} {name} ({backend}): {np.count_nonzero(~same)} weights differ, first at {np.argwhere(~same)[0]}"
    r = convert(FIXTURES / fixture, tmp_path / "b.iris", "--quant", "bf16")
    assert r.returncode == 0, r.stderr
    b = iris.open(tmp_path / "b.iris")
    for name, want in refs.items():
        assert (b.tensors[name].numpy().view(np.uint16) == want).all(), name


@pytest.mark.parametrize("fixture", sorted(TOOL_FIXTURES))
def test_tool_fixtures_export_back_byte_for_byte(tmp_path, fixture):
    assert_exports_back(FIXTURES / fixture, tmp_path)


def test_quant_nvfp4_equals_modelopt_s_own_run_byte_for_byte(tmp_path):
    # ModelOpt's NVFP4QTensor quantized the BF16 Llama (layer 0 kept): iris's --quant nvfp4 of
    # the same weights must write the same codes, block scales and global scales.
    r = convert(FIXTURES / "llama-bf16", tmp_path / "a.iris", "--quant", "nvfp4")
    assert r.returncode == 0, r.stderr
    r = export(tmp_path / "a.iris", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    ours, theirs = raw_safetensors(tmp_path / "out"), raw_safetensors(FIXTURES / "llama-modelopt-nvfp4")
    compared = 0
    for name, value in theirs.items():
        if name.endswith((".weight", ".weight_scale", ".weight_scale_2")) and "layernorm" not in name:
            assert ours[name] == value, name
            compared += 1
    assert compared == 21  # 7 projections x codes, block scales, global scale


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_projections_with_different_global_scales_are_refused_unless_allowed(tmp_path, case):
    tensors, config, files, _ = CASES[case]()
    name = "model.layers.0.self_attn.v_proj." + ("weight_scale_2" if case == "modelopt" else "weight_global_scale")
    tensors[name] = tensors[name] * F32(2.0)
    write_snapshot(tmp_path / "snap", tensors, config, files)
    r = convert(tmp_path / "snap", tmp_path / "a.iris")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "v_proj" in r.stderr and "fused sibling" in r.stderr, r.stderr
    assert not (tmp_path / "a.iris").exists()
    r = convert(tmp_path / "snap", tmp_path / "a.iris", "--allow-fused-scale-mismatch")
    assert r.returncode == 0, r.stderr


# (A zero ModelOpt multiplier is well defined -- every weight 0 -- so only compressed-tensors'
# divisor of 0 is suspect.)
@pytest.mark.parametrize("case,what", [("modelopt", "nan-global"), ("modelopt", "nan-block"), ("compressed-tensors", "zero-global"),
                                       ("compressed-tensors", "nan-global"), ("compressed-tensors", "nan-block")])
def test_suspect_scales_are_refused_unless_allowed(tmp_path, case, what):
    tensors, config, files, _ = CASES[case]()
    stem = "model.layers.0.self_attn.q_proj."
    g = stem + ("weight_scale_2" if case == "modelopt" else "weight_global_scale")
    if what == "nan-block":
        s = tensors[stem + "weight_scale"][0].copy()
        s[3, 1] = 0x7F
        tensors[stem + "weight_scale"] = (s, "F8_E4M3")
    else:
        tensors[g] = np.full_like(tensors[g], 0.0 if what == "zero-global" else np.nan)
    write_snapshot(tmp_path / "snap", tensors, config, files)
    r = convert(tmp_path / "snap", tmp_path / "a.iris", "--allow-fused-scale-mismatch")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "q_proj" in r.stderr and "--allow-suspect-scales" in r.stderr, r.stderr
    r = convert(tmp_path / "snap", tmp_path / "a.iris", "--allow-fused-scale-mismatch", "--allow-suspect-scales")
    assert r.returncode == 0, r.stderr


def test_verify_warns_of_fused_projections_with_different_global_scales(tmp_path):
    tensors, config, files, _ = CASES["modelopt"]()
    name = "model.layers.0.self_attn.v_proj.weight_scale_2"
    tensors[name] = tensors[name] * F32(2.0)
    write_snapshot(tmp_path / "snap", tensors, config, files)
    assert convert(tmp_path / "snap", tmp_path / "a.iris", "--allow-fused-scale-mismatch").returncode == 0
    r = subprocess.run([IRIS, "verify", str(tmp_path / "a.iris"), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lint = [c for c in json.loads(r.stdout)["archive"] if c["check"] == "lint:fused-scales"]
    assert len(lint) == 1 and "v_proj" in lint[0]["warning"] and "different global scales" in lint[0]["warning"], lint
    r = subprocess.run([IRIS, "verify", str(tmp_path / "a.iris"), "--strict"], capture_output=True, text=True)
    assert r.returncode != 0
    # and none where the scales agree
    assert convert(FIXTURES / "llama-modelopt-nvfp4", tmp_path / "b.iris").returncode == 0
    r = subprocess.run([IRIS, "verify", str(tmp_path / "b.iris"), "--json", "--strict"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:]
    lint = [c for c in json.loads(r.stdout)["archive"] if c["check"] == "lint:fused-scales"]
    assert len(lint) == 1 and not lint[0].get("warning"), lint


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_group_is_made_whichever_of_its_tensors_the_file_lists_first(tmp_path, case):
    # (safetensors writers order tensors differently: the block scales first, say)
    tensors, config, files, expected = CASES[case]()
    write_snapshot(tmp_path / "snap", dict(reversed(list(tensors.items()))), config, files)
    r = convert(tmp_path / "snap", tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    a = iris.open(tmp_path / "a.iris")
    for name, want in expected.items():
        assert a.tensors[name].format == "nvfp4"
        assert (a.tensors[name].dequantize(backend="native").view(np.uint32) == want.view(np.uint32)).all(), name
