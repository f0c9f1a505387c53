"""compressed-tensors mxfp4-pack-quantized (FORMATS.md 7.1): `weight_packed` U8 (E2M1 codes, low
nibble first) + `weight_scale` U8 (E8M0 exponents per 32), carried as the mxfp4 archive format,
decoded bit for bit as the tool decompresses, exported back byte for byte.

The oracle is the tool's arithmetic written here from its source (compressors/mxfp4/base.py,
mx_utils.decompress_mx_scale: `2.0 ** (e - 127)` in BF16; nvfp4/helpers.unpack_fp4_from_uint8:
the E2M1 magnitude times -1.0 or 1.0, so code 8 is -0; then one BF16 multiply) in numpy's float32,
rounded to BF16 nearest even; the tool's own outputs are the fixtures' references
(tests/data/fixtures/README-compressed-tensors.md)."""

import json

import numpy as np
import pytest

import iris_archive as iris
from conftest import (FIXTURES, assert_exports_back, assert_refused, assert_same_bits, bf16_round, convert,
                      tool_fixture, write_checkpoint)

RNG = np.random.default_rng(20261130)
F32 = np.float32
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=F32)
CONFIG = {"model_type": "llama", "torch_dtype": "bfloat16",
          "quantization_config": {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
                                  "config_groups": {"group_0": {"targets": ["Linear"], "format": "mxfp4-pack-quantized",
                                                                "weights": {"num_bits": 4, "type": "float", "strategy": "group",
                                                                            "group_size": 32, "symmetric": True,
                                                                            "scale_dtype": "torch.uint8"}}}}}
TOOL_FIXTURES = ["llama-ct-mxfp4a16", "moe-ct-mxfp4a16"]
W = "model.layers.0.mlp.down_proj"


def refused(tmp_path, tensors, *needles, options=(), config=CONFIG):
    assert_refused(tmp_path, tensors, config, *needles, options=options)


def tool_dequantize(packed, scales):
    """MXFP4PackedCompressor.decompress, as BF16 values widened to FP32."""
    codes = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
    codes[:, 0::2], codes[:, 1::2] = packed & 15, packed >> 4
    with np.errstate(over="ignore", invalid="ignore"):
        scale = bf16_round(np.exp2(scales.astype(np.float64) - 127).astype(F32))  # 2 ** (e - 127) in BF16: 255 is inf
        return bf16_round(E2M1[codes] * np.repeat(scale, 32, axis=1))


def case(n=40, k=96):
    packed = RNG.integers(0, 256, (n, k // 2), dtype=np.uint8)
    scales = RNG.integers(110, 130, (n, k // 32), dtype=np.uint8)
    scales[0, 0] = 0      # 2^-127: a BF16 subnormal, its products too
    scales[1, 1] = 254    # 2^127: code 6 overflows to infinity in BF16 as in FP32
    packed[2, :] = 0x88   # every code 8: -0.0
    return {W + ".weight_packed": packed, W + ".weight_scale": scales}


@pytest.mark.parametrize("fixture", TOOL_FIXTURES)
def test_tool_fixtures_decode_as_the_tool_dequantized_them(tmp_path, fixture):
    a, refs, stored = tool_fixture(tmp_path, fixture)
    for name, want in refs.items():
        want32 = (want.astype(np.uint32) << 16).view(F32)
        t = a.tensors[name]
        assert t.format == "mxfp4", name  # carried as stored
        base = name[: -len(".weight")]
        assert_same_bits(tool_dequantize(stored[base + ".weight_packed"], stored[base + ".weight_scale"]), want32, f"{name}: this file's oracle")
        for backend in ("numpy", "native"):
            assert_same_bits(bf16_round(t.dequantize(backend=backend)), want32, f"{fixture} {name} ({backend})")


@pytest.mark.parametrize("fixture", TOOL_FIXTURES)
def test_tool_fixtures_export_back_byte_for_byte(tmp_path, fixture):
    out = assert_exports_back(FIXTURES / fixture, tmp_path)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["quantization_config"] == json.loads((FIXTURES / fixture / "config.json").read_text())["quantization_config"]


def test_extreme_exponents_and_negative_zero_decode_as_the_tool_s(tmp_path):
    tensors = case()
    write_checkpoint(tmp_path / "snap", tensors, CONFIG)
    r = convert(tmp_path / "snap", tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    t = iris.open(tmp_path / "a.iris").tensors[W + ".weight"]
    want = tool_dequantize(tensors[W + ".weight_packed"], tensors[W + ".weight_scale"])
    assert np.isinf(want[1]).any() and (np.signbit(want[2]) & (want[2] == 0)).all()
    assert ((want[0, :32] != 0) & (np.abs(want[0, :32]) < np.finfo(F32).tiny)).any()
    for backend in ("numpy", "native"):
        assert_same_bits(bf16_round(t.dequantize(backend=backend)), want, backend)
    (tmp_path / "x").mkdir()
    assert_exports_back(tmp_path / "snap", tmp_path / "x")


def test_without_a_config_the_u8_codes_and_scales_say_mxfp4(tmp_path):
    write_checkpoint(tmp_path / "snap", case(), {"model_type": "llama"})
    r = convert(tmp_path / "snap", tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    assert iris.open(tmp_path / "a.iris").tensors[W + ".weight"].format == "mxfp4"


def test_an_exponent_of_255_is_refused_unless_allowed(tmp_path):
    tensors = case()
    tensors[W + ".weight_scale"][3, 2] = 255
    refused(tmp_path, tensors, W + ".weight_scale", "output row 3, block 2 is 255", "infinity")
    r = convert(tmp_path / "bad", tmp_path / "ok.iris", "--allow-suspect-scales")
    assert r.returncode == 0, r.stderr
    got = iris.open(tmp_path / "ok.iris").tensors[W + ".weight"].dequantize()
    assert np.isnan(got[3, 64:96]).all()  # OCP E8M0's NaN, the stated departure from the tool's infinity
    want = tool_dequantize(tensors[W + ".weight_packed"], tensors[W + ".weight_scale"])
    keep = np.ones_like(want, bool)
    keep[3, 64:96] = False
    assert_same_bits(bf16_round(got)[keep], want[keep], "the other blocks")


def test_misshapen_companions_are_refused(tmp_path):
    t = case()
    t[W + ".weight_scale"] = t[W + ".weight_scale"][:, :2]
    refused(tmp_path / "a", t, W + ".weight_scale", "MXFP4 scales must be U8 [40, 3]")
    t = case()
    del t[W + ".weight_scale"]
    refused(tmp_path / "b", t, W + ".weight_packed", "without their '" + W + ".weight_scale'")
    t = case(k=80)
    refused(tmp_path / "c", t, W + ".weight_packed", "not whole blocks of 32")
    t = case()
    t[W + ".weight_zero_point"] = np.zeros((40, 3), np.uint8)
    refused(tmp_path / "d", t, W + ".weight_zero_point", "symmetric MXFP4 only")


def test_an_mxfp4_config_of_other_arguments_is_refused(tmp_path):
    cfg = json.loads(json.dumps(CONFIG))
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = 16
    refused(tmp_path, case(), "mxfp4-pack-quantized", "config group 'group_0'", config=cfg)
