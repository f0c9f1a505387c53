"""Archive sets (FORMAT.md section 10): an index file and numbered member files, read as one
archive. The checks mirror formats/archive_set.cpp and IrisArchive::open_members."""

from __future__ import annotations

import os

from . import _format
from ._errors import IrisError
from ._jsontext import shown

MAX_MEMBERS = 99999
_HEX = set("0123456789abcdef")


def _u64(j: dict, key: str, ctx: str) -> int:
    v = j.get(key)
    if not _format.is_uint(v):
        raise IrisError(f"{ctx}'{key}' missing or not an unsigned integer")
    return v


def _hash(j: dict, key: str, ctx: str) -> str:
    v = j.get(key)
    if type(v) is not str or len(v) != 16 or not set(v) <= _HEX:
        raise IrisError(f"{ctx}'{key}' missing or not 16 hex digits")
    return v


def _plain_name(name) -> bool:
    return (type(name) is str and name not in ("", ".", "..") and "/" not in name and "\\" not in name
            and "\0" not in name)


def set_record(j: dict, path: str) -> dict:
    """The index's set record, checked: {"id", "tensors", "files": [{name, bytes, manifest_xxh3,
    first_tensor, tensors}]}, the members' runs joining and covering the set's tensors."""
    ctx = f"{path}: set record: "
    out = {"id": _hash(j, "id", ctx), "tensors": _u64(j, "tensors", ctx), "files": []}
    files = j.get("files")
    if type(files) is not list or not files or len(files) > MAX_MEMBERS:
        raise IrisError(f"{ctx}'files' missing, empty, or longer than {MAX_MEMBERS}")
    seen, nxt = set(), 0
    for i, f in enumerate(files):
        fctx = f"{ctx}files[{i}]: "
        if type(f) is not dict:
            raise IrisError(fctx + "not an object")
        name = f.get("name")
        if not _plain_name(name):
            raise IrisError(fctx + "'name' is not a plain file name in the index's folder")
        if name in seen:
            raise IrisError(f"{fctx}'{shown(name)}' is listed twice")
        seen.add(name)
        rec = {"name": name, "bytes": _u64(f, "bytes", fctx), "manifest_xxh3": _hash(f, "manifest_xxh3", fctx),
               "first_tensor": _u64(f, "first_tensor", fctx), "tensors": _u64(f, "tensors", fctx)}
        if rec["first_tensor"] != nxt or rec["tensors"] > out["tensors"] - min(nxt, out["tensors"]):
            raise IrisError(f"{fctx}tensors [{rec['first_tensor']}, +{rec['tensors']}) do not follow the members before it "
                            f"(which end at {nxt})")
        nxt += rec["tensors"]
        out["files"].append(rec)
    if nxt != out["tensors"]:
        raise IrisError(f"{ctx}the members hold {nxt} tensors, the set {out['tensors']}")
    return out


def member_record(j, path: str) -> dict:
    """A member's set_member record, checked."""
    ctx = f"{path}: set member record: "
    if type(j) is not dict:
        raise IrisError(f"{path}: not a member of an archive set (no set_member record)")
    r = {"id": _hash(j, "id", ctx)}
    for k in ("index", "count", "first_tensor", "tensors", "total_tensors"):
        r[k] = _u64(j, k, ctx)
    if not 1 <= r["index"] <= r["count"] <= MAX_MEMBERS:
        raise IrisError(f"{ctx}member {r['index']} of {r['count']} is out of range")
    if r["first_tensor"] > r["total_tensors"] or r["tensors"] > r["total_tensors"] - r["first_tensor"]:
        raise IrisError(f"{ctx}tensors [{r['first_tensor']}, +{r['tensors']}) lie outside the set's {r['total_tensors']}")
    return r


def open_members(index, archive_class) -> list:
    """Opens every member of the set whose index is `index` (an Archive), checks each against
    the index, and moves their tensors into the index's, in order. Returns the members."""
    path = index.path
    if index.version[1] < 2 or index.tensors or "set_member" in index.metadata:
        raise IrisError(f"{path}: an archive set's index must be version 2.2 or later, list no tensors and no member record")
    rec = set_record(index.metadata["set"], path)
    folder = os.path.dirname(path)
    count = len(rec["files"])
    members, tensors = [], {}
    try:
        for i, f in enumerate(rec["files"]):
            ctx = f"{path}: member {i + 1} of {count} ({f['name']}): "
            try:
                m = archive_class(os.path.join(folder, f["name"]))
            except IrisError as e:
                raise type(e)(ctx + str(e)) from None
            members.append(m)
            if m._set_index:
                raise IrisError(ctx + "is itself an archive set's index")
            if m._file_size != f["bytes"] or m._manifest_xxh3 != f["manifest_xxh3"]:
                raise IrisError(f"{ctx}is not the file this index lists ({m._file_size} bytes, manifest {m._manifest_xxh3}; the "
                                f"index records {f['bytes']} bytes, {f['manifest_xxh3']}): replaced, or from another conversion")
            r = member_record(m.metadata.get("set_member"), m.path)
            if (r["id"] != rec["id"] or r["index"] != i + 1 or r["count"] != count or r["first_tensor"] != f["first_tensor"]
                    or r["tensors"] != f["tensors"] or r["total_tensors"] != rec["tensors"] or len(m.tensors) != f["tensors"]):
                raise IrisError(f"{ctx}its member record (set {r['id']}, member {r['index']} of {r['count']}) does not match "
                                f"the index (set {rec['id']})")
            if len(m.files):
                raise IrisError(ctx + "a member holds embedded files (the index holds them)")
            if m.model_type != index.model_type:
                raise IrisError(f"{ctx}model type '{m.model_type}' differs from the index's '{index.model_type}'")
            for name, t in m.tensors.items():
                if name in tensors:
                    raise IrisError(f"{path}: tensor '{shown(name)}' is in two members of the set")
                tensors[name] = t
    except BaseException:
        for m in members:
            m.close()
        raise
    index.tensors = tensors
    return members
