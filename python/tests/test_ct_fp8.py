"""compressed-tensors float-quantized FP8 (FORMATS.md 7.1) as the tool writes it: E4M3 `weight`
with its `weight_scale` per tensor, per channel and per 128x128 block (BF16 scales, as
llm-compressor's observer gives them), carried as the fp8_e4m3 format and decoded bit for bit as
the tool's own decompress (NaiveQuantizationCompressor.decompress: the codes cast to the scale's
dtype, one BF16 multiply), exported back byte for byte. The fixtures and references were written
by compressed-tensors 0.18.0 + llm-compressor (README-compressed-tensors.md); the tool's
model-free dequantizer refuses such checkpoints (it asks a weight_scale of embed_tokens), so the
references are the compressor's decompress alone."""

import json

import numpy as np
import pytest

from conftest import FIXTURES, assert_exports_back, assert_same_bits, bf16_round, run_iris, tool_fixture

TOOL_FIXTURES = {"llama-ct-fp8-tensor": "tensor", "llama-ct-fp8-channel": "channel", "llama-ct-fp8-block": "block"}


@pytest.mark.parametrize("fixture", sorted(TOOL_FIXTURES))
def test_tool_fixtures_decode_as_the_tool_decompressed_them(tmp_path, fixture):
    a, refs, _ = tool_fixture(tmp_path, fixture)
    for name, want in refs.items():
        t = a.tensors[name]
        assert t.format == "fp8_e4m3" and t.params["scale_granularity"] == TOOL_FIXTURES[fixture], (name, t.params)
        want32 = (want.astype(np.uint32) << 16).view(np.float32)
        for backend in ("numpy", "native"):
            assert_same_bits(bf16_round(t.dequantize(backend=backend)), want32, f"{fixture} {name} ({backend})")
    run_iris("verify", tmp_path / "a.iris", "-q")


@pytest.mark.parametrize("fixture", sorted(TOOL_FIXTURES))
def test_tool_fixtures_export_back_byte_for_byte(tmp_path, fixture):
    out = assert_exports_back(FIXTURES / fixture, tmp_path)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["quantization_config"] == json.loads((FIXTURES / fixture / "config.json").read_text())["quantization_config"]
