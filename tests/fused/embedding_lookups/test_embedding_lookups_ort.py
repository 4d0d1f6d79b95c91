"""EmbeddingLookups in ONNX Runtime: the library's C++ CPU kernel (a model with no fallback function:
only the kernel can run it), the fallback function without the library, and the library's CUDA launch
of the ahead-of-time kernel where a GPU is present. Rows are exact; an index out of range of its own
feature's table fails on the CPU with Gather's message (the feature's own bounds through the library)
and gives a row of zeros on CUDA, as ONNX Runtime's Gather does for the original lookup."""

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

from graphopt.fused import DOMAIN, DOMAIN_VERSION
from graphopt.fused.embedding_lookups import EMBEDDING_LOOKUPS
from graphopt.fused.onnx_functions import attach_functions
from graphopt.fused.onnx_schema import register_onnx_schemas
from graphopt.ort import create_session

SIZES = (7, 1, 50, 13)
NUMPY = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
INDEX = {np.int32: TensorProto.INT32, np.int64: TensorProto.INT64}
HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()


def tables(width, dtype, seed=0, sizes=SIZES):
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((sum(sizes), width)).astype(NUMPY[dtype])
    offsets = np.array([sum(sizes[:k]) for k in range(len(sizes))], dtype=np.int64)
    return table, offsets, np.array(sizes, dtype=np.int64)


def lookups_model(table, offsets, sizes, index_type, index_shape, *, wrap, function=False, opset=18):
    """Table, Offsets and Sizes as initializers, Indices the input; Y as float32 (bfloat16 cast)."""
    dtype = {np.dtype(v).name: k for k, v in NUMPY.items()}[table.dtype.name]
    out = "Y_raw" if dtype == "bfloat16" else "Y"
    nodes = [
        helper.make_node(
            EMBEDDING_LOOKUPS.name, ["Table", "Indices", "Offsets", "Sizes"], [out], domain=DOMAIN,
            name="lookups", wrap_negative=int(wrap),
        )
    ]  # fmt: skip
    if dtype == "bfloat16":
        nodes.append(helper.make_node("Cast", ["Y_raw"], ["Y"], to=TensorProto.FLOAT))
    inits = [
        numpy_helper.from_array(table, "Table"),
        numpy_helper.from_array(offsets, "Offsets"),
        numpy_helper.from_array(sizes, "Sizes"),
    ]
    y_elem = TensorProto.FLOAT if dtype == "bfloat16" else ELEM[dtype]
    graph = helper.make_graph(
        nodes, "lookups", [helper.make_tensor_value_info("Indices", INDEX[index_type], list(index_shape))],
        [helper.make_tensor_value_info("Y", y_elem, [*index_shape, table.shape[1]])], inits,
    )  # fmt: skip
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)],
        ir_version=10,
    )
    if function:
        attach_functions(model)
    register_onnx_schemas()
    onnx.checker.check_model(model, full_check=True)
    return model


def edge_indices(per_feature, index_type, *, wrap, seed=0, sizes=SIZES):
    """Each feature's first and last row (and -size, -1 where negatives wrap), the rest random."""
    rng = np.random.default_rng(seed)
    out = np.empty((len(sizes), per_feature), dtype=np.int64)
    for k, size in enumerate(sizes):
        out[k] = rng.integers(-size if wrap else 0, size, per_feature)
        edges = [0, size - 1, *([-size, -1] if wrap else [])]
        out[k, : len(edges)] = edges[:per_feature]
    return out.astype(index_type)


def run(model, indices, *, library=True, provider="CPUExecutionProvider", threads=1):
    session = create_session(model, providers=[provider], use_library=library, intra_op_num_threads=threads)
    return session.run(None, {"Indices": indices})[0]


def expected(table, indices, offsets, sizes, wrap):
    rows = EMBEDDING_LOOKUPS.reference(table, indices, offsets, sizes, wrap_negative=int(wrap))
    return rows.astype(np.float32) if rows.dtype == ml_dtypes.bfloat16 else rows


PATHS = ["library", "fallback"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("index_type", [np.int32, np.int64])
@pytest.mark.parametrize("wrap", [False, True])
def test_rows_are_exact(path, dtype, index_type, wrap):
    table, offsets, sizes = tables(24, dtype)
    indices = edge_indices(11, index_type, wrap=wrap).reshape(len(SIZES), 11, 1)
    model = lookups_model(
        table, offsets, sizes, index_type, indices.shape, wrap=wrap, function=path != "library"
    )
    y = run(model, indices, library=path == "library", threads=2)
    assert y.shape == (len(SIZES), 11, 1, 24)
    np.testing.assert_array_equal(y, expected(table, indices, offsets, sizes, wrap))


@pytest.mark.parametrize("opset", [13, 15, 21])
def test_fallback_runs_at_every_opset(opset):
    table, offsets, sizes = tables(8, "float32")
    indices = edge_indices(6, np.int64, wrap=True)
    model = lookups_model(
        table, offsets, sizes, np.int64, indices.shape, wrap=True, function=True, opset=opset
    )
    np.testing.assert_array_equal(
        run(model, indices, library=False), expected(table, indices, offsets, sizes, True)
    )


OUT_OF_RANGE = {"past_own_table": lambda size: size, "below_own_table": lambda size: -size - 1}


@pytest.mark.parametrize("bad", OUT_OF_RANGE)
@pytest.mark.parametrize("index_type", [np.int32, np.int64])
def test_out_of_range_index_fails_with_gathers_message_and_the_features_own_bounds(bad, index_type):
    table, offsets, sizes = tables(8, "float32")
    indices = edge_indices(6, index_type, wrap=True)
    value = OUT_OF_RANGE[bad](SIZES[2])
    indices[2, 4] = value
    model = lookups_model(table, offsets, sizes, index_type, indices.shape, wrap=True)
    bounds = rf"idx={value} must be within the inclusive range \[-{SIZES[2]},{SIZES[2] - 1}\]"
    with pytest.raises(InvalidArgument, match="indices element out of data bounds, " + bounds):
        run(model, indices, threads=2)
    # The original lookup on feature 2's own table fails in ONNX Runtime with the same words.
    original = helper.make_model(
        helper.make_graph(
            [helper.make_node("Gather", ["T", "I"], ["Y"])], "original",
            [helper.make_tensor_value_info("I", INDEX[index_type], [6])],
            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(table[offsets[2] : offsets[2] + sizes[2]], "T")],
        ),
        opset_imports=[helper.make_opsetid("", 18)], ir_version=10,
    )  # fmt: skip
    with pytest.raises(InvalidArgument, match="indices element out of data bounds, " + bounds):
        create_session(original, providers=["CPUExecutionProvider"], use_library=False).run(
            None, {"I": indices[2]}
        )
    function = lookups_model(table, offsets, sizes, index_type, indices.shape, wrap=True, function=True)
    with pytest.raises(InvalidArgument, match=f"out of data bounds, idx={sum(SIZES)} must be"):
        run(function, indices, library=False)


def test_negative_index_without_wrap_is_out_of_range():
    table, offsets, sizes = tables(8, "float32")
    indices = edge_indices(3, np.int64, wrap=False)
    indices[1, 2] = -1
    for function in (False, True):
        model = lookups_model(table, offsets, sizes, np.int64, indices.shape, wrap=False, function=function)
        with pytest.raises(InvalidArgument, match="out of data bounds"):
            run(model, indices, library=not function)


def test_tables_that_do_not_fit_fail_with_a_clear_error():
    table, offsets, sizes = tables(8, "float32")
    sizes = sizes.copy()
    sizes[3] += 1
    model = lookups_model(table, offsets, sizes, np.int64, (4, 2), wrap=False)
    with pytest.raises(
        InvalidArgument, match=r"feature 3's table \(Offsets 58, Sizes 14\) does not fit Table's 71"
    ):
        run(model, np.zeros((4, 2), dtype=np.int64))


def test_bad_index_type_and_shapes_are_refused():
    table, offsets, sizes = tables(8, "float32")
    model = lookups_model(table, offsets, sizes, np.int64, (4, 2), wrap=False)
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT
    with pytest.raises(Exception, match="Indices must be int32 or int64"):
        run(model, np.zeros((4, 2), dtype=np.float32))
    model = lookups_model(table, offsets, sizes, np.int64, (3, 2), wrap=False)
    with pytest.raises(Exception, match=r"Offsets \(\[N\], N = Indices.shape\[0\]\) must have shape \[3\]"):
        run(model, np.zeros((3, 2), dtype=np.int64))


def test_shape_inference_gives_indices_shape_and_the_width():
    table, offsets, sizes = tables(8, "float16")
    model = lookups_model(table, offsets, sizes, np.int32, (4, "batch"), wrap=False)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    (y,) = inferred.graph.output
    assert y.type.tensor_type.elem_type == TensorProto.FLOAT16
    assert [d.dim_param or d.dim_value for d in y.type.tensor_type.shape.dim] == [4, "batch", 8]
    session = create_session(model, providers=["CPUExecutionProvider"])
    assert session.get_outputs()[0].shape == [4, "batch", 8]


@pytest.mark.skipif(not HAS_CUDA, reason="needs onnxruntime-gpu and a GPU")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("index_type", [np.int32, np.int64])
@pytest.mark.parametrize("width", [16, 10, 64, 1500])
def test_cuda_rows_are_exact_and_out_of_range_rows_are_zeros(dtype, index_type, width):
    table, offsets, sizes = tables(width, dtype)
    indices = edge_indices(300, index_type, wrap=True)
    model = lookups_model(table, offsets, sizes, index_type, indices.shape, wrap=True)
    want = expected(table, indices, offsets, sizes, True)
    np.testing.assert_array_equal(run(model, indices, provider="CUDAExecutionProvider"), want)
    indices[2, 7], indices[3, 9] = SIZES[2], -SIZES[3] - 1
    want[2, 7], want[3, 9] = 0, 0
    np.testing.assert_array_equal(run(model, indices, provider="CUDAExecutionProvider"), want)
