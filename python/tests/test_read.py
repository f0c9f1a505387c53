"""The pure-Python reader against `iris inspect --json` and `iris export`: every tensor,
component and embedded file of every fixture archive, bit for bit."""

import json

import pytest

import iris_archive as iris
from conftest import FIXTURES, read_safetensors, run_iris

FIXTURE_NAMES = ["gptoss-mxfp4", "llama-bf16", "llama-nf4-dq", "llama-fp8-block"]


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_tensors_match_inspect_and_export(converted, tmp_path, fixture):
    path = converted(fixture)
    a = iris.open(path)
    a.verify()
    inspected = json.loads(run_iris("inspect", path, "--json").stdout)
    assert [t["name"] for t in inspected["tensors"]] == list(a.tensors)
    assert a.model_type == inspected.get("model_type", "")
    for tj in inspected["tensors"]:
        t = a.tensors[tj["name"]]
        assert list(t.shape) == tj["shape"]
        assert t.format == tj["format"] and t.dtype == tj["dtype"]
        comps = t.components
        assert [c["role"] for c in tj["components"]] == list(comps)
        for c in tj["components"]:
            assert comps[c["role"]].nbytes == c["bytes"]
    # `iris export --dtype keep`: raw tensors are the archive's bytes, quantized ones the
    # source's companions (the codes untiled).
    st = tmp_path / "keep.safetensors"
    run_iris("export", path, "-o", st, "-q")
    exported = read_safetensors(st)
    for name, t in a.tensors.items():
        if not t.quantized:
            assert t.numpy().tobytes() == exported[name].tobytes(), name
        elif t.format == "mxfp4":
            assert t.components["scales"].tobytes() == exported[name + "_scales"].tobytes()
        elif t.format == "nf4":
            assert t.components["absmax"].tobytes() == exported[name + ".absmax"].tobytes()
        elif t.format == "fp8_e4m3":
            assert t.components["scales"].tobytes() == exported[name + "_scale_inv"].tobytes()


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_embedded_files_are_the_snapshots(converted, fixture):
    a = iris.open(converted(fixture))
    assert "config.json" in a.files
    for name in a.files:
        assert a.files[name] == (FIXTURES / fixture / name).read_bytes()


def test_views_are_zero_copy_and_read_only(converted):
    a = iris.open(converted("llama-bf16"))
    t = a.tensors["model.embed_tokens.weight"]
    x = t.numpy()
    assert x.dtype == iris.bfloat16() and not x.flags.writeable  # BF16: ml_dtypes' type where installed, else the bits
    assert x.base is not None  # a view of the mapping, not a copy
    with pytest.raises(iris.IrisError, match="is quantized"):
        iris.open(converted("llama-nf4-dq")).tensors["model.layers.0.mlp.up_proj.weight"].numpy()


def test_open_leaves_the_collector_as_it_found_it(converted):
    """open() pauses the garbage collector and moves what it made to the oldest generation,
    but never unfreezes what the process froze itself, nor enables a collector it found off."""
    import gc

    path = converted("llama-bf16")
    before = gc.get_freeze_count()  # not 0 where an imported library froze objects (torch, on the GPU machine)
    gc.disable()
    try:
        iris.open(path)
        assert not gc.isenabled()
    finally:
        gc.enable()
    iris.open(path)
    assert gc.isenabled() and gc.get_freeze_count() == before
    kept = [[i] for i in range(100)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        iris.open(path)
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()
    del kept


def test_a_conversion_part_reads_as_its_tensors_with_its_record(tmp_path):
    """A part (`iris convert --part`, FORMAT.md section 9) is an archive of its tensors: the
    reader opens it (version 2.1), verifies it, and gives its part record; the parts' tensors,
    together and in order, are the whole archive's."""
    whole = tmp_path / "whole.iris"
    run_iris("convert", str(FIXTURES / "llama-bf16"), "-o", str(whole), "-q", "--quant", "nf4")
    names = []
    for i in (1, 2, 3):
        part = tmp_path / f"p{i}.iris"
        run_iris("convert", str(FIXTURES / "llama-bf16"), "-o", str(part), "-q", "--quant", "nf4", "--part", f"{i}/3")
        a = iris.open(part)
        a.verify()
        assert a.version == (2, 1)
        assert a.metadata["part"]["index"] == i and a.metadata["part"]["count"] == 3
        assert a.metadata["part"]["first_tensor"] == len(names)
        names += list(a.tensors)
    w = iris.open(whole)
    assert w.version == (2, 0) and "part" not in w.metadata
    assert names == list(w.tensors)
