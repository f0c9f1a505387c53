"""A manifest of 36,096 tensors (Qwen3-235B-A22B's expert-tensor count, issue 24 item 5) opens
and reads back what was written. Correctness only: python/bench_open.py times it."""

import iris_archive as iris
from synthetic_archive import write_expert_archive


def test_36k_tensor_archive_opens(tmp_path):
    path = tmp_path / "moe.iris"
    write_expert_archive(path, 36096)
    a = iris.open(path)
    assert len(a.tensors) == 36096
    last = a.tensors["model.layers.93.mlp.experts.127.down_proj.weight"]
    assert last.shape == (64, 256) and last.format == "mxfp4" and last.layout["kind"] == "tiled"
    assert [c[0] for c in last._components] == ["codes", "scales"]
    assert last.components["scales"].shape == (64, 8)
    # Tensors that share a descriptor do not share what a caller may change.
    first = a.tensors["model.layers.0.mlp.experts.0.gate_proj.weight"]
    assert first.layout == last.layout and first.layout is not last.layout
    assert a.model_type == "qwen3_moe"
    a.tensors["model.layers.5.mlp.experts.3.up_proj.weight"].verify()
