"""ONNX graphs of real architectures, written with onnx.helper and seeded NumPy weights.

The graphs follow what torch.onnx.export (opset 17) produces for the torchvision / Hugging Face
modules: node names like "/layer1/layer1.0/conv1/Conv", Linear on 3-D activations as MatMul + Add,
Constant nodes for scalars, Shape -> Gather -> Unsqueeze -> Concat subgraphs feeding Reshape in
attention, GELU as the exported Erf or tanh formula, and the (1 - mask) * -10000 attention mask.
Weights are random (no torch here), scaled so that activations stay O(1) through deep stacks.
"""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class GraphBuilder:
    """Accumulates nodes/initializers with unique, export-like names."""

    def __init__(self, name: str, seed: int):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._used: set[str] = set()
        self._const_id = 0

    def unique(self, name: str) -> str:
        base, n = name, 1
        while name in self._used:
            name = f"{base}_{n}"
            n += 1
        self._used.add(name)
        return name

    # ---- graph I/O and weights -------------------------------------------------------------
    def add_input(self, name: str, elem_type: int, shape) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        self._used.add(name)
        return name

    def add_output(self, tensor: str, elem_type: int, shape) -> None:
        self.outputs.append(helper.make_tensor_value_info(tensor, elem_type, shape))

    def initializer(self, name: str, array: np.ndarray) -> str:
        name = self.unique(name)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def normal(self, name: str, shape, std: float) -> str:
        return self.initializer(name, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def uniform(self, name: str, shape, lo: float, hi: float) -> str:
        return self.initializer(name, self.rng.uniform(lo, hi, shape).astype(np.float32))

    def constant(self, value, dtype=np.float32, scope: str = "") -> str:
        """A Constant node, as the exporter emits for Python scalars and literal shapes."""
        self._const_id += 1
        out = self.unique(f"{scope}/Constant_{self._const_id}_output_0")
        tensor = numpy_helper.from_array(np.array(value, dtype=dtype), out)
        self.nodes.append(helper.make_node("Constant", [], [out], name=self.unique(f"{scope}/Constant"), value=tensor))
        return out

    # ---- nodes -----------------------------------------------------------------------------
    def node(self, op: str, inputs: list[str], scope: str, n_out: int = 1, **attrs):
        """Adds `op` named "<scope>/<op>" with outputs "<scope>/<op>_output_<i>"."""
        node_name = self.unique(f"{scope}/{op}")
        outs = [self.unique(f"{node_name}_output_{i}") for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=node_name, **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.initializer_list())
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="pytorch", producer_version="2.1.0")
        model.ir_version = 8  # what torch 2.x writes for opset 17
        onnx.checker.check_model(model, full_check=True)
        return model

    def initializer_list(self):
        return self.initializers


# ---- common layers ---------------------------------------------------------------------------
def conv_bn(g: GraphBuilder, x: str, scope: str, cin: int, cout: int, k: int, stride: int = 1,
            groups: int = 1, gamma_scale: float = 1.0) -> str:
    """Conv (no bias, as torchvision) + BatchNormalization (inference form)."""
    fan_in = cin // groups * k * k
    w = g.normal(f"{scope}.weight", (cout, cin // groups, k, k), math.sqrt(2.0 / fan_in))
    pad = k // 2
    y = g.node("Conv", [x, w], scope + "/conv" if "/" not in scope else scope, dilations=[1, 1], group=groups,
               kernel_shape=[k, k], pads=[pad] * 4, strides=[stride, stride])
    bn = scope.replace("conv", "bn") if "conv" in scope else scope + "_bn"
    gamma = g.initializer(f"{bn}.weight", (gamma_scale * g.rng.uniform(0.8, 1.2, cout)).astype(np.float32))
    beta = g.uniform(f"{bn}.bias", (cout,), -0.1, 0.1)
    mean = g.uniform(f"{bn}.running_mean", (cout,), -0.1, 0.1)
    var = g.uniform(f"{bn}.running_var", (cout,), 0.8, 1.2)
    return g.node("BatchNormalization", [y, gamma, beta, mean, var], bn, epsilon=1e-5, momentum=0.9)


def relu6(g: GraphBuilder, x: str, scope: str) -> str:
    """ReLU6 as exported: Clip with Constant min/max inputs."""
    lo = g.constant(0.0, scope=scope)
    hi = g.constant(6.0, scope=scope)
    return g.node("Clip", [x, lo, hi], scope)


def linear(g: GraphBuilder, x: str, scope: str, cin: int, cout: int, std: float | None = None) -> str:
    """nn.Linear on a 3-D activation: MatMul with the transposed weight, then Add of the bias."""
    std = std if std is not None else 1.0 / math.sqrt(cin)
    w = g.normal(f"onnx::MatMul_{scope}", (cin, cout), std)
    b = g.uniform(f"{scope}.bias", (cout,), -0.02, 0.02)
    y = g.node("MatMul", [x, w], scope)
    return g.node("Add", [b, y], scope)


def gemm(g: GraphBuilder, x: str, scope: str, cin: int, cout: int) -> str:
    """nn.Linear on a 2-D activation: Gemm with transB=1 (weight stored [out, in])."""
    w = g.normal(f"{scope}.weight", (cout, cin), 1.0 / math.sqrt(cin))
    b = g.uniform(f"{scope}.bias", (cout,), -0.05, 0.05)
    return g.node("Gemm", [x, w, b], scope, alpha=1.0, beta=1.0, transB=1)


def layer_norm_decomposed(g: GraphBuilder, x: str, scope: str, hidden: int, eps: float = 1e-12) -> str:
    """LayerNorm as older exporters wrote it: ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add."""
    mean = g.node("ReduceMean", [x], scope, axes=[-1], keepdims=1)
    centered = g.node("Sub", [x, mean], scope)
    sq = g.node("Pow", [centered, g.constant(2.0, scope=scope)], scope)
    var = g.node("ReduceMean", [sq], scope, axes=[-1], keepdims=1)
    std = g.node("Sqrt", [g.node("Add", [var, g.constant(eps, scope=scope)], scope)], scope)
    normed = g.node("Div", [centered, std], scope)
    gamma = g.initializer(f"{scope}.weight", g.rng.uniform(0.9, 1.1, hidden).astype(np.float32))
    beta = g.uniform(f"{scope}.bias", (hidden,), -0.05, 0.05)
    return g.node("Add", [g.node("Mul", [normed, gamma], scope), beta], scope)


def layer_norm(g: GraphBuilder, x: str, scope: str, hidden: int, eps: float = 1e-5) -> str:
    """LayerNormalization (what torch exports at opset 17)."""
    gamma = g.initializer(f"{scope}.weight", g.rng.uniform(0.9, 1.1, hidden).astype(np.float32))
    beta = g.uniform(f"{scope}.bias", (hidden,), -0.05, 0.05)
    return g.node("LayerNormalization", [x, gamma, beta], scope, axis=-1, epsilon=eps)


def gelu_erf(g: GraphBuilder, x: str, scope: str) -> str:
    """x * 0.5 * (1 + erf(x / sqrt(2))), the exported form of nn.GELU()."""
    e = g.node("Erf", [g.node("Div", [x, g.constant(1.4142135381698608, scope=scope)], scope)], scope)
    one_plus = g.node("Add", [e, g.constant(1.0, scope=scope)], scope)
    return g.node("Mul", [g.node("Mul", [x, one_plus], scope), g.constant(0.5, scope=scope)], scope)


def gelu_tanh(g: GraphBuilder, x: str, scope: str) -> str:
    """GPT-2's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    cube = g.node("Pow", [x, g.constant(3.0, scope=scope)], scope)
    inner = g.node("Add", [x, g.node("Mul", [g.constant(0.044715, scope=scope), cube], scope)], scope)
    t = g.node("Tanh", [g.node("Mul", [g.constant(math.sqrt(2.0 / math.pi), scope=scope), inner], scope)], scope)
    half_x = g.node("Mul", [g.constant(0.5, scope=scope), x], scope)
    return g.node("Mul", [half_x, g.node("Add", [g.constant(1.0, scope=scope), t], scope)], scope)


def dim_of(g: GraphBuilder, x: str, index: int, scope: str) -> str:
    """Shape(x)[index] unsqueezed to a 1-D int64 tensor: the exporter's dynamic-size pattern."""
    shape = g.node("Shape", [x], scope)
    d = g.node("Gather", [shape, g.constant(index, dtype=np.int64, scope=scope)], scope, axis=0)
    return g.node("Unsqueeze", [d, g.constant([0], dtype=np.int64, scope=scope)], scope)


def split_heads(g: GraphBuilder, x: str, scope: str, heads: int, head_dim: int, perm) -> str:
    """[B, S, H*D] -> Reshape [B, S, H, D] (shape from a Shape/Gather/Concat subgraph) -> Transpose."""
    b = dim_of(g, x, 0, scope)
    s = dim_of(g, x, 1, scope)
    h = g.constant([heads], dtype=np.int64, scope=scope)
    d = g.constant([head_dim], dtype=np.int64, scope=scope)
    shape = g.node("Concat", [b, s, h, d], scope, axis=0)
    return g.node("Transpose", [g.node("Reshape", [x, shape], scope)], scope, perm=perm)


def merge_heads(g: GraphBuilder, ctx: str, ref: str, scope: str, hidden: int) -> str:
    """[B, H, S, D] -> Transpose [B, S, H, D] -> Reshape [B, S, H*D] (sizes taken from `ref`)."""
    t = g.node("Transpose", [ctx], scope, perm=[0, 2, 1, 3])
    b = dim_of(g, ref, 0, scope)
    s = dim_of(g, ref, 1, scope)
    shape = g.node("Concat", [b, s, g.constant([hidden], dtype=np.int64, scope=scope)], scope, axis=0)
    return g.node("Reshape", [t, shape], scope)


# ---- architectures ---------------------------------------------------------------------------
def make_mlp(batch=8, dynamic=False, seed=1) -> onnx.ModelProto:
    """784 -> 512 -> 256 -> 10 with ReLU (nn.Sequential of Linear/ReLU on a 2-D input)."""
    g = GraphBuilder("mlp_dynamic" if dynamic else "mlp", seed)
    b = "batch" if dynamic else batch
    x = g.add_input("input", TensorProto.FLOAT, [b, 784])
    h = g.node("Relu", [gemm(g, x, "/fc1/Gemm", 784, 512)], "/act1/Relu")
    h = g.node("Relu", [gemm(g, h, "/fc2/Gemm", 512, 256)], "/act2/Relu")
    y = gemm(g, h, "/fc3/Gemm", 256, 10)
    g.add_output(y, TensorProto.FLOAT, [b, 10])
    model = g.model()
    rename_outputs(model, {y: "output"})
    return model


def make_resnet50(batch=1, seed=2, num_classes=1000) -> onnx.ModelProto:
    """torchvision resnet50: conv7x7/2, maxpool, bottlenecks [3, 4, 6, 3] (stride on the 3x3 conv)."""
    g = GraphBuilder("resnet50", seed)
    x = g.add_input("input", TensorProto.FLOAT, [batch, 3, 224, 224])
    y = g.node("Relu", [conv_bn(g, x, "/conv1", 3, 64, 7, stride=2)], "/relu")
    y = g.node("MaxPool", [y], "/maxpool", ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
               strides=[2, 2])
    cin = 64
    for stage, (blocks, width) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512]), start=1):
        for i in range(blocks):
            stride = 2 if (i == 0 and stage > 1) else 1
            y = bottleneck(g, y, f"/layer{stage}/layer{stage}.{i}", cin, width, stride)
            cin = width * 4
    y = g.node("GlobalAveragePool", [y], "/avgpool")
    y = g.node("Flatten", [y], "/Flatten", axis=1)
    y = gemm(g, y, "/fc/Gemm", 2048, num_classes)
    g.add_output(y, TensorProto.FLOAT, [batch, num_classes])
    model = g.model()
    rename_outputs(model, {y: "logits"})
    return model


def bottleneck(g: GraphBuilder, x: str, scope: str, cin: int, width: int, stride: int) -> str:
    cout = width * 4
    y = g.node("Relu", [conv_bn(g, x, f"{scope}/conv1", cin, width, 1)], f"{scope}/relu")
    y = g.node("Relu", [conv_bn(g, y, f"{scope}/conv2", width, width, 3, stride=stride)], f"{scope}/relu_1")
    # A small last-BN gamma keeps the residual stream bounded with random weights (cf. zero-init).
    y = conv_bn(g, y, f"{scope}/conv3", width, cout, 1, gamma_scale=0.2)
    if stride != 1 or cin != cout:
        x = conv_bn(g, x, f"{scope}/downsample/downsample.0", cin, cout, 1, stride=stride)
    return g.node("Relu", [g.node("Add", [y, x], f"{scope}")], f"{scope}/relu_2")


MOBILENET_V2_SETTINGS = [  # expansion t, channels c, repeats n, stride s (torchvision)
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def make_mobilenetv2(batch=1, seed=3, num_classes=1000) -> onnx.ModelProto:
    g = GraphBuilder("mobilenetv2", seed)
    x = g.add_input("input", TensorProto.FLOAT, [batch, 3, 224, 224])
    y = relu6(g, conv_bn(g, x, "/features/features.0/features.0.0", 3, 32, 3, stride=2), "/features/features.0/features.0.2")
    cin, idx = 32, 1
    for t, c, n, s in MOBILENET_V2_SETTINGS:
        for i in range(n):
            y = inverted_residual(g, y, f"/features/features.{idx}", cin, c, s if i == 0 else 1, t)
            cin, idx = c, idx + 1
    y = relu6(g, conv_bn(g, y, f"/features/features.{idx}/features.{idx}.0", cin, 1280, 1),
              f"/features/features.{idx}/features.{idx}.2")
    y = g.node("GlobalAveragePool", [y], "/GlobalAveragePool")
    y = g.node("Flatten", [y], "/Flatten", axis=1)
    y = gemm(g, y, "/classifier/classifier.1/Gemm", 1280, num_classes)
    g.add_output(y, TensorProto.FLOAT, [batch, num_classes])
    model = g.model()
    rename_outputs(model, {y: "logits"})
    return model


def inverted_residual(g: GraphBuilder, x: str, scope: str, cin: int, cout: int, stride: int, expand: int) -> str:
    hidden = cin * expand
    y, layer = x, 0
    if expand != 1:
        y = relu6(g, conv_bn(g, y, f"{scope}/conv/conv.0/conv.0.0", cin, hidden, 1), f"{scope}/conv/conv.0/conv.0.2")
        layer = 1
    y = relu6(g, conv_bn(g, y, f"{scope}/conv/conv.{layer}/conv.{layer}.0", hidden, hidden, 3, stride=stride,
                         groups=hidden), f"{scope}/conv/conv.{layer}/conv.{layer}.2")
    use_residual = stride == 1 and cin == cout
    y = conv_bn(g, y, f"{scope}/conv/conv.{layer + 1}", hidden, cout, 1, gamma_scale=0.3 if use_residual else 1.0)
    return g.node("Add", [x, y], scope) if use_residual else y


def make_bert(layers=2, hidden=256, heads=4, intermediate=1024, vocab=1000, max_positions=512, type_vocab=2,
              batch=2, seq=64, dynamic=False, seed=4, name="bert") -> onnx.ModelProto:
    """A Hugging Face BertModel encoder: embeddings, `layers` encoder layers, pooler."""
    g = GraphBuilder(name, seed)
    b, s = ("batch", "sequence") if dynamic else (batch, seq)
    ids = g.add_input("input_ids", TensorProto.INT64, [b, s])
    mask = g.add_input("attention_mask", TensorProto.INT64, [b, s])
    types = g.add_input("token_type_ids", TensorProto.INT64, [b, s])

    x = bert_embeddings(g, ids, types, hidden, vocab, max_positions, type_vocab)
    ext_mask = extended_attention_mask(g, mask)
    for i in range(layers):
        x = bert_layer(g, x, ext_mask, f"/encoder/layer.{i}", hidden, heads, intermediate)

    first = g.node("Gather", [x, g.constant(0, dtype=np.int64, scope="/pooler")], "/pooler", axis=1)
    pooled = g.node("Tanh", [gemm(g, first, "/pooler/dense/Gemm", hidden, hidden)], "/pooler/activation")
    g.add_output(x, TensorProto.FLOAT, [b, s, hidden])
    g.add_output(pooled, TensorProto.FLOAT, [b, hidden])
    model = g.model()
    rename_outputs(model, {x: "last_hidden_state", pooled: "pooler_output"})
    return model


def bert_embeddings(g, ids, types, hidden, vocab, max_positions, type_vocab) -> str:
    scope = "/embeddings"
    word = g.node("Gather", [g.normal("embeddings.word_embeddings.weight", (vocab, hidden), 0.5), ids],
                  f"{scope}/word_embeddings")
    # position_ids = buffer[:, :seq_len], with seq_len from Shape(input_ids)[1].
    pos_buffer = g.initializer("embeddings.position_ids", np.arange(max_positions, dtype=np.int64)[None, :])
    seq_len = dim_of(g, ids, 1, scope)
    pos_ids = g.node("Slice", [pos_buffer, g.constant([0], dtype=np.int64, scope=scope), seq_len,
                               g.constant([1], dtype=np.int64, scope=scope),
                               g.constant([1], dtype=np.int64, scope=scope)], scope)
    tok = g.node("Gather", [g.normal("embeddings.token_type_embeddings.weight", (type_vocab, hidden), 0.5), types],
                 f"{scope}/token_type_embeddings")
    pos = g.node("Gather", [g.normal("embeddings.position_embeddings.weight", (max_positions, hidden), 0.5), pos_ids],
                 f"{scope}/position_embeddings")
    x = g.node("Add", [g.node("Add", [word, tok], scope), pos], scope)
    return layer_norm_decomposed(g, x, f"{scope}/LayerNorm", hidden)


def extended_attention_mask(g, mask) -> str:
    """[B, S] int mask -> [B, 1, 1, S] float additive mask (1 - mask) * -10000."""
    m = g.node("Unsqueeze", [mask, g.constant([1], dtype=np.int64)], "")
    m = g.node("Unsqueeze", [m, g.constant([2], dtype=np.int64)], "")
    m = g.node("Cast", [m], "", to=TensorProto.FLOAT)
    inverted = g.node("Sub", [g.constant(1.0), m], "")
    return g.node("Mul", [inverted, g.constant(-10000.0)], "")


def bert_layer(g, x, mask, scope, hidden, heads, intermediate) -> str:
    head_dim = hidden // heads
    att = f"{scope}/attention/self"
    q = split_heads(g, linear(g, x, f"{att}/query", hidden, hidden), f"{att}/q", heads, head_dim, [0, 2, 1, 3])
    k = split_heads(g, linear(g, x, f"{att}/key", hidden, hidden), f"{att}/k", heads, head_dim, [0, 2, 3, 1])
    v = split_heads(g, linear(g, x, f"{att}/value", hidden, hidden), f"{att}/v", heads, head_dim, [0, 2, 1, 3])
    scores = g.node("MatMul", [q, k], att)
    scores = g.node("Div", [scores, g.constant(math.sqrt(head_dim), scope=att)], att)
    probs = g.node("Softmax", [g.node("Add", [scores, mask], att)], att, axis=-1)
    ctx = merge_heads(g, g.node("MatMul", [probs, v], att), x, att, hidden)
    out = linear(g, ctx, f"{scope}/attention/output/dense", hidden, hidden)
    x = layer_norm_decomposed(g, g.node("Add", [out, x], f"{scope}/attention/output"),
                              f"{scope}/attention/output/LayerNorm", hidden)
    h = gelu_erf(g, linear(g, x, f"{scope}/intermediate/dense", hidden, intermediate), f"{scope}/intermediate/intermediate_act_fn")
    out = linear(g, h, f"{scope}/output/dense", intermediate, hidden)
    return layer_norm_decomposed(g, g.node("Add", [out, x], f"{scope}/output"), f"{scope}/output/LayerNorm", hidden)


def make_gpt2(layers=2, hidden=256, heads=4, vocab=1000, n_ctx=128, batch=1, seq=32, seed=5,
              tied=True) -> onnx.ModelProto:
    """A Hugging Face GPT2LMHeadModel: causal self-attention with the constant lower-triangular
    `bias` buffer sliced to the sequence and applied with Where, gelu_new MLP, LayerNormalization."""
    g = GraphBuilder("gpt2", seed)
    ids = g.add_input("input_ids", TensorProto.INT64, [batch, seq])
    wte = g.normal("transformer.wte.weight", (vocab, hidden), 0.2)
    tok = g.node("Gather", [wte, ids], "/transformer/wte")
    seq_len = g.node("Gather", [g.node("Shape", [ids], "/transformer"), g.constant(1, dtype=np.int64)],
                     "/transformer", axis=0)
    positions = g.node("Range", [g.constant(0, dtype=np.int64), seq_len, g.constant(1, dtype=np.int64)], "/transformer")
    positions = g.node("Unsqueeze", [positions, g.constant([0], dtype=np.int64)], "/transformer")
    pos = g.node("Gather", [g.normal("transformer.wpe.weight", (n_ctx, hidden), 0.1), positions], "/transformer/wpe")
    x = g.node("Add", [tok, pos], "/transformer")
    causal = g.initializer("transformer.h.bias", np.tril(np.ones((n_ctx, n_ctx), dtype=bool))[None, None])
    for i in range(layers):
        x = gpt2_block(g, x, causal, f"/transformer/h.{i}", hidden, heads)
    x = layer_norm(g, x, "/transformer/ln_f", hidden)
    if tied:  # lm_head shares wte: the exporter keeps one tensor and transposes it
        lm_w = g.node("Transpose", [wte], "/lm_head", perm=[1, 0])
    else:
        lm_w = g.normal("onnx::MatMul_lm_head", (hidden, vocab), 1.0 / math.sqrt(hidden))
    logits = g.node("MatMul", [x, lm_w], "/lm_head")
    g.add_output(logits, TensorProto.FLOAT, [batch, seq, vocab])
    model = g.model()
    rename_outputs(model, {logits: "logits"})
    return model


def gpt2_block(g, x, causal, scope, hidden, heads) -> str:
    head_dim = hidden // heads
    att = f"{scope}/attn"
    h = layer_norm(g, x, f"{scope}/ln_1", hidden)
    qkv = linear(g, h, f"{att}/c_attn", hidden, 3 * hidden)
    split = g.constant([hidden] * 3, dtype=np.int64, scope=att)
    q, k, v = g.node("Split", [qkv, split], att, n_out=3, axis=2)
    q = split_heads(g, q, f"{att}/q", heads, head_dim, [0, 2, 1, 3])
    k = split_heads(g, k, f"{att}/k", heads, head_dim, [0, 2, 3, 1])
    v = split_heads(g, v, f"{att}/v", heads, head_dim, [0, 2, 1, 3])
    scores = g.node("Div", [g.node("MatMul", [q, k], att), g.constant(math.sqrt(head_dim), scope=att)], att)
    # bias[:, :, 0:S, 0:S] with S = Shape(scores)[-1]: keeps the lower triangle.
    s = dim_of(g, scores, 3, att)
    zero = g.constant([0], dtype=np.int64, scope=att)
    axes = g.constant([2, 3], dtype=np.int64, scope=att)
    mask = g.node("Slice", [causal, g.node("Concat", [zero, zero], att, axis=0), g.node("Concat", [s, s], att, axis=0),
                            axes], att)
    neg = g.constant(np.finfo(np.float32).min, scope=att)
    probs = g.node("Softmax", [g.node("Where", [mask, scores, neg], att)], att, axis=-1)
    ctx = merge_heads(g, g.node("MatMul", [probs, v], att), h, att, hidden)
    x = g.node("Add", [linear(g, ctx, f"{att}/c_proj", hidden, hidden), x], scope)
    h = layer_norm(g, x, f"{scope}/ln_2", hidden)
    h = gelu_tanh(g, linear(g, h, f"{scope}/mlp/c_fc", hidden, 4 * hidden), f"{scope}/mlp/act")
    return g.node("Add", [x, linear(g, h, f"{scope}/mlp/c_proj", 4 * hidden, hidden)], scope)


def make_legacy_cnn_opset7(seed=7) -> onnx.ModelProto:
    """A SqueezeNet-style CNN in opset 7, written the way old model-zoo files are: the attribute
    forms of BatchNormalization (spatial), Clip (min/max), Pad (pads), Upsample (scales),
    Split (split), ReduceMean/Squeeze/Unsqueeze (axes), Dropout (ratio), Softmax's 2-D coercion,
    Reshape with a shape initializer, Sum, and IR version 3."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def w(name, shape, std):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * std).astype(np.float32), name))
        return name

    def n(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=outs[0] + "_node", **attrs))
        return outs[0]

    def conv(x, name, cin, cout, k, stride=1, pad=0):
        return n("Conv", [x, w(name + "_w", (cout, cin, k, k), math.sqrt(2.0 / (cin * k * k))), w(name + "_b", (cout,), 0.05)],
                 [name], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)

    def fire(x, name, cin, squeeze, expand):
        s = n("Relu", [conv(x, name + "_sq", cin, squeeze, 1)], [name + "_sq_relu"])
        e1 = n("Relu", [conv(s, name + "_e1", squeeze, expand, 1)], [name + "_e1_relu"])
        e3 = n("Relu", [conv(s, name + "_e3", squeeze, expand, 3, pad=1)], [name + "_e3_relu"])
        return n("Concat", [e1, e3], [name + "_concat"], axis=1)

    c1 = conv("data", "conv1", 3, 16, 3, stride=2)
    inits.append(numpy_helper.from_array(rng.uniform(0.8, 1.2, 16).astype(np.float32), "bn_scale"))
    inits.append(numpy_helper.from_array(rng.uniform(-0.1, 0.1, 16).astype(np.float32), "bn_bias"))
    inits.append(numpy_helper.from_array(rng.uniform(-0.1, 0.1, 16).astype(np.float32), "bn_mean"))
    inits.append(numpy_helper.from_array(rng.uniform(0.8, 1.2, 16).astype(np.float32), "bn_var"))
    bn = n("BatchNormalization", [c1, "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn1"], epsilon=1e-5, spatial=1)
    r1 = n("Clip", [bn], ["relu6_1"], min=0.0, max=6.0)
    p1 = n("MaxPool", [r1], ["pool1"], kernel_shape=[3, 3], strides=[2, 2])
    f2 = fire(p1, "fire2", 16, 8, 16)
    up = n("Upsample", [f2], ["up"], mode="nearest", scales=[1.0, 1.0, 2.0, 2.0])
    pd = n("Pad", [up], ["pad"], mode="constant", pads=[0, 0, 1, 1, 0, 0, 1, 1], value=0.0)
    c3 = n("Relu", [conv(pd, "conv3", 32, 32, 3, stride=2)], ["conv3_relu"])
    a, b = "split_a", "split_b"
    n("Split", [c3], [a, b], axis=1, split=[16, 16])
    sm = n("Sum", [a, b, a], ["sum"])
    f4 = fire(sm, "fire4", 16, 8, 32)
    mean = n("ReduceMean", [f4], ["spatial_mean"], axes=[2, 3], keepdims=1)
    gap = n("GlobalAveragePool", [f4], ["gap"])
    both = n("Add", [mean, gap], ["pooled"])
    dr = n("Dropout", [both], ["drop"], ratio=0.5)
    un = n("Unsqueeze", [dr], ["unsq"], axes=[0])
    sq = n("Squeeze", [un], ["sq"], axes=[0])
    inits.append(numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "flat_shape"))
    fl = n("Reshape", [sq, "flat_shape"], ["flat"])
    fc = n("Gemm", [fl, w("fc_w", (10, 64), 0.2), w("fc_b", (10,), 0.05)], ["fc"], transB=1)
    n("Softmax", [fc], ["prob"], axis=1)
    # IR version 3: initializers are listed as graph inputs too.
    inputs = [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 64, 64])] + \
        [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    graph = helper.make_graph(nodes, "legacy_cnn_opset7", inputs,
                              [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)], producer_name="onnx-caffe2")
    model.ir_version = 3
    onnx.checker.check_model(model)
    return model


def make_local_functions(seed=8) -> onnx.ModelProto:
    """An MLP whose activation is a model-local function (ModelProto.functions, custom domain),
    as exporters emit for modules they keep whole: ScaledGelu(x; alpha) calls a nested function
    Halve, reads its attribute through ref_attr_name, and is called once with alpha set and once
    relying on the function's default (attribute_proto)."""
    rng = np.random.default_rng(seed)
    dom = "com.kiln.test"
    halve = helper.make_function(dom, "Halve", ["v"], ["h"], [
        helper.make_node("Constant", [], ["half"], value=numpy_helper.from_array(np.array(0.5, np.float32))),
        helper.make_node("Mul", ["v", "half"], ["h"])], [helper.make_opsetid("", 17)])
    alpha_ref = helper.make_attribute_ref("value_float", onnx.AttributeProto.FLOAT)
    alpha_ref.ref_attr_name = "alpha"
    scaled = onnx.helper.make_function(dom, "ScaledGelu", ["x"], ["y"], [
        helper.make_node("Constant", [], ["alpha_t"], name="alpha_const"),
        helper.make_node("Mul", ["x", "alpha_t"], ["xa"]),
        helper.make_node("Constant", [], ["rsqrt2"], value=numpy_helper.from_array(np.array(1 / math.sqrt(2), np.float32))),
        helper.make_node("Mul", ["xa", "rsqrt2"], ["s"]),
        helper.make_node("Erf", ["s"], ["e"]),
        helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1.0, np.float32))),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["xa", "e1"], ["p"]),
        helper.make_node("Halve", ["p"], ["y"], domain=dom)],
        [helper.make_opsetid("", 17), helper.make_opsetid(dom, 1)], attributes=[],
        attribute_protos=[helper.make_attribute("alpha", 1.0)])
    scaled.node[0].attribute.append(alpha_ref)
    w1 = numpy_helper.from_array((rng.standard_normal((32, 64)) * 0.2).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((64, 16)) * 0.2).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"], name="fc1"),
             helper.make_node("ScaledGelu", ["h1"], ["a1"], domain=dom, name="act1", alpha=1.7),
             helper.make_node("MatMul", ["a1", "w2"], ["h2"], name="fc2"),
             helper.make_node("ScaledGelu", ["h2"], ["y"], domain=dom, name="act2")]
    g = helper.make_graph(nodes, "local_functions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], [w1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(dom, 1)],
                          functions=[halve, scaled])
    m.ir_version = 10
    onnx.checker.check_model(m)
    return m


def make_legacy_cnn_opset3(seed=9, modern=False) -> onnx.ModelProto:
    """A CaffeNet-style CNN in opset 3 (IR 3), as the oldest model-zoo files are written: Add with
    legacy `broadcast`/`axis` for the conv bias, BatchNormalization with is_test and
    consumed_inputs, Relu with consumed_inputs, LRN, Reshape with a `shape` attribute, Dropout with
    is_test, Gemm with `broadcast`, Softmax. ONNX Runtime cannot load opset 3, so with
    `modern=True` this writes the same computation in opset 13 forms: the reference for the test."""
    rng = np.random.default_rng(seed)
    arrays = {"cw": rng.standard_normal((8, 3, 3, 3)) * 0.3, "cb": rng.standard_normal(8) * 0.1,
              "s": rng.uniform(0.8, 1.2, 8), "b": rng.standard_normal(8) * 0.1, "m": rng.standard_normal(8) * 0.1,
              "v": rng.uniform(0.5, 1.5, 8), "fw": rng.standard_normal((10, 128)) * 0.2, "fb": rng.standard_normal(10) * 0.1}
    if modern:
        arrays["cb"] = arrays["cb"].reshape(1, 8, 1, 1)
        arrays["shape"] = np.array([1, -1])
    inits = [numpy_helper.from_array(a.astype(np.int64 if k == "shape" else np.float32), k) for k, a in arrays.items()]
    legacy = not modern
    nodes = [
        helper.make_node("Conv", ["x", "cw"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "cb"], ["cb1"], **({"broadcast": 1, "axis": 1} if legacy else {})),
        helper.make_node("BatchNormalization", ["cb1", "s", "b", "m", "v"], ["bn"], epsilon=1e-5,
                         **({"is_test": 1, "consumed_inputs": [0, 0, 0, 1, 1]} if legacy else {})),
        helper.make_node("Relu", ["bn"], ["r"], **({"consumed_inputs": [0]} if legacy else {})),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("LRN", ["p"], ["l"], size=3, alpha=1e-3, beta=0.75),
        helper.make_node("Reshape", ["l"] if legacy else ["l", "shape"], ["f"], **({"shape": [1, -1]} if legacy else {})),
        helper.make_node("Dropout", ["f"], ["d"], **({"is_test": 1, "ratio": 0.5} if legacy else {})),
        helper.make_node("Gemm", ["d", "fw", "fb"], ["g"], transB=1, **({"broadcast": 1} if legacy else {})),
        helper.make_node("Softmax", ["g"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    if legacy:
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    g = helper.make_graph(nodes, "legacy_cnn_opset3", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 3 if legacy else 13)], producer_name="onnx-caffe2")
    m.ir_version = 3 if legacy else 8
    if modern:
        onnx.checker.check_model(m)
    return m


def rename_outputs(model: onnx.ModelProto, names: dict[str, str]) -> None:
    """Gives graph outputs their exported names (last_hidden_state, logits, ...)."""
    for node in model.graph.node:
        for i, o in enumerate(node.output):
            if o in names:
                node.output[i] = names[o]
        for i, o in enumerate(node.input):
            if o in names:
                node.input[i] = names[o]
    for out in model.graph.output:
        if out.name in names:
            out.name = names[out.name]
    onnx.checker.check_model(model, full_check=True)


# ---- registry used by gen_models.py / cpu_bench.py -------------------------------------------
def bert_base(seq=128, batch=1) -> onnx.ModelProto:
    return make_bert(layers=12, hidden=768, heads=12, intermediate=3072, vocab=30522, batch=batch, seq=seq,
                     seed=6, name="bert_base")


TEST_MODELS = {
    "mlp": lambda: make_mlp(),
    "mlp_dynamic": lambda: make_mlp(dynamic=True),
    "resnet50": lambda: make_resnet50(),
    "mobilenetv2": lambda: make_mobilenetv2(),
    "bert": lambda: make_bert(),
    "bert_dynamic": lambda: make_bert(dynamic=True, name="bert_dynamic"),
    "gpt2": lambda: make_gpt2(),
    "legacy_cnn_opset7": lambda: make_legacy_cnn_opset7(),
    "local_functions": lambda: make_local_functions(),
    "legacy_cnn_opset3": lambda: make_legacy_cnn_opset3(),
}

# Models ONNX Runtime cannot load (opsets before 7): the same computation in a form it runs, used
# as the reference instead of the model itself.
REFERENCE_MODELS = {
    "legacy_cnn_opset3": lambda: make_legacy_cnn_opset3(modern=True),
}


# ---- inputs ----------------------------------------------------------------------------------
def gather_table_rows(model: onnx.ModelProto, input_name: str) -> int | None:
    """Rows of the smallest embedding table that `input_name` indexes (valid ids are below it)."""
    tables = {t.name: t.dims for t in model.graph.initializer}
    rows = [tables[n.input[0]][0] for n in model.graph.node
            if n.op_type == "Gather" and len(n.input) == 2 and n.input[1] == input_name and n.input[0] in tables]
    return min(rows) if rows else None


def make_inputs(model: onnx.ModelProto, shapes: dict[str, list[int]] | None, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input: N(0,1) floats, valid token ids, a padded attention mask
    (batch row i masks its last i*S/4 positions, so masking really changes the result)."""
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        if shapes and vi.name in shapes:
            shape = list(shapes[vi.name])
        else:
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            if any(d <= 0 for d in shape):
                raise ValueError(f"input {vi.name} is dynamic: give its shape")
        elem = vi.type.tensor_type.elem_type
        if elem == TensorProto.FLOAT:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
        elif vi.name == "attention_mask":
            mask = np.ones(shape, dtype=np.int64)
            for i in range(shape[0]):
                keep = max(1, shape[1] - (i * shape[1]) // 4)
                mask[i, keep:] = 0
            feeds[vi.name] = mask
        elif elem in (TensorProto.INT64, TensorProto.INT32):
            high = gather_table_rows(model, vi.name) or 2
            dtype = np.int64 if elem == TensorProto.INT64 else np.int32
            feeds[vi.name] = rng.integers(0, high, shape).astype(dtype)
        else:
            raise ValueError(f"input {vi.name}: unsupported element type {elem}")
    return feeds
