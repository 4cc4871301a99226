#!/usr/bin/env python3
"""CPU fast paths of issue 22 against ONNX Runtime: small ONNX graphs (onnx.helper, seeded weights)
with the patterns the CPU passes, kernels and the memory planner take shortcuts on (concats in
blocked layouts and without copies, channel shuffles, squeeze-excitation gates, depthwise convs,
...), built by the kiln CLI on the CPU and compared with ONNX Runtime (CPU EP, graph optimizations
off) at rtol = atol = 1e-4; once as built, once from the saved plan with freed memory poisoned
(a tensor freed too early reads NaN). Each case may also check the engine's structure through
--exportLayerInfo / --exportProfile (e.g. that a Concat ran no kernel), so a shortcut that
silently stops applying fails too.

  cpu_patterns_vs_ort.py --kiln build/bin/kiln [--only name,...] [--keep DIR]

Exits 77 (skipped) without numpy, onnx or onnxruntime."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

TOL = 1e-4


class Graph:
    """A tiny ONNX graph builder: g.conv(x, ...) returns the output name."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, p):
        self.n += 1
        return f"{p}{self.n}"

    def const(self, a, dtype=np.float32):
        n = self.name("k")
        self.inits.append(numpy_helper.from_array(np.asarray(a, dtype=dtype), n))
        return n

    def op(self, op, inputs, outputs=1, **attrs):
        outs = [self.name(op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=outs[0] + "_node", **attrs))
        return outs[0] if outputs == 1 else outs

    def conv(self, x, cin, cout, k=1, stride=1, group=1, act=None, pad=None):
        w = self.rng.standard_normal((cout, cin // group, k, k)).astype(np.float32) / np.sqrt(cin // group * k * k)
        b = self.rng.standard_normal(cout).astype(np.float32) * 0.1
        p = k // 2 if pad is None else pad
        y = self.op("Conv", [x, self.const(w), self.const(b)], kernel_shape=[k, k], strides=[stride, stride],
                    pads=[p, p, p, p], group=group)
        return self.op(act, [y]) if act else y

    def model(self, inputs, outputs):
        g = helper.make_graph(self.nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs], self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


# ---- cases: each returns (model, check(layer_info, profile) -> error or None[, kiln build flags]) --------

def layers_of(info, op):
    return [l for l in info["layers"] if l["op"] == op]


def ran(profile, name):
    """Whether the profile has a time for layer `name` (a layer that runs no kernel has none)."""
    return any(e.get("name") == name for e in profile[1:])


def inception():
    """Branches of 1x1 / 3x3 / pool convs (channels multiples of 16: the block is 8 channels with
    AVX2, 16 with AVX-512, and a branch of 8 cannot stay in 16-channel blocks) joined by Concats
    along the channels, read by convs: the Concats stay in the blocked layout (no LayoutConvert)
    and, at batch 1, run no kernel (their inputs are written into the output)."""
    g = Graph(1)
    x = g.conv("x", 3, 32, 3, act="Relu")
    for _ in range(2):
        a = g.conv(x, 32, 16, 1, act="Relu")
        b = g.conv(g.conv(x, 32, 16, 1, act="Relu"), 16, 16, 3, act="Relu")
        p = g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
        c = g.conv(p, 32, 16, 1, act="Relu")
        d = g.conv(g.conv(x, 32, 16, 1, act="Relu"), 16, 16, 3, act="Relu")
        x = g.op("Concat", [a, b, c, d], axis=1)  # 64 channels
        x = g.conv(x, 64, 32, 1, act="Relu")
    y = g.op("GlobalAveragePool", [x])

    def check(info, prof):
        if layers_of(info, "LayoutConvert"):
            return "LayoutConvert layers around the blocked Concats"
        for l in layers_of(info, "Concat"):
            if l.get("layouts", {}).get("out", "nchw") == "nchw":
                return f"{l['name']} is not in the blocked layout"
            if ran(prof, l["name"]):
                return f"{l['name']} ran a kernel (its inputs were not written into its output)"
        return None
    return g.model([("x", [1, 3, 17, 17])], [y]), check


def inception_batch2():
    """The same at batch 2: the Concat's inputs are not contiguous in its output, so it copies (in the
    blocked layout)."""
    m, _ = inception()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2
    return m, None


def densenet():
    """DenseNet blocks: every layer concatenates all earlier features (Concat -> BN -> Relu -> 1x1 conv
    -> BN -> Relu -> 3x3 conv), so each feature map is read by several Concats (a slice of one of
    them at most), and a transition (BN, Relu, 1x1 conv, AveragePool) between blocks."""
    g = Graph(2)

    def bn(x, c):
        s = g.rng.uniform(0.5, 1.5, c)
        return g.op("BatchNormalization", [x, g.const(s), g.const(g.rng.standard_normal(c) * 0.1),
                                           g.const(g.rng.standard_normal(c) * 0.1), g.const(g.rng.uniform(0.5, 1.5, c))])
    x = g.conv("x", 3, 16, 3, stride=2)
    feats, c = [x], 16
    for block in range(2):
        for _ in range(3):
            cat = g.op("Concat", feats, axis=1) if len(feats) > 1 else feats[0]
            h = g.conv(g.op("Relu", [bn(cat, c)]), c, 32, 1)
            h = g.conv(g.op("Relu", [bn(h, 32)]), 32, 8, 3)
            feats.append(h)
            c += 8
        x = g.op("Concat", feats, axis=1)
        if block == 0:
            x = g.op("AveragePool", [g.conv(g.op("Relu", [bn(x, c)]), c, 24, 1)], kernel_shape=[2, 2], strides=[2, 2])
            feats, c = [x], 24
    y = g.op("GlobalAveragePool", [x])
    return g.model([("x", [1, 3, 32, 32])], [y]), None


def shufflenet(split=False):
    """ShuffleNetV2 units (58 / 116 channels: not blockable): split by Slices (or a Split), 1x1 /
    depthwise 3x3 / 1x1 convs, Concat, channel shuffle as Reshape -> Transpose -> Reshape; a stride-2
    unit. The shuffles and splits become Gathers (no Transpose, Slice or Split left) and the Concats
    run no kernel."""
    g = Graph(3)

    def shuffle(x, c, h):
        r = g.op("Reshape", [x, g.const([1, 2, c // 2, h, h], np.int64)])
        t = g.op("Transpose", [r], perm=[0, 2, 1, 3, 4])
        return g.op("Reshape", [t, g.const([1, c, h, h], np.int64)])

    def branch(x, cin, c, stride):
        y = g.conv(x, cin, c, 1, act="Relu")
        y = g.conv(y, c, c, 3, stride=stride, group=c)
        return g.conv(y, c, c, 1, act="Relu")

    x = g.conv("x", 3, 24, 3, stride=2, act="Relu")
    c, h = 58, 8
    # stride-2 unit: both branches read x
    left = g.conv(g.conv(x, 24, 24, 3, stride=2, group=24), 24, c, 1, act="Relu")
    x = shuffle(g.op("Concat", [left, branch(x, 24, c, 2)], axis=1), 2 * c, h)
    for _ in range(3):
        if split:
            a, b = g.op("Split", [x, g.const([c, c], np.int64)], outputs=2, axis=1)
        else:
            a = g.op("Slice", [x, g.const([0], np.int64), g.const([c], np.int64), g.const([1], np.int64)])
            b = g.op("Slice", [x, g.const([c], np.int64), g.const([2 * c], np.int64), g.const([1], np.int64)])
        x = shuffle(g.op("Concat", [a, branch(b, c, c, 1)], axis=1), 2 * c, h)
    y = g.op("ReduceMean", [x], axes=[2, 3], keepdims=0)

    def check(info, prof):
        left = [l["op"] for l in info["layers"] if l["op"] in ("Transpose", "Slice", "Split", "Reshape")]
        if left:
            return f"layers left of the shuffles and splits: {left}"
        for l in layers_of(info, "Concat"):
            if ran(prof, l["name"]):
                return f"{l['name']} ran a kernel (its inputs were not written into its output)"
        return None
    return g.model([("x", [1, 3, 32, 32])], [y]), check


def concat_edges():
    """Concats the planner must not turn into slices, or only partly: an input read again after the
    Concat (its bytes must survive), an input that is a graph input, the same tensor twice, a
    Concat output that is a graph output, and nested Concats."""
    g = Graph(4)
    a = g.conv("x", 8, 8, 3, act="Relu")
    b = g.conv(a, 8, 8, 3, act="Sigmoid")
    c1 = g.op("Concat", [a, b], axis=1)            # a is read again below
    d = g.op("Add", [a, g.conv(c1, 16, 8, 1)])
    c2 = g.op("Concat", [d, "x"], axis=1)          # a graph input
    c3 = g.op("Concat", [b, b], axis=1)            # one tensor twice
    e = g.conv(g.op("Concat", [c2, c3], axis=1), 32, 8, 1, act="Relu")  # nested
    inner = g.op("Concat", [g.conv(e, 8, 4, 1), g.conv(e, 8, 4, 3)], axis=1)
    out = g.op("Concat", [inner, g.op("Relu", [e])], axis=1)  # a graph output
    return g.model([("x", [1, 8, 9, 9])], [out, c3]), None


def mobilenet_v3(batch=1):
    """MobileNetV3 blocks: 1x1 expansion + HardSwish, depthwise 5x5 / 3x3 (stride 1 and 2), a
    squeeze-excitation gate (GlobalAveragePool -> 1x1 conv + Relu -> 1x1 conv + HardSigmoid -> Mul),
    1x1 projection with a residual Add. The gate's [N, C, 1, 1] vectors have the same bytes plain
    and blocked, so the SE convs read and write them without reorders."""
    g = Graph(5)

    def block(x, cin, exp, cout, k, stride, act):
        h = g.conv(x, cin, exp, 1, act=act)
        h = g.conv(h, exp, exp, k, stride=stride, group=exp, act=act)
        s = g.op("GlobalAveragePool", [h])
        s = g.conv(s, exp, exp // 4, 1, act="Relu")
        s = g.conv(s, exp // 4, exp, 1, act="HardSigmoid")
        h = g.conv(g.op("Mul", [h, s]), exp, cout, 1)
        return g.op("Add", [h, x]) if stride == 1 and cin == cout else h
    x = g.conv("x", 3, 16, 3, stride=2, act="HardSwish")
    x = block(x, 16, 64, 24, 5, 2, "Relu")
    x = block(x, 24, 72, 24, 5, 1, "HardSwish")
    x = block(x, 24, 96, 40, 3, 2, "HardSwish")
    y = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    return g.model([("x", [batch, 3, 32, 32])], [y]), None


def token_attention(heads=1):
    """SegFormer's stage-1 attention: patch-embedding conv, token view (Reshape + Transpose), LayerNorm,
    Q/K/V projections split in heads by Reshape + Transpose; with one head the head Transposes move
    only size-1 axes ([1, L, 1, D] -> [1, 1, L, D]) and run no kernel (views of their input)."""
    g = Graph(6)
    d, L = 32, 64
    x = g.conv("x", 3, d, 4, stride=4, pad=0)                      # [1, 32, 8, 8]
    t = g.op("Transpose", [g.op("Reshape", [x, g.const([1, d, L], np.int64)])], perm=[0, 2, 1])
    t = g.op("LayerNormalization", [t, g.const(np.ones(d)), g.const(np.zeros(d))], axis=-1)

    def proj(h):
        w = g.const(g.rng.standard_normal((d, d)) / np.sqrt(d))
        return g.op("Add", [g.op("MatMul", [h, w]), g.const(g.rng.standard_normal(d) * 0.1)])

    def heads_of(h):
        return g.op("Transpose", [g.op("Reshape", [h, g.const([1, L, heads, d // heads], np.int64)])], perm=[0, 2, 1, 3])
    q, k, v = heads_of(proj(t)), heads_of(proj(t)), heads_of(proj(t))
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    p = g.op("Softmax", [g.op("Mul", [g.op("MatMul", [q, kt]), g.const(1 / np.sqrt(d // heads))])], axis=-1)
    o = g.op("Transpose", [g.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    y = g.op("Add", [proj(g.op("Reshape", [o, g.const([1, L, d], np.int64)])), t])

    def check(info, prof):
        views = 0
        for l in layers_of(info, "Transpose"):
            # the sizes > 1 keep their order (and are distinct here, so that says the perm does too)
            a = [n for n in l["inputs"][0]["dims"] if n != 1]
            if a == [n for n in l["outputs"][0]["dims"] if n != 1] and len(set(a)) == len(a):
                views += 1
                if ran(prof, l["name"]):
                    return f"{l['name']} moves only size-1 axes but ran a kernel"
        if heads == 1 and views < 4:
            return f"expected the 4 head Transposes of size-1 axes, found {views}"
        return None
    return g.model([("x", [1, 3, 32, 32])], [y]), check


def broadcast_binary():
    """Binary ops whose broadcasts coalesce to short rows (inner dims of 1..12 elements, scalars along
    the rows, operands repeating over the rows) next to long ones, on both sides of the op."""
    g = Graph(7)
    outs = []
    for i, (op, shape) in enumerate([("Mul", [1, 3, 1, 4]), ("Add", [2, 1, 5, 1]), ("Sub", [1, 1, 1, 4]), ("Div", [2, 3, 5, 1]),
                                     ("Max", [3, 1, 1]), ("Min", [5, 4]), ("PRelu", [3, 5, 1]), ("Mul", [2, 3, 1, 1])]):
        c = g.const(g.rng.uniform(0.5, 2.0, shape) * (1 if op == "Div" else g.rng.choice([-1, 1], shape)))
        outs.append(g.op(op, ["x", c] if i % 2 == 0 or op == "PRelu" else [c, "x"]))
    # channel-blocked: per-channel gates and biases on a conv output ([1, 16, 1, 1], [16, 1, 1], a scalar)
    h = g.conv(g.op("Slice", ["x", g.const([0], np.int64), g.const([1], np.int64), g.const([0], np.int64)]), 3, 16, 3)
    h2 = g.conv(h, 16, 16, 3)
    for shape in ([1, 16, 1, 1], [16, 1, 1], []):
        h2 = g.op("Add", [g.op("Mul", [h2, g.const(g.rng.uniform(0.5, 1.5, shape))]), g.const(g.rng.standard_normal(shape))])
    outs.append(g.op("GlobalAveragePool", [g.conv(h2, 16, 8, 1)]))
    return g.model([("x", [2, 3, 5, 4])], outs), None


def pointwise_convs(batch=1):
    """1x1 convs on plain NCHW (channel counts off the 8-channel block, pixel counts off the 16-pixel
    register block, a residual Add, activations in and out of registers), built with only kiln's own
    conv tactics so that conv_f32_pointwise_avx2 runs them."""
    g = Graph(8)
    x = g.conv("x", 13, 58, 1, act="Relu")
    x = g.op("Add", [g.conv(x, 58, 58, 1), x])                       # residual
    x = g.conv(x, 58, 7, 1, act="HardSwish")
    x = g.conv(x, 7, 29, 1, act="Sigmoid")
    x = g.op("Clip", [g.conv(x, 29, 20, 1), g.const(0.0), g.const(6.0)])
    y = g.conv(x, 20, 3, 1)

    def check(info, prof):
        convs = layers_of(info, "Conv")
        bad = [l["name"] for l in convs if l["tactic"] != "conv_f32_pointwise_avx2"]
        return f"not run by conv_f32_pointwise_avx2: {bad}" if bad else None
    return g.model([("x", [batch, 13, 9, 7])], [y]), check, ["--disableTactics=onednn,im2col"]


def resnet_gn(batch=1):
    """ResNet-GN bottlenecks: GroupNorm as PyTorch exports it before opset 18 (Reshape ->
    InstanceNormalization -> Reshape -> Mul gamma -> Add beta), the block's last norm -> residual Add
    -> ReLU, and an InstanceNormalization -> Add -> ReLU. fuse_residual moves each Add into its norm
    (input 3) and fuse_activation the ReLU after it; the poisoned plan run checks that the norm
    writing over its input (in place) keeps the residual it still reads."""
    g = Graph(9)

    def gn(x, c, groups):
        r = g.op("Reshape", [x, g.const([0, groups, -1], np.int64)])
        n = g.op("InstanceNormalization", [r, g.const(np.ones(groups)), g.const(np.zeros(groups))], epsilon=1e-5)
        y = g.op("Reshape", [n, g.op("Shape", [x])])
        y = g.op("Mul", [y, g.const(g.rng.uniform(0.5, 1.5, (c, 1, 1)))])
        return g.op("Add", [y, g.const(g.rng.standard_normal((c, 1, 1)) * 0.1)])

    def block(x, cin, mid, cout):
        h = g.op("Relu", [gn(g.conv(x, cin, mid, 1), mid, 8)])
        h = g.op("Relu", [gn(g.conv(h, mid, mid, 3), mid, 8)])
        h = gn(g.conv(h, mid, cout, 1), cout, 8)
        sc = x if cin == cout else gn(g.conv(x, cin, cout, 1), cout, 8)
        return g.op("Relu", [g.op("Add", [h, sc])])
    x = g.conv("x", 3, 32, 3, stride=2)
    x = block(x, 32, 16, 64)
    x = block(x, 64, 16, 64)
    c = 64
    i = g.op("InstanceNormalization", [g.conv(x, c, c, 3), g.const(g.rng.uniform(0.5, 1.5, c)), g.const(np.zeros(c))],
             epsilon=1e-5)
    x = g.op("Relu", [g.op("Add", [i, x])])
    y = g.op("Flatten", [g.op("GlobalAveragePool", [x])])

    def check(info, prof):
        norms = [l for l in info["layers"] if l["op"] in ("GroupNormalization", "InstanceNormalization")]
        fused = [l["name"] for l in norms if len(l["inputs"]) == 4]
        if len(fused) != 3:
            return f"expected 3 norms with a fused residual, found {len(fused)} of {len(norms)}: {fused}"
        left = [l["name"] for l in info["layers"] if l["op"] in ("Add", "Relu", "PointwiseChain")]
        return f"residual Adds / ReLUs left as layers: {left}" if left else None
    return g.model([("x", [batch, 3, 20, 18])], [y]), check


def audio_frontend(batch=1):
    """wav2vec2's feature extractor head: Conv1d -> GroupNorm with one group per channel as PyTorch
    exports it ([N, C, T] -> Reshape [0, C, -1], the same shape -> InstanceNormalization -> Reshape ->
    Mul gamma -> Add beta) -> erf GELU, and an InstanceNormalization -> Mul -> Add -> Relu. The
    affine Mul / Add fold into the norm's scale and bias, and the activation joins the norm."""
    g = Graph(10)
    c = 16
    w = g.const(g.rng.standard_normal((c, 1, 10)) / np.sqrt(10))
    x = g.op("Conv", ["x", w], kernel_shape=[10], strides=[5])
    r = g.op("Reshape", [x, g.const([0, c, -1], np.int64)])
    n = g.op("InstanceNormalization", [r, g.const(np.ones(c)), g.const(np.zeros(c))], epsilon=1e-5)
    h = g.op("Reshape", [n, g.op("Shape", [x])])
    h = g.op("Add", [g.op("Mul", [h, g.const(g.rng.uniform(0.5, 1.5, (c, 1)))]), g.const(g.rng.standard_normal((c, 1)) * 0.1)])
    h = g.op("Mul", [g.op("Mul", [h, g.const(0.5)]), g.op("Add", [g.const(1.0), g.op("Erf", [g.op("Div", [h, g.const(np.sqrt(2.0))])])])])
    w2 = g.const(g.rng.standard_normal((c, c, 3)) / np.sqrt(3 * c))
    h = g.op("Conv", [h, w2], kernel_shape=[3], strides=[2])
    i = g.op("InstanceNormalization", [h, g.const(np.ones(c)), g.const(np.zeros(c))], epsilon=1e-5)
    i = g.op("Add", [g.op("Mul", [g.const(g.rng.uniform(0.5, 1.5, (c, 1))), i]), g.const(g.rng.standard_normal((c, 1)))])
    y = g.op("Relu", [i])

    def check(info, prof):
        ops = [l["op"] for l in info["layers"]]
        left = [o for o in ops if o in ("Mul", "Add", "Erf", "Div", "PointwiseChain", "Relu", "Gelu")]
        return f"affine / activation layers left: {left} (all: {ops})" if left else None
    return g.model([("x", [batch, 1, 400])], [y]), check


def layer_scale(batch=1):
    """PoolFormer blocks: x + ls1 * (AvgPool(GN(x)) - GN(x)), then x + ls2 * fc2(GELU(fc1(GN(x)))) with
    1x1 convs and per-channel layer scales [C, 1, 1]; and a conv divided by a per-channel constant
    minus a scalar. fold_channel_scale folds ls2 (and the Div / Sub) into the convs, whose residual Add
    the residual fusion then takes: no Mul / Div / Sub / Add stays after a conv."""
    g = Graph(11)
    c = 24

    def gn1(x):  # GroupNorm(1, C) as PyTorch exports it before opset 18
        r = g.op("Reshape", [x, g.const([0, 1, -1], np.int64)])
        n = g.op("InstanceNormalization", [r, g.const(np.ones(1)), g.const(np.zeros(1))], epsilon=1e-5)
        y = g.op("Reshape", [n, g.op("Shape", [x])])
        return g.op("Add", [g.op("Mul", [y, g.const(g.rng.uniform(0.5, 1.5, (c, 1, 1)))]), g.const(g.rng.standard_normal((c, 1, 1)) * 0.1)])

    def block(x):
        n = gn1(x)
        p = g.op("AveragePool", [n], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=0)
        x = g.op("Add", [x, g.op("Mul", [g.const(g.rng.uniform(0.5, 1.5, (c, 1, 1))), g.op("Sub", [p, n])])])
        h = g.conv(gn1(x), c, 2 * c, 1, act="Relu")
        return g.op("Add", [x, g.op("Mul", [g.const(g.rng.uniform(0.5, 1.5, (c, 1, 1))), g.conv(h, 2 * c, c, 1)])])
    x = g.conv("x", 3, c, 3, stride=2)
    x = block(block(x))
    d = g.op("Div", [g.conv(x, c, c, 3), g.const(g.rng.uniform(1.0, 2.0, (1, c, 1, 1)))])
    y = g.op("Sub", [d, g.const(0.25)])

    def check(info, prof):
        fused = [sorted(f.split(":")[0] for f in l.get("fusedOps", [])) for l in layers_of(info, "Conv")]
        want = [["Add", "Conv", "Mul"], ["Add", "Conv", "Mul"], ["Conv", "Div", "Sub"]]
        got = [f for f in fused if f in want]
        return None if len(got) == 3 else f"convs' fused ops {fused}: expected the layer scales and Div / Sub folded"
    return g.model([("x", [batch, 3, 18, 20])], [y]), check


def token_layer_scale(batch=1):
    """CaiT / DeiT-III / DINOv2 blocks on tokens: x + gamma * (GELU(x @ W1 + b1) @ W2 + b2) with a
    per-channel gamma [C], and a linear scaled by a per-channel constant then shifted (Mul, Sub).
    fold_channel_scale moves gamma into W2's columns and b2: no MatMul's output meets a Mul."""
    g = Graph(12)
    c = 16

    def linear(x, cin, cout):
        w = g.const(g.rng.standard_normal((cin, cout)) / np.sqrt(cin))
        return g.op("Add", [g.op("MatMul", [x, w]), g.const(g.rng.standard_normal(cout) * 0.1)])
    x = "x"
    for _ in range(2):
        h = g.op("Relu", [linear(x, c, 2 * c)])
        x = g.op("Add", [x, g.op("Mul", [linear(h, 2 * c, c), g.const(g.rng.uniform(0.5, 1.5, c))])])
    y = g.op("Sub", [g.op("Mul", [g.op("MatMul", [x, g.const(g.rng.standard_normal((c, c)) / 4)]), g.const(g.rng.uniform(1, 2, (1, c)))]),
                     g.const(0.5)])

    def check(info, prof):
        mms = layers_of(info, "MatMul")
        scaled = [l["name"] for l in mms if any(f.startswith("Mul:") for f in l.get("fusedOps", []))]
        return None if len(scaled) == 3 else f"MatMuls with a folded scale: {scaled} of {[l['name'] for l in mms]}"
    return g.model([("x", [batch, 5, c])], [y]), check


CASES = {"inception": inception, "inception_batch2": inception_batch2, "densenet": densenet,
         "shufflenet": shufflenet, "shufflenet_split": lambda: shufflenet(split=True), "concat_edges": concat_edges,
         "mobilenet_v3": mobilenet_v3, "mobilenet_v3_batch2": lambda: mobilenet_v3(2),
         "token_attention": token_attention, "token_attention_2heads": lambda: token_attention(2),
         "broadcast_binary": broadcast_binary, "pointwise_convs": pointwise_convs,
         "pointwise_convs_batch2": lambda: pointwise_convs(2), "resnet_gn": resnet_gn,
         "resnet_gn_batch3": lambda: resnet_gn(3), "audio_frontend": audio_frontend,
         "audio_frontend_batch2": lambda: audio_frontend(2), "layer_scale": layer_scale,
         "layer_scale_batch2": lambda: layer_scale(2), "token_layer_scale": token_layer_scale}


def run_case(kiln, name, work):
    model, check, *rest = CASES[name]()
    kiln_args = rest[0] if rest else []  # build flags of the case
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    path = os.path.join(work, name + ".onnx")
    onnx.save(model, path)
    feeds = {}
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    refs = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    spec = []
    for k, v in feeds.items():
        np.save(os.path.join(work, f"{name}_{k}.npy"), v)
        spec.append(f"{k}:{os.path.join(work, f'{name}_{k}.npy')}")
    plan, out = os.path.join(work, name + ".plan"), os.path.join(work, name + "_out.json")
    info, prof = os.path.join(work, name + "_info.json"), os.path.join(work, name + "_prof.json")
    for source, extra in ((f"--onnx={path}", [f"--saveEngine={plan}", f"--exportLayerInfo={info}", f"--exportProfile={prof}"]),
                          (f"--loadEngine={plan}", ["--poisonFreedMemory"])):
        p = subprocess.run([kiln, source, "--device=cpu", "--threads=2", f"--loadInputs={','.join(spec)}",
                            f"--exportOutput={out}", "--iterations=2", "--duration=0", "--warmUp=0", *extra,
                            *(kiln_args if source.startswith("--onnx") else [])],
                           capture_output=True, text=True)
        if p.returncode != 0:
            return f"kiln ({source.split('=')[0]}) failed: {(p.stdout + p.stderr)[-600:]}"
        got = {o["name"]: np.array(o["values"], dtype=np.float64).reshape(o["dims"]) for o in json.load(open(out))}
        for o, ref in zip(model.graph.output, refs):
            g = got.get(o.name)
            if g is None or g.shape != ref.shape:
                return f"output {o.name}: shape {None if g is None else g.shape} vs {ref.shape}"
            err = np.abs(g - ref)
            if not (err <= TOL + TOL * np.abs(ref)).all():
                return f"output {o.name}: max abs err {float(err.max()):.3g} ({source.split('=')[0]})"
    if check:
        return check(json.load(open(info)), json.load(open(prof)))
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--keep", default="", help="write the graphs and outputs here (default: a temporary directory)")
    args = ap.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="kiln_cpu_patterns_")
    os.makedirs(work, exist_ok=True)
    names = [n for n in args.only.split(",") if n] or list(CASES)
    failed = 0
    for n in names:
        err = run_case(args.kiln, n, work)
        print(f"{'FAIL' if err else 'ok  '} {n}" + (f": {err}" if err else ""), flush=True)
        failed += bool(err)
    print(f"{len(names) - failed}/{len(names)} cases agree with ONNX Runtime")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
