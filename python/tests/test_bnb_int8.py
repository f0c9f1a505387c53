"""bitsandbytes LLM.int8 (FORMATS.md 7.5; FORMAT.md 4.5's post_factor): `weight` I8 + `SCB` F32
row absmax + `weight_format`, read exactly, carried as int_group, exported back byte for byte.

The oracle is bitsandbytes' own dequantization, written here from its source
(bitsandbytes/_ops.py, the default int8_vectorwise_dequant: `A * stats.view(-1, 1) *
7.874015718698502e-3`, two torch float32 multiplies) in numpy's float32 arithmetic; the tool's
own outputs are the fixtures' references (tests/data/fixtures/README-bnb-int8.md)."""

import json
import subprocess

import numpy as np
import pytest

import iris_archive as iris
from conftest import (FIXTURES, IRIS, assert_exports_back, assert_refused, assert_same_bits, convert, raw_safetensors,
                      read_safetensors, tool_fixture, write_checkpoint)

RNG = np.random.default_rng(20261130)
F32 = np.float32
ONE_127 = F32(7.874015718698502e-3)  # the FP32 nearest 1/127, bitsandbytes' constant
CONFIG = {"model_type": "llama", "torch_dtype": "bfloat16",
          "quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": True, "load_in_4bit": False,
                                  "_load_in_8bit": True, "_load_in_4bit": False, "llm_int8_threshold": 6.0,
                                  "llm_int8_has_fp16_weight": False, "llm_int8_skip_modules": None}}
TOOL_FIXTURES = ["llama-bnb-int8", "moe-bnb-int8"]


def refused(tmp_path, tensors, *needles, options=(), config=CONFIG):
    assert_refused(tmp_path, tensors, config, *needles, options=options)


def bnb_dequant(q, scb):
    """int8_vectorwise_dequant: (A * SCB) * (1/127), each an FP32 rounding."""
    with np.errstate(over="ignore", invalid="ignore"):
        return (q.astype(F32) * scb.astype(F32)[:, None]) * ONE_127


def bnb_quant(w):
    """What bitsandbytes' row quantizer stores (its absmax and round(w * 127 / absmax)): a
    stand-in producer for synthetic checkpoints; the decode is what is under test."""
    scb = np.abs(w).max(axis=1).astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.nan_to_num(np.rint(w * (F32(127) / scb)[:, None]))
    return q.astype(np.int8), scb


def case(n=48, k=200, weight_format=np.zeros((), np.uint8), huge=True):
    w = (RNG.standard_normal((n, k)) * 0.05).astype(F32)
    w[1] = 0.0                     # an all-zero row: SCB 0, which bitsandbytes writes
    w[2, 3] = 40.0                 # an outlier row
    q, scb = bnb_quant(w)
    scb[3] = F32(1e-37)            # products of subnormal size after the 1/127
    q[4, :3] = -128                # a code bitsandbytes never writes, still a defined value
    if huge:
        scb[6] = F32(3e38)         # q * SCB overflows to infinity, as torch's multiply does
    scb[7] = -scb[7]               # a negative absmax: hostile, still one defined value each
    tensors = {"model.layers.0.mlp.down_proj.weight": q, "model.layers.0.mlp.down_proj.SCB": scb}
    if weight_format is not None:
        tensors["model.layers.0.mlp.down_proj.weight_format"] = weight_format
    tensors["model.norm.weight"] = (np.ones(k, np.uint16) * 0x3F80, "BF16")
    return tensors


# --- the tool's own checkpoints ---

def test_every_tool_fixture_has_its_reference():
    for name in TOOL_FIXTURES:
        assert (FIXTURES / name).is_dir() and read_safetensors(FIXTURES / "refs" / f"{name}.dequant.bnb.safetensors")


@pytest.mark.parametrize("fixture", TOOL_FIXTURES)
def test_tool_fixtures_decode_as_bitsandbytes_dequantized_them(tmp_path, fixture):
    a, refs, stored = tool_fixture(tmp_path, fixture)
    for name, want in refs.items():
        t = a.tensors[name]
        assert t.format == "int_group" and t.params["bits"] == 8 and t.params["post_factor"] == float(ONE_127), name
        base = name[: -len(".weight")]
        assert_same_bits(bnb_dequant(stored[name], stored[base + ".SCB"]), want, f"{name}: this file's oracle against bitsandbytes")
        for backend in ("numpy", "native"):
            assert_same_bits(t.dequantize(backend=backend), want, f"{fixture} {name} ({backend})")
    # every LLM.int8 weight of the checkpoint carried, none left as integers
    ints = [n for n in stored if n.endswith(".weight") and stored[n].dtype == np.int8]
    assert ints and all(a.tensors[n].format == "int_group" for n in ints)


@pytest.mark.parametrize("fixture", TOOL_FIXTURES)
def test_tool_fixtures_export_back_byte_for_byte(tmp_path, fixture):
    out = assert_exports_back(FIXTURES / fixture, tmp_path)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["quantization_config"] == json.loads((FIXTURES / fixture / "config.json").read_text())["quantization_config"]


def test_archive_records_the_version_and_post_factor(tmp_path, converted):
    r = subprocess.run([IRIS, "inspect", str(converted("llama-bnb-int8")), "--json"], capture_output=True, text=True, check=True)
    j = json.loads(r.stdout)
    assert j["format_version"] == "2.6"
    (t,) = [t for t in j["tensors"] if t["name"] == "model.layers.0.self_attn.k_proj.weight"]
    assert t["params"]["post_factor"] == float(ONE_127) and t["params"]["group_size"] == 256 and not t["params"]["zero_points"]


# --- synthetic checkpoints: hostile values, every companion checked ---

@pytest.mark.parametrize("weight_format", [np.zeros((), np.uint8), np.zeros(1, np.uint8), None], ids=["scalar", "one", "absent"])
def test_synthetic_rows_decode_as_bitsandbytes_and_export_back(tmp_path, weight_format):
    tensors = case(weight_format=weight_format)
    write_checkpoint(tmp_path / "snap", tensors, CONFIG)
    r = convert(tmp_path / "snap", tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    t = iris.open(tmp_path / "a.iris").tensors["model.layers.0.mlp.down_proj.weight"]
    want = bnb_dequant(tensors["model.layers.0.mlp.down_proj.weight"], tensors["model.layers.0.mlp.down_proj.SCB"])
    assert not want[1].any() and (np.abs(want[3][want[3] != 0]) < np.finfo(F32).tiny).any() and np.isinf(want[6]).any()
    for backend in ("numpy", "native"):
        assert_same_bits(t.dequantize(backend=backend), want, backend)
    (tmp_path / "x").mkdir()
    assert_exports_back(tmp_path / "snap", tmp_path / "x")


def test_verify_takes_a_zero_row_and_warns_of_a_negative_absmax(tmp_path):
    tensors = case(huge=False)
    write_checkpoint(tmp_path / "snap", tensors, CONFIG)
    assert convert(tmp_path / "snap", tmp_path / "a.iris").returncode == 0
    r = subprocess.run([IRIS, "verify", str(tmp_path / "a.iris")], capture_output=True, text=True)
    assert r.returncode == 0 and "1 row absmax values (SCB) are negative (" in r.stdout, r.stdout  # (and no word of its zero)
    tensors["model.layers.0.mlp.down_proj.SCB"][7] *= -1  # every absmax non-negative now, one of them 0
    write_checkpoint(tmp_path / "ok", tensors, CONFIG)
    assert convert(tmp_path / "ok", tmp_path / "ok.iris").returncode == 0
    r = subprocess.run([IRIS, "verify", str(tmp_path / "ok.iris"), "--strict"], capture_output=True, text=True)
    assert r.returncode == 0 and "WARN" not in r.stdout, r.stdout


def test_read_by_its_companions_without_a_config(tmp_path):
    tensors = case()
    write_checkpoint(tmp_path / "snap", tensors, None)
    r = convert(tmp_path / "snap", tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    assert iris.open(tmp_path / "a.iris").tensors["model.layers.0.mlp.down_proj.weight"].format == "int_group"


@pytest.mark.parametrize("quant", ["nf4", "mxfp4", "fp8-channel", "bf16"])
def test_requantized_from_the_decoded_values(tmp_path, quant):
    tensors = case(huge=False)  # (no infinity to quantize)
    write_checkpoint(tmp_path / "snap", tensors, CONFIG)
    r = convert(tmp_path / "snap", tmp_path / "a.iris", "--quant", quant)
    assert r.returncode == 0, r.stderr
    t = iris.open(tmp_path / "a.iris").tensors["model.layers.0.mlp.down_proj.weight"]
    want = bnb_dequant(tensors["model.layers.0.mlp.down_proj.weight"], tensors["model.layers.0.mlp.down_proj.SCB"])
    got = t.dequantize()
    if quant == "bf16":
        assert_same_bits(got, ((want.view(np.uint32) + 0x7FFF + ((want.view(np.uint32) >> 16) & 1)) & 0xFFFF0000).view(F32), quant)
    else:  # a 4-bit or 8-bit format's error, row by row (row 3, of subnormal size, aside)
        ok = np.abs(want).max(axis=1) > 1e-30
        assert t.format != "int_group" and (np.abs(got - want)[ok].max(axis=1) <= 0.25 * np.abs(want)[ok].max(axis=1)).all()


@pytest.mark.parametrize("value,word", [(np.nan, "NaN"), (np.inf, "infinite")])
def test_non_finite_row_scales_are_refused_unless_allowed(tmp_path, value, word):
    tensors = case()
    tensors["model.layers.0.mlp.down_proj.SCB"][5] = value
    refused(tmp_path, tensors, "model.layers.0.mlp.down_proj.SCB", word, "output row 5")
    r = convert(tmp_path / "bad", tmp_path / "ok.iris", "--allow-suspect-scales")
    assert r.returncode == 0, r.stderr
    got = iris.open(tmp_path / "ok.iris").tensors["model.layers.0.mlp.down_proj.weight"].dequantize()
    assert_same_bits(got, bnb_dequant(tensors["model.layers.0.mlp.down_proj.weight"], tensors["model.layers.0.mlp.down_proj.SCB"]), "allowed")


@pytest.mark.parametrize("code,name", [(1, "col32"), (3, "col_ampere"), (9, "unknown")])
def test_a_tiled_weight_format_is_refused_by_name(tmp_path, code, name):
    tensors = case(weight_format=np.full((), code, np.uint8))
    refused(tmp_path, tensors, "model.layers.0.mlp.down_proj.weight_format", f"weight_format {code} ({name})")


def test_misshapen_companions_are_refused(tmp_path):
    t = case()
    t["model.layers.0.mlp.down_proj.SCB"] = t["model.layers.0.mlp.down_proj.SCB"][:-1]
    refused(tmp_path / "a", t, "model.layers.0.mlp.down_proj.SCB", "F32 [48]")
    t = case()
    t["model.layers.0.mlp.down_proj.SCB"] = np.ones(48, np.float16)
    refused(tmp_path / "b", t, "SCB must be F32")
    t = case(weight_format=np.zeros(2, np.uint8))
    refused(tmp_path / "c", t, "weight_format must be one U8 value")


def test_codes_without_their_scales_are_refused(tmp_path):
    t = case()
    del t["model.layers.0.mlp.down_proj.SCB"]
    refused(tmp_path / "a", t, "model.layers.0.mlp.down_proj.weight", "without their 'model.layers.0.mlp.down_proj.SCB'")
    t = case()
    t["model.layers.0.mlp.down_proj.weight"] = t["model.layers.0.mlp.down_proj.weight"].astype(np.float16)
    refused(tmp_path / "b", t, "model.layers.0.mlp.down_proj.SCB", "is F16, not the I8 codes")
    t = case()
    t["model.layers.0.mlp.other.SCB"] = np.ones(3, F32)
    refused(tmp_path / "c", t, "model.layers.0.mlp.other.SCB", "without its 'model.layers.0.mlp.other.weight'")


def test_exported_in_bf16_it_is_a_plain_checkpoint(tmp_path):
    tensors = case()
    write_checkpoint(tmp_path / "snap", tensors, CONFIG)
    assert convert(tmp_path / "snap", tmp_path / "a.iris").returncode == 0
    r = subprocess.run([IRIS, "export", str(tmp_path / "a.iris"), "-o", str(tmp_path / "bf16") + "/", "--dtype", "bf16", "-q"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = raw_safetensors(tmp_path / "bf16")
    assert out["model.layers.0.mlp.down_proj.weight"][0] == "BF16" and "model.layers.0.mlp.down_proj.SCB" not in out
    cfg = json.loads((tmp_path / "bf16" / "config.json").read_text())
    assert "quantization_config" not in cfg
