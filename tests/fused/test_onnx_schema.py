import threading

import onnx
import pytest
from onnx import TensorProto, defs, helper

from graphopt.fused import DOMAIN, DOMAIN_VERSION, FUSED_OPS, NORM_ACT, NORM_ACT_LINEAR
from graphopt.fused.onnx_schema import register_onnx_schemas
from graphopt.fused.spec import INDEX, INT64, STORAGE

register_onnx_schemas()


def one_node_model(op_name, inputs, outputs, elem=TensorProto.FLOAT, **attrs):
    """``inputs`` and ``outputs`` map names to shapes; the checker wants shapes on graph outputs."""
    node = helper.make_node(op_name, list(inputs), list(outputs), domain=DOMAIN, **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(name, elem, shape) for name, shape in inputs.items()],
        [helper.make_tensor_value_info(name, elem, shape) for name, shape in outputs.items()],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)],
        ir_version=10,
    )


def inferred_output_shapes(model):
    for output in model.graph.output:
        output.type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    dims = {o.name: o.type.tensor_type.shape.dim for o in inferred.graph.output}
    return {name: [d.dim_param or d.dim_value for d in shape] for name, shape in dims.items()}


@pytest.mark.parametrize("op", FUSED_OPS, ids=lambda op: op.name)
def test_schema_follows_the_table(op):
    schema = defs.get_schema(op.name, DOMAIN_VERSION, DOMAIN)
    assert schema.since_version == DOMAIN_VERSION
    assert [p.name for p in schema.inputs] == [p.name for p in op.inputs]
    optional = defs.OpSchema.FormalParameterOption.Optional
    assert [p.option == optional for p in schema.inputs] == [p.optional for p in op.inputs]
    assert [p.name for p in schema.outputs] == [p.name for p in op.outputs]
    for attribute in op.attributes:
        default = helper.get_attribute_value(schema.attributes[attribute.name].default_value)
        default = default.decode() if isinstance(default, bytes) else default
        assert default == pytest.approx(attribute.default)
    allowed = {c.type_param_str: sorted(c.allowed_type_strs) for c in schema.type_constraints}
    expected = {"T": ["tensor(bfloat16)", "tensor(float)", "tensor(float16)"]}
    if any(p.element == INDEX for p in op.inputs):
        expected["Tind"] = ["tensor(int32)", "tensor(int64)"]
    assert allowed == expected
    types = {p.name: p.type_str for p in schema.inputs}
    assert types == {
        p.name: {STORAGE: "T", INDEX: "Tind", INT64: "tensor(int64)"}[p.element] for p in op.inputs
    }


def test_registration_is_idempotent_across_threads():
    threads = [threading.Thread(target=register_onnx_schemas) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(s.domain == DOMAIN for s in defs.get_all_schemas_with_history()) == len(FUSED_OPS)


def test_checker_accepts_norm_act_and_infers_both_outputs():
    model = one_node_model(
        NORM_ACT.name,
        {"X": ["batch", 4, 16], "Scale": [16], "Bias": [16], "Residual": ["batch", 4, 16]},
        {"Y": ["batch", 4, 16], "ResidualSum": ["batch", 4, 16]},
        elem=TensorProto.FLOAT16,
        norm="rms",
        activation="silu",
        epsilon=1e-6,
        axis=-1,
    )
    onnx.checker.check_model(model, full_check=True)
    assert inferred_output_shapes(model) == {"Y": ["batch", 4, 16], "ResidualSum": ["batch", 4, 16]}


def test_norm_act_linear_output_shape_takes_weight_rows():
    model = one_node_model(
        NORM_ACT_LINEAR.name,
        {"X": ["batch", 7, 32], "Scale": [32], "Bias": [32], "Weight": [5, 32]},
        {"Y": ["batch", 7, 5]},
        out_activation="tanh",
    )
    onnx.checker.check_model(model, full_check=True)
    assert inferred_output_shapes(model) == {"Y": ["batch", 7, 5]}


def test_checker_rejects_an_integer_input():
    model = one_node_model(NORM_ACT.name, {"X": [2, 8]}, {"Y": [2, 8]}, elem=TensorProto.INT32)
    with pytest.raises(onnx.shape_inference.InferenceError, match=r"unsupported type: tensor\(int32\)"):
        onnx.checker.check_model(model, full_check=True)


def test_checker_rejects_a_misspelled_attribute():
    model = one_node_model(NORM_ACT.name, {"X": [2, 8]}, {"Y": [2, 8]}, eps=1e-5)
    with pytest.raises(onnx.checker.ValidationError, match="eps"):
        onnx.checker.check_model(model, full_check=True)
