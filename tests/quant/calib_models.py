"""Float models and data for the implicit-INT8 calibration tests (test_calibration.py): a small
ResNet-style CNN (BatchNorm, residual Add, pools, Gemm) and a transformer-like block (projections
as MatMul + bias, single-head attention whose activation x activation MatMuls stay float, Softmax,
LayerNormalization, GELU-free ReLU MLP), made with onnx.helper and seeded NumPy weights."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _init(rng, name, shape, scale=None):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    w = rng.standard_normal(shape).astype(np.float32) * (scale if scale is not None else np.sqrt(2.0 / fan_in))
    return numpy_helper.from_array(w.astype(np.float32), name)


def small_cnn(path, seed=0):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def conv(name, x, cin, cout, k, stride=1, relu=True):
        inits.append(_init(rng, name + "_w", [cout, cin, k, k]))
        nodes.append(helper.make_node("Conv", [x, name + "_w"], [name + "_c"], name=name, kernel_shape=[k, k],
                                      pads=[k // 2] * 4, strides=[stride, stride]))
        # BatchNorm with non-trivial statistics, folded by kiln into the conv before quantization
        for p, v in (("scale", 1 + 0.1 * rng.standard_normal(cout)), ("bias", 0.1 * rng.standard_normal(cout)),
                     ("mean", 0.1 * rng.standard_normal(cout)), ("var", 1 + 0.1 * rng.random(cout))):
            inits.append(numpy_helper.from_array(v.astype(np.float32), f"{name}_bn_{p}"))
        out = name + ("_bn" if relu else "")
        nodes.append(helper.make_node("BatchNormalization", [name + "_c"] + [f"{name}_bn_{p}" for p in ("scale", "bias", "mean", "var")],
                                      [out if relu else name + "_out"], name=name + "_bn"))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [name + "_out"], name=name + "_relu"))
        return name + "_out"

    x = conv("conv1", "x", 3, 16, 3)
    y = conv("block1_conv1", x, 16, 16, 3)
    y = conv("block1_conv2", y, 16, 16, 3, relu=False)
    nodes.append(helper.make_node("Add", [x, y], ["block1_sum"], name="block1_add"))
    nodes.append(helper.make_node("Relu", ["block1_sum"], ["block1_out"], name="block1_relu"))
    z = conv("block2_conv1", "block1_out", 16, 32, 3, stride=2)
    z = conv("block2_conv2", z, 32, 32, 3, relu=False)
    d = conv("block2_down", "block1_out", 16, 32, 1, stride=2, relu=False)
    nodes.append(helper.make_node("Add", [z, d], ["block2_sum"], name="block2_add"))
    nodes.append(helper.make_node("Relu", ["block2_sum"], ["block2_out"], name="block2_relu"))
    nodes.append(helper.make_node("GlobalAveragePool", ["block2_out"], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"))
    inits.append(_init(rng, "fc_w", [10, 32]))
    inits.append(numpy_helper.from_array((0.1 * rng.standard_normal(10)).astype(np.float32), "fc_b"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return {"x": (1, 3, 32, 32)}


def small_transformer(path, seed=1, seq=16, dim=32, hidden=64):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def linear(name, x, cin, cout):
        inits.append(_init(rng, name + "_w", [cin, cout], scale=1 / np.sqrt(cin)))
        inits.append(numpy_helper.from_array((0.05 * rng.standard_normal(cout)).astype(np.float32), name + "_b"))
        nodes.append(helper.make_node("MatMul", [x, name + "_w"], [name + "_mm"], name=name))
        nodes.append(helper.make_node("Add", [name + "_mm", name + "_b"], [name + "_out"], name=name + "_bias"))
        return name + "_out"

    q, k, v = (linear(n, "x", dim, dim) for n in ("q_proj", "k_proj", "v_proj"))
    nodes.append(helper.make_node("Transpose", [k], ["k_t"], name="k_transpose", perm=[0, 2, 1]))
    nodes.append(helper.make_node("MatMul", [q, "k_t"], ["scores"], name="qk"))
    inits.append(numpy_helper.from_array(np.array(1 / np.sqrt(dim), np.float32), "inv_sqrt_d"))
    nodes.append(helper.make_node("Mul", ["scores", "inv_sqrt_d"], ["scaled"], name="scale"))
    nodes.append(helper.make_node("Softmax", ["scaled"], ["probs"], name="softmax", axis=-1))
    nodes.append(helper.make_node("MatMul", ["probs", v], ["ctx"], name="pv"))
    o = linear("o_proj", "ctx", dim, dim)
    nodes.append(helper.make_node("Add", ["x", o], ["res1"], name="residual1"))
    inits.append(numpy_helper.from_array(np.ones(dim, np.float32), "ln_g"))
    inits.append(numpy_helper.from_array(np.zeros(dim, np.float32), "ln_b"))
    nodes.append(helper.make_node("LayerNormalization", ["res1", "ln_g", "ln_b"], ["ln"], name="layernorm", axis=-1))
    h = linear("fc1", "ln", dim, hidden)
    nodes.append(helper.make_node("Relu", [h], ["fc1_relu"], name="fc1_act"))
    f = linear("fc2", "fc1_relu", hidden, dim)
    nodes.append(helper.make_node("Add", ["res1", f], ["y"], name="residual2"))
    graph = helper.make_graph(nodes, "small_transformer",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, dim])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, dim])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return {"x": (1, seq, dim)}


def batches(shapes, count, seed):
    """`count` input batches of standard normal data (the models' input distribution)."""
    rng = np.random.default_rng(seed)
    return [{name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()} for _ in range(count)]


def write_calib_dir(directory, data):
    import os
    os.makedirs(directory, exist_ok=True)
    for k, batch in enumerate(data):
        for name, arr in batch.items():
            np.save(os.path.join(directory, f"{name}.{k}.npy" if k else f"{name}.npy"), arr)
