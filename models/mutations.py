"""Damaged model files for fuzzing the loaders and the command line: mutations of valid files.

    from models.mutations import mutate_onnx, mutate_pt2
    data, how = mutate_onnx(valid_bytes, random.Random(case))     # -> (bytes, "bit flips x3")

Byte-level mutations (truncation, bit flips, overwritten, inserted, deleted or repeated runs, random
bytes) test the parsers; structure-aware ones (a parsed ModelProto with one field changed and
serialized again; a .pt2 zip rebuilt with valid checksums around a changed member) get past the parsers
and test everything after them: checks, frontends, passes, backends, the numeric check.
"""

from __future__ import annotations

import io
import json
import random
import zipfile
from collections.abc import Callable

import onnx
from onnx import TensorProto

# -- bytes ---------------------------------------------------------------------------------------


def truncate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    cut = rng.randrange(len(data))
    return data[:cut], f"truncated to {cut} of {len(data)} bytes"


def flip_bits(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    mutable = bytearray(data)
    count = rng.choice((1, 1, 2, 3, 8))
    for _ in range(count):
        mutable[rng.randrange(len(mutable))] ^= 1 << rng.randrange(8)
    return bytes(mutable), f"{count} bit flip(s)"


def overwrite(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    mutable = bytearray(data)
    start = rng.randrange(len(mutable))
    run = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    mutable[start : start + len(run)] = run
    return bytes(mutable), f"{len(run)} byte(s) overwritten at {start}"


def insert(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    where = rng.randrange(len(data) + 1)
    run = bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
    return data[:where] + run + data[where:], f"{len(run)} byte(s) inserted at {where}"


def delete(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    start = rng.randrange(len(data))
    end = min(len(data), start + rng.randint(1, 64))
    return data[:start] + data[end:], f"bytes {start}:{end} deleted"


def repeat(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    start = rng.randrange(len(data))
    end = min(len(data), start + rng.randint(1, 64))
    return data[:end] + data[start:end] + data[end:], f"bytes {start}:{end} repeated"


def random_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    size = rng.choice((1, 7, 64, 1000, 100_000))
    return bytes(rng.randrange(256) for _ in range(size)), f"{size} random bytes"


BYTE_MUTATIONS: tuple[Callable[[bytes, random.Random], tuple[bytes, str]], ...] = (
    truncate,
    flip_bits,
    flip_bits,
    overwrite,
    insert,
    delete,
    repeat,
    random_bytes,
)

# -- ONNX structure ------------------------------------------------------------------------------

_ODD_INTS = (0, -1, 1, 2, 3, 7, 2**31 - 1, -(2**31), 2**40, 10**9)
_ODD_NAMES = ("", "x", "y", "missing", "Relu", "\u00e9", "a" * 300)
_OP_TYPES = ("Relu", "Add", "Split", "Reshape", "LayerNormalization", "Concat", "NoSuchOp", "If", "Gather")


def _set_dim(model: onnx.ModelProto, rng: random.Random) -> str:
    infos = [*model.graph.input, *model.graph.output, *model.graph.value_info]
    dims = [d for info in infos for d in info.type.tensor_type.shape.dim]
    if not dims:
        return "no dims to change"
    dim = rng.choice(dims)
    if rng.random() < 0.3:
        dim.dim_param = rng.choice(("batch", "", "N", "unk__0"))
        return f"dim set to symbol {dim.dim_param!r}"
    dim.dim_value = rng.choice(_ODD_INTS)
    return f"dim set to {dim.dim_value}"


def _tensor_dims(model: onnx.ModelProto, rng: random.Random) -> str:
    tensors = list(model.graph.initializer)
    if not tensors:
        return "no initializer"
    tensor = rng.choice(tensors)
    if tensor.dims and rng.random() < 0.5:
        tensor.dims[rng.randrange(len(tensor.dims))] = rng.choice(_ODD_INTS)
    else:
        tensor.dims.append(rng.choice((1, 2, 0)))
    return f"dims of {tensor.name!r} set to {list(tensor.dims)}"


def _tensor_type(model: onnx.ModelProto, rng: random.Random) -> str:
    tensors = list(model.graph.initializer)
    infos = [*model.graph.input, *model.graph.output]
    elem = rng.choice((TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.STRING, 0, 99))
    if tensors and rng.random() < 0.5:
        tensor = rng.choice(tensors)
        tensor.data_type = elem
        return f"type of {tensor.name!r} set to {elem}"
    if infos:
        info = rng.choice(infos)
        info.type.tensor_type.elem_type = elem
        return f"type of {info.name!r} set to {elem}"
    return "nothing typed"


def _tensor_data(model: onnx.ModelProto, rng: random.Random) -> str:
    tensors = [t for t in model.graph.initializer if t.raw_data]
    if not tensors:
        return "no raw data"
    tensor = rng.choice(tensors)
    raw = bytearray(tensor.raw_data)
    choice = rng.randrange(3)
    if choice == 0:
        del raw[rng.randrange(len(raw)) :]
        what = "shortened"
    elif choice == 1:
        raw += b"\0" * rng.randint(1, 8)
        what = "lengthened"
    else:
        for _ in range(4):
            raw[rng.randrange(len(raw))] = 0xFF  # NaN and inf patterns in float data
        what = "filled with 0xFF bytes"
    tensor.raw_data = bytes(raw)
    return f"data of {tensor.name!r} {what}"


def _node_io(model: onnx.ModelProto, rng: random.Random) -> str:
    nodes = list(model.graph.node)
    if not nodes:
        return "no node"
    node = rng.choice(nodes)
    names = [n for other in nodes for n in other.output] + [i.name for i in model.graph.input]
    names += [t.name for t in model.graph.initializer] + list(_ODD_NAMES)
    ios = node.input if (rng.random() < 0.6 or not node.output) else node.output
    if ios and rng.random() < 0.7:
        index = rng.randrange(len(ios))
        ios[index] = rng.choice(names)
        return f"{node.name or node.op_type}: an input/output renamed to {ios[index]!r}"
    if ios and rng.random() < 0.5:
        del ios[rng.randrange(len(ios))]
        return f"{node.name or node.op_type}: an input/output removed"
    ios.append(rng.choice(names))
    return f"{node.name or node.op_type}: an input/output added"


def _node_op(model: onnx.ModelProto, rng: random.Random) -> str:
    nodes = list(model.graph.node)
    if not nodes:
        return "no node"
    node = rng.choice(nodes)
    if rng.random() < 0.8:
        node.op_type = rng.choice(_OP_TYPES)
        return f"{node.name!r} became {node.op_type}"
    node.domain = rng.choice(("graphopt", "com.microsoft", "ai.onnx", "nowhere"))
    return f"{node.name!r} moved to domain {node.domain!r}"


def _attribute(model: onnx.ModelProto, rng: random.Random) -> str:
    nodes = [n for n in model.graph.node if n.attribute]
    if not nodes:
        node = rng.choice(list(model.graph.node)) if model.graph.node else None
        if node is None:
            return "no node"
        node.attribute.append(onnx.helper.make_attribute(rng.choice(("axis", "epsilon", "perm")), 5))
        return f"{node.name!r} got an attribute"
    node = rng.choice(nodes)
    attribute = rng.choice(list(node.attribute))
    kind = rng.randrange(4)
    if kind == 0:
        attribute.i = rng.choice(_ODD_INTS)
    elif kind == 1:
        attribute.f = rng.choice((0.0, -1.0, float("nan"), float("inf"), 1e30))
    elif kind == 2:
        attribute.type = rng.choice(list(onnx.AttributeProto.AttributeType.values()))
    else:
        del node.attribute[list(node.attribute).index(attribute)]
    return f"{node.name!r}: attribute {attribute.name!r} changed"


def _structure(model: onnx.ModelProto, rng: random.Random) -> str:
    graph = model.graph
    kind = rng.randrange(6)
    if kind == 0 and graph.node:
        del graph.node[rng.randrange(len(graph.node))]
        return "a node removed"
    if kind == 1 and graph.node:
        graph.node.append(graph.node[rng.randrange(len(graph.node))])
        return "a node duplicated"
    if kind == 2 and len(graph.node) > 1:
        i, j = rng.sample(range(len(graph.node)), 2)
        a, b = onnx.NodeProto(), onnx.NodeProto()
        a.CopyFrom(graph.node[i])
        b.CopyFrom(graph.node[j])
        graph.node[i].CopyFrom(b)
        graph.node[j].CopyFrom(a)
        return "two nodes swapped"
    if kind == 3 and graph.output:
        del graph.output[rng.randrange(len(graph.output))]
        return "an output removed"
    if kind == 4 and graph.initializer:
        del graph.initializer[rng.randrange(len(graph.initializer))]
        return "an initializer removed"
    model.opset_import[0].version = rng.choice((1, 6, 7, 11, 13, 17, 21, 25, 99))
    return f"opset set to {model.opset_import[0].version}"


ONNX_MUTATIONS = (
    _set_dim,
    _tensor_dims,
    _tensor_type,
    _tensor_data,
    _node_io,
    _node_op,
    _attribute,
    _structure,
)


def mutate_onnx(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One mutation of a serialized ONNX model: at the byte level or (half the time) in its structure."""
    if rng.random() < 0.5:
        mutation = rng.choice(BYTE_MUTATIONS)
        return mutation(data, rng)
    model = onnx.ModelProto()
    model.ParseFromString(data)
    mutation = rng.choice(ONNX_MUTATIONS)
    how = mutation(model, rng)
    return model.SerializeToString(), how


# -- PT2 (zip) structure -------------------------------------------------------------------------


def _mutate_json(text: str, rng: random.Random) -> tuple[str, str]:
    try:
        document = json.loads(text)
    except ValueError:
        return text[: rng.randrange(len(text) + 1)], "text truncated"
    places = []

    def walk(node, parent, key):
        places.append((parent, key, node))
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, node, k)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, node, i)

    walk(document, None, None)
    parent, key, node = rng.choice(places[1:] or places)
    if parent is None:
        return json.dumps(rng.choice(([], {}, 0, "x"))), "document replaced"
    replacement = rng.choice((None, 0, -1, 10**12, "", "x", [], {}, 1.5, True))
    if isinstance(node, str) and rng.random() < 0.5:
        replacement = node[::-1] if node else "?"
    if isinstance(parent, dict) and rng.random() < 0.2:
        del parent[key]
        return json.dumps(document), f"key {key!r} removed"
    parent[key] = replacement
    return json.dumps(document), f"{key!r} set to {replacement!r}"


def mutate_pt2(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One mutation of a torch.export archive: at the byte level (a third of the time), or a member
    changed, removed or renamed in a zip rebuilt with valid checksums."""
    if rng.random() < 0.33:
        mutation = rng.choice(BYTE_MUTATIONS)
        return mutation(data, rng)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = [(info, archive.read(info.filename)) for info in archive.infolist()]
    index = rng.randrange(len(members))
    info, content = members[index]
    kind = rng.randrange(5)
    if kind == 0:
        del members[index]
        how = f"{info.filename} removed"
    elif kind == 1:
        info.filename = info.filename + rng.choice(("x", "/", ".json"))
        how = f"{info.filename} renamed"
    elif kind == 2 and info.filename.endswith(".json"):
        text, detail = _mutate_json(content.decode("utf-8", errors="replace"), rng)
        members[index] = (info, text.encode())
        how = f"{info.filename}: {detail}"
    else:
        mutated, detail = rng.choice(BYTE_MUTATIONS[:-1])(content or b"\0", rng)
        members[index] = (info, mutated)
        how = f"{info.filename}: {detail}"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for member, body in members:
            archive.writestr(member.filename, body)
    return out.getvalue(), how
