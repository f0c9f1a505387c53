"""Archive sets (FORMAT.md section 10, `iris convert --max-file-size`) read by the Python package
as the whole archive: the same tensors in order with the same bytes, values and embedded files;
a set that is not complete and consistent is refused naming the member."""

import shutil

import numpy as np
import pytest

import iris_archive as iris
from conftest import run_iris, FIXTURES


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("set")
    run_iris("convert", FIXTURES / "llama-bf16", "-o", d / "whole.iris", "-q", "--quant", "nf4")
    run_iris("convert", FIXTURES / "llama-bf16", "-o", d / "s.iris", "-q", "--quant", "nf4", "--max-file-size", "320KB")
    return d


def test_a_set_reads_as_the_whole_archive(pair):
    with iris.open(pair / "whole.iris") as w, iris.open(pair / "s.iris") as s:
        assert s.version == (2, 2)
        assert len(s.data_files) >= 3 and w.data_files == [str(pair / "whole.iris")]
        assert list(s.keys()) == list(w.keys())
        for name in w.keys():
            a, b = w.tensors[name], s.tensors[name]
            assert (a.shape, a.format, a.dtype, a.params, a.layout) == (b.shape, b.format, b.dtype, b.params, b.layout)
            for role, x in a.components.items():
                assert np.array_equal(x, b.components[role]), (name, role)
            assert np.array_equal(w.get_tensor(name).view(np.uint8), s.get_tensor(name).view(np.uint8)), name
            assert b.dequantize_rows(0, 1, backend="numpy").tobytes() == a.dequantize_rows(0, 1, backend="numpy").tobytes()
        assert list(s.files) == list(w.files)
        assert s.files["config.json"] == w.files["config.json"]
        s.verify()


def members(folder):
    return sorted(folder.glob("s-*-of-*.iris"))


def test_a_damaged_member_fails_verify(pair, tmp_path):
    for f in pair.iterdir():
        shutil.copy(f, tmp_path / f.name)
    member = members(tmp_path)[1]
    data = bytearray(member.read_bytes())
    data[-10] ^= 0x40
    member.write_bytes(bytes(data))
    with iris.open(tmp_path / "s.iris") as s:
        with pytest.raises(iris.CorruptError, match=member.name):
            s.verify()


def test_an_incomplete_or_mixed_set_is_refused_naming_the_member(pair, tmp_path):
    for f in pair.iterdir():
        shutil.copy(f, tmp_path / f.name)
    member, other = members(tmp_path)[2], members(tmp_path)[1]
    kept = member.read_bytes()
    member.unlink()
    with pytest.raises(FileNotFoundError, match=member.name):
        iris.open(tmp_path / "s.iris")
    member.write_bytes(other.read_bytes())  # another member under its name
    with pytest.raises(iris.IrisError, match=rf"\({member.name}\): is not the file this index lists"):
        iris.open(tmp_path / "s.iris")
    member.write_bytes(kept)
    iris.open(tmp_path / "s.iris").close()
    # A member opened alone is an archive of its tensors, marked as a member.
    with iris.open(member) as m:
        assert m.metadata["set_member"]["index"] == 3 and 0 < len(m) < 21


def rewrite_manifest(src, dst, edit):
    """The archive at src with its manifest JSON edited and every checksum made good."""
    import json
    import struct

    from iris_archive._archive import _xxh3

    b = bytearray(src.read_bytes())
    msize, doff = struct.unpack_from("<Q", b, 24)[0], struct.unpack_from("<Q", b, 32)[0]
    m = json.loads(bytes(b[64:64 + msize]))
    edit(m)
    text = json.dumps(m, indent=1, sort_keys=True).encode()
    assert 64 + len(text) <= doff
    b[64:doff] = text + bytes(doff - 64 - len(text))
    struct.pack_into("<Q", b, 24, len(text))
    struct.pack_into("<Q", b, 48, _xxh3(text))
    struct.pack_into("<Q", b, 56, _xxh3(bytes(b[:56])))
    dst.write_bytes(bytes(b))


def test_an_index_listed_as_a_member_is_refused_not_followed(pair, tmp_path):
    """A cycle of indexes (the index names itself as a member, checksums made good) is refused,
    not followed."""
    rewrite_manifest(pair / "s.iris", tmp_path / "loop.iris", lambda m: m["set"]["files"][0].update(name="loop.iris"))
    with pytest.raises(iris.IrisError, match="is itself an archive set's index"):
        iris.open(tmp_path / "loop.iris")


def test_a_rank_of_a_sharded_archive_holds_its_boxes(tmp_path):
    """open_rank (what iris.torch.load(rank=, world_size=) opens): rank r of a folder of rank
    archives, its tensors the boxes its record states, their values those boxes of the whole
    archive's (numpy decoder on both sides)."""
    run_iris("convert", FIXTURES / "llama-bf16", "-o", tmp_path / "w.iris", "-q", "--quant", "mxfp4")
    run_iris("shard", tmp_path / "w.iris", "--tp", "2", "-o", tmp_path / "r", "-q")
    with iris.open(tmp_path / "w.iris") as whole:
        for rank in range(2):
            with iris.open_rank(tmp_path / "r", rank, 2) as a:
                rec = a.metadata["rank"]
                assert rec["index"] == rank and rec["world"] == 2 and a.version == (2, 3)
                boxes = {e["name"]: e for e in rec["tensors"]}
                assert list(boxes) == list(a.keys())
                for name in a.keys():
                    e = boxes[name]
                    box = tuple(slice(s, s + c) for s, c in zip(e["start"], e["count"]))
                    want = whole.tensors[name].dequantize(backend="numpy")[box]
                    got = a.tensors[name].dequantize(backend="numpy")
                    assert got.shape == tuple(e["count"]) and got.tobytes() == want.tobytes(), name
    with pytest.raises(iris.IrisError, match="not rank 1 of a world of 2"):
        (tmp_path / "r" / "rank-00001-of-00002.iris").rename(tmp_path / "x.iris")
        (tmp_path / "r" / "rank-00000-of-00002.iris").rename(tmp_path / "r" / "rank-00001-of-00002.iris")
        iris.open_rank(tmp_path / "r", 1, 2)
    with pytest.raises(iris.IrisError, match="rank 2 is not in a world of 2"):
        iris.open_rank(tmp_path / "r", 2, 2)
    # A record whose index is JSON true (equal to 1 in Python, not an unsigned integer): refused.
    run_iris("shard", tmp_path / "w.iris", "--tp", "2", "-o", tmp_path / "t", "-q")
    one = tmp_path / "t" / "rank-00001-of-00002.iris"
    rewrite_manifest(one, one, lambda m: m["rank"].update(index=True))
    with pytest.raises(iris.IrisError, match="not rank 1 of a world of 2"):
        iris.open_rank(tmp_path / "t", 1, 2)
