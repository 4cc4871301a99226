#!/usr/bin/env python3
"""Generates the expected values of tests/unit/test_ops_recurrent.cpp and test_ops_attention.cpp.

Run from anywhere:  python3 tests/unit/gen_recurrent_attention_ref.py
Writes tests/unit/recurrent_ref.inc and tests/unit/attention_ref.inc (seeded, deterministic).

Independent references (never kiln):
  * RNN / GRU / LSTM: a NumPy transcription of the ONNX operator spec below (every attribute,
    sequence_lens, both layouts). Each case ONNX Runtime can run is also run there and must agree,
    which validates the NumPy model itself.
  * Attention / RotaryEmbedding: the ONNX reference evaluator (onnx.reference).
  * LpNormalization, MeanVarianceNormalization, Det: NumPy formulas (LpNormalization p = 1 uses
    sum |x|, the spec's norm; MVN follows the ONNX function body: (x - mean) / (std + 1e-9)).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
RNG = np.random.RandomState(20261201)

# ------------------------------------------------------------------------------------------------
# NumPy model of the ONNX recurrent ops


def act(name, alpha, beta):
    n = name.lower()
    return {
        "relu": lambda x: np.maximum(x, 0),
        "tanh": np.tanh,
        "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "affine": lambda x: alpha * x + beta,
        "leakyrelu": lambda x: np.where(x >= 0, x, alpha * x),
        "thresholdedrelu": lambda x: np.where(x > alpha, x, 0),
        "scaledtanh": lambda x: alpha * np.tanh(beta * x),
        "hardsigmoid": lambda x: np.clip(alpha * x + beta, 0, 1),
        "elu": lambda x: np.where(x >= 0, x, alpha * (np.exp(x) - 1)),
        "softsign": lambda x: x / (1 + np.abs(x)),
        "softplus": lambda x: np.log1p(np.exp(x)),
    }[n]


DEFAULT_AB = {"affine": (1.0, 0.0), "leakyrelu": (0.01, 0), "thresholdedrelu": (1.0, 0), "scaledtanh": (1.0, 1.0),
              "hardsigmoid": (0.2, 0.5), "elu": (1.0, 0)}
USES = {"affine": (1, 1), "leakyrelu": (1, 0), "thresholdedrelu": (1, 0), "scaledtanh": (1, 1), "hardsigmoid": (1, 1),
        "elu": (1, 0)}


def activations(op, attrs, dirs):
    per = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[op]
    names = attrs.get("activations", per * dirs)
    f32 = lambda v: [float(np.float32(x)) for x in v]  # noqa: E731 (float32 attributes in ONNX)
    alphas, betas = f32(attrs.get("activation_alpha", [])), f32(attrs.get("activation_beta", []))
    out = []
    for n in names:
        a, b = DEFAULT_AB.get(n.lower(), (0, 0))
        ua, ub = USES.get(n.lower(), (0, 0))
        if ua and alphas:
            a = alphas.pop(0)
        if ub and betas:
            b = betas.pop(0)
        out.append(act(n, a, b))
    return [out[d * len(per):(d + 1) * len(per)] for d in range(dirs)]


def recurrent(op, attrs, X, W, R, B=None, seq_lens=None, h0=None, c0=None, P=None):
    X = X.astype(np.float64)
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    direction = attrs.get("direction", "forward")
    dirs = 2 if direction == "bidirectional" else 1
    layout = attrs.get("layout", 0)
    clip = attrs.get("clip")
    clip = None if clip is None else float(np.float32(clip))  # a float32 attribute in ONNX
    H = R.shape[-1]
    if layout == 1:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    S, N, _ = X.shape
    lens = np.full(N, S) if seq_lens is None else seq_lens
    acts = activations(op, attrs, dirs)
    cl = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)
    Y = np.zeros((S, dirs, N, H))
    Yh = np.zeros((dirs, N, H))
    Yc = np.zeros((dirs, N, H))
    for d in range(dirs):
        back = direction == "reverse" or d == 1
        w, r = W[d].astype(np.float64), R[d].astype(np.float64)
        wb = np.zeros(gates * H) if B is None else B[d, :gates * H]
        rb = np.zeros(gates * H) if B is None else B[d, gates * H:]
        p = np.zeros(3 * H) if P is None else P[d]
        f = acts[d]
        for b in range(N):
            h = np.zeros(H) if h0 is None else h0[d, b].astype(np.float64)
            c = np.zeros(H) if c0 is None else c0[d, b].astype(np.float64)
            L = int(lens[b])
            for k in range(L):
                t = L - 1 - k if back else k
                x = X[t, b]
                xw = w @ x + wb
                hr = r @ h + rb
                if op == "RNN":
                    h = f[0](cl(xw + hr))
                elif op == "GRU":
                    z = f[0](cl(xw[:H] + hr[:H]))
                    rg = f[0](cl(xw[H:2 * H] + hr[H:2 * H]))
                    if attrs.get("linear_before_reset", 0):
                        hh = f[1](cl(xw[2 * H:] + rg * hr[2 * H:]))
                    else:
                        hh = f[1](cl(xw[2 * H:] + r[2 * H:] @ (rg * h) + rb[2 * H:]))
                    h = (1 - z) * hh + z * h
                else:
                    i = f[0](cl(xw[:H] + hr[:H] + p[:H] * c))
                    if attrs.get("input_forget", 0):
                        fg = 1 - i
                    else:
                        fg = f[0](cl(xw[2 * H:3 * H] + hr[2 * H:3 * H] + p[2 * H:] * c))
                    cc = f[1](cl(xw[3 * H:] + hr[3 * H:]))
                    c = fg * c + i * cc
                    o = f[0](cl(xw[H:2 * H] + hr[H:2 * H] + p[H:2 * H] * c))
                    h = o * f[2](c)
                Y[t, d, b] = h
            if L > 0:
                Yh[d, b], Yc[d, b] = h, c
    if layout == 1:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    outs = [Y, Yh] + ([Yc] if op == "LSTM" else [])
    return [o.astype(X.dtype if X.dtype != np.float64 else W.dtype) for o in outs]


def onnx_type(a):
    return {np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.int64: TP.INT64, np.int32: TP.INT32,
            np.bool_: TP.BOOL}[a.dtype.type]


def single_node_model(op, attrs, inputs, n_out, opset):
    names = [n if a is not None else "" for n, a in inputs]
    node = helper.make_node(op, names, [f"out{k}" for k in range(n_out)], **attrs)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info(n, onnx_type(a), a.shape) for n, a in inputs if a is not None],
                          [helper.make_empty_tensor_value_info(f"out{k}") for k in range(n_out)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def check_with_onnxruntime(op, attrs, inputs, expected):
    """Runs the case in ONNX Runtime when it supports it; the NumPy model must agree."""
    try:
        import onnxruntime as ort
        m = single_node_model(op, attrs, inputs, len(expected), 22)
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {n: a for n, a in inputs if a is not None})
    except Exception as e:  # noqa: BLE001 (e.g. layout = 1 is not implemented there)
        return f"not checked with onnxruntime ({type(e).__name__})"
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-5)
    return "agrees with onnxruntime"


def rand(*shape, dtype=np.float32, scale=1.0):
    return (RNG.uniform(-1, 1, size=shape) * scale).astype(dtype)


def recurrent_case(name, op, attrs, S, N, I, H, dtype=np.float32, bias=True, seq_lens=None, h0=False, c0=False,
                   peep=False):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    layout = attrs.get("layout", 0)
    xs = (S, N, I) if layout == 0 else (N, S, I)
    st = (dirs, N, H) if layout == 0 else (N, dirs, H)
    X, W, R = rand(*xs, dtype=dtype), rand(dirs, gates * H, I, dtype=dtype), rand(dirs, gates * H, H, dtype=dtype)
    B = rand(dirs, 2 * gates * H, dtype=dtype) if bias else None
    sl = None if seq_lens is None else np.array(seq_lens, dtype=np.int32)
    H0 = rand(*st, dtype=dtype) if h0 else None
    C0 = rand(*st, dtype=dtype) if c0 else None
    P = rand(dirs, 3 * H, dtype=dtype) if peep else None
    inputs = [("X", X), ("W", W), ("R", R), ("B", B), ("sequence_lens", sl), ("initial_h", H0)]
    if op == "LSTM":
        inputs += [("initial_c", C0), ("P", P)]
    while inputs[-1][1] is None:
        inputs.pop()
    outs = recurrent(op, dict(attrs, hidden_size=H), X, W, R, B, sl, H0, C0, P)
    outs = [o.astype(dtype) for o in outs]
    note = check_with_onnxruntime(op, dict(attrs, hidden_size=H), inputs, outs)
    return dict(name=name, op=op, attrs=dict(attrs, hidden_size=H), inputs=inputs, outputs=outs, note=note)


def recurrent_cases():
    return [
        recurrent_case("lstm_bidirectional_all_inputs", "LSTM", {"direction": "bidirectional", "clip": 0.9},
                       S=4, N=3, I=3, H=2, seq_lens=[4, 2, 0], h0=True, c0=True, peep=True),
        recurrent_case("lstm_input_forget_reverse", "LSTM", {"direction": "reverse", "input_forget": 1},
                       S=3, N=2, I=2, H=3, seq_lens=[3, 2], h0=True, c0=True, peep=True),
        recurrent_case("lstm_layout1_custom_activations", "LSTM",
                       {"layout": 1, "activations": ["HardSigmoid", "LeakyRelu", "Softsign"],
                        "activation_alpha": [0.3, 0.2], "activation_beta": [0.4]},
                       S=3, N=2, I=3, H=2, h0=True, c0=True),
        recurrent_case("lstm_double_no_bias", "LSTM", {}, S=3, N=2, I=2, H=2, dtype=np.float64, bias=False),
        recurrent_case("gru_reverse_linear_before_reset", "GRU", {"direction": "reverse", "linear_before_reset": 1},
                       S=4, N=3, I=3, H=3, seq_lens=[4, 1, 3], h0=True),
        recurrent_case("gru_bidirectional_scaled_tanh", "GRU",
                       {"direction": "bidirectional", "activations": ["Sigmoid", "ScaledTanh", "HardSigmoid", "Tanh"],
                        "activation_alpha": [0.8, 0.25], "activation_beta": [1.2, 0.45]},
                       S=3, N=2, I=2, H=2, h0=True),
        recurrent_case("gru_layout1_double", "GRU", {"layout": 1, "clip": 0.7}, S=3, N=2, I=3, H=2,
                       dtype=np.float64, seq_lens=[2, 3]),
        recurrent_case("rnn_bidirectional_affine_relu", "RNN",
                       {"direction": "bidirectional", "activations": ["Relu", "Affine"], "activation_alpha": [0.5],
                        "activation_beta": [0.1], "clip": 1.5},
                       S=3, N=2, I=3, H=4, seq_lens=[3, 1], h0=True),
        recurrent_case("rnn_layout1_defaults", "RNN", {"layout": 1}, S=4, N=2, I=2, H=3, bias=False),
        recurrent_case("rnn_bidirectional_elu_thresholded_relu", "RNN",
                       {"direction": "bidirectional", "activations": ["Elu", "ThresholdedRelu"],
                        "activation_alpha": [0.7, 0.1]},
                       S=2, N=2, I=2, H=2, h0=True),
    ]


# ------------------------------------------------------------------------------------------------
# Attention family, through the ONNX reference evaluator


def reference_run(op, attrs, inputs, n_out, opset):
    m = single_node_model(op, attrs, inputs, n_out, opset)
    return ReferenceEvaluator(m).run(None, {n: a for n, a in inputs if a is not None})


def attention_case(name, attrs, Q, K, V, mask=None, past_k=None, past_v=None, nonpad=None, n_out=1, opset=24):
    inputs = [("Q", Q), ("K", K), ("V", V), ("attn_mask", mask), ("past_key", past_k), ("past_value", past_v),
              ("nonpad_kv_seqlen", nonpad)]
    while inputs[-1][1] is None:
        inputs.pop()
    outs = reference_run("Attention", attrs, inputs, n_out, opset)
    return dict(name=name, op="Attention", attrs=attrs, inputs=inputs, outputs=outs, note="onnx.reference")


def attention_cases():
    r = rand
    return [
        attention_case("mha_4d_float_mask_qk_raw", {}, r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 3), mask=r(3, 5),
                       n_out=4),
        attention_case("gqa_3d_causal_past_present", {"q_num_heads": 4, "kv_num_heads": 2, "is_causal": 1},
                       r(2, 3, 8), r(2, 3, 4), r(2, 3, 6), past_k=r(2, 2, 2, 2), past_v=r(2, 2, 2, 3), n_out=3),
        attention_case("bool_mask_broadcast_short_softcap_mode1", {"softcap": 0.7, "qk_matmul_output_mode": 1},
                       r(1, 2, 3, 4, scale=3), r(1, 2, 5, 4, scale=3), r(1, 2, 5, 2),
                       mask=np.array([[[True, False, True, True]], [[False, True, True, False]]]), n_out=4),
        attention_case("scale_mask3d_mode2", {"scale": 0.3, "qk_matmul_output_mode": 2}, r(2, 2, 2, 3), r(2, 2, 4, 3),
                       r(2, 2, 4, 3), mask=r(2, 2, 4), n_out=4),
        attention_case("fully_masked_row_mode3", {"qk_matmul_output_mode": 3}, r(1, 1, 2, 4), r(1, 1, 2, 4),
                       r(1, 1, 2, 4), mask=np.array([[True, True], [False, False]]), n_out=4),
        attention_case("nonpad_causal_window_double", {"is_causal": 1, "left_window_size": 1},
                       r(2, 2, 2, 4, dtype=np.float64), r(2, 1, 5, 4, dtype=np.float64),
                       r(2, 1, 5, 2, dtype=np.float64), nonpad=np.array([4, 2], dtype=np.int64), opset=25),
        attention_case("bidirectional_window_softmax_precision", {"left_window_size": 1, "right_window_size": 1,
                                                                  "softmax_precision": 11, "qk_matmul_output_mode": 3},
                       r(1, 1, 4, 2), r(1, 1, 4, 2), r(1, 1, 4, 2), n_out=4, opset=25),
    ]


def rotary_case(name, attrs, X, cos, sin, pos=None):
    inputs = [("X", X), ("cos_cache", cos), ("sin_cache", sin), ("position_ids", pos)]
    while inputs[-1][1] is None:
        inputs.pop()
    outs = reference_run("RotaryEmbedding", attrs, inputs, 1, 23)
    return dict(name=name, op="RotaryEmbedding", attrs=attrs, inputs=inputs, outputs=outs, note="onnx.reference")


def numpy_case(name, op, attrs, X, Y):
    return dict(name=name, op=op, attrs=attrs, inputs=[("X", X)], outputs=[Y], note="numpy")


def lp_norm(x, axis, p):
    n = np.abs(x).sum(axis=axis, keepdims=True) if p == 1 else np.sqrt((x * x).sum(axis=axis, keepdims=True))
    return np.where(n == 0, 0, x / np.where(n == 0, 1, n)).astype(x.dtype)


def mvn(x, axes):
    m = x.astype(np.float64).mean(axis=tuple(axes), keepdims=True)
    sd = np.sqrt(((x - m) ** 2).mean(axis=tuple(axes), keepdims=True))
    return ((x - m) / (sd + 1e-9)).astype(x.dtype)


def other_cases():
    pos = np.array([[0, 3, 5], [7, 1, 2]], dtype=np.int64)
    lp_x = rand(2, 3, 4)
    lp_x[1, :, 2] = 0  # a zero vector along axis 1
    det_x = rand(3, 3, 3, dtype=np.float64, scale=2)
    det_x[1] = [[1, 2, 3], [2, 4, 6], [0, 1, 1]]  # singular
    return [
        rotary_case("rotary_4d_position_ids", {}, rand(2, 2, 3, 6), rand(8, 3), rand(8, 3), pos),
        rotary_case("rotary_3d_interleaved_partial", {"num_heads": 2, "interleaved": 1, "rotary_embedding_dim": 4},
                    rand(2, 3, 12), rand(8, 2), rand(8, 2), pos),
        rotary_case("rotary_no_position_ids", {"rotary_embedding_dim": 2}, rand(2, 1, 3, 4), rand(2, 3, 1),
                    rand(2, 3, 1)),
        numpy_case("lpnorm_p2_axis1", "LpNormalization", {"axis": 1}, lp_x, lp_norm(lp_x, 1, 2)),
        numpy_case("lpnorm_p1_last", "LpNormalization", {"p": 1}, lp_x, lp_norm(lp_x, -1, 1)),
        numpy_case("mvn_default_axes", "MeanVarianceNormalization", {}, rand(2, 3, 2, 2, scale=4),
                   None),
        numpy_case("mvn_axes_last", "MeanVarianceNormalization", {"axes": [-1]}, rand(3, 5, dtype=np.float64),
                   None),
        numpy_case("det_batched", "Det", {}, det_x, np.linalg.det(det_x)),
    ]


# ------------------------------------------------------------------------------------------------
# .inc writer

DTYPE_NAME = {np.float32: "kFLOAT", np.float64: "kDOUBLE", np.int64: "kINT64", np.int32: "kINT32", np.bool_: "kBOOL"}


def cpp_attr(v):
    if isinstance(v, str):
        return f'std::string("{v}")'
    if isinstance(v, bool) or isinstance(v, (int, np.integer)):
        return f"int64_t({int(v)})"
    if isinstance(v, float):
        return f"{v!r}f"
    if isinstance(v, list) and v and isinstance(v[0], str):
        return "std::vector<std::string>{" + ", ".join(f'"{s}"' for s in v) + "}"
    if isinstance(v, list) and v and isinstance(v[0], float):
        return "std::vector<float>{" + ", ".join(f"{x!r}f" for x in v) + "}"
    if isinstance(v, list):
        return "std::vector<int64_t>{" + ", ".join(str(int(x)) for x in v) + "}"
    raise TypeError(v)


def cpp_tensor(name, a):
    if a is None:
        return f'{{"{name}", false, DataType::kFLOAT, {{}}, {{}}}}'
    a = np.asarray(a)
    vals = ", ".join(repr(float(x)) if a.dtype.kind == "f" else str(int(x)) for x in a.reshape(-1))
    dims = ", ".join(str(d) for d in a.shape)
    return f'{{"{name}", true, DataType::{DTYPE_NAME[a.dtype.type]}, {{{dims}}}, {{{vals}}}}}'


def write_inc(path, var, cases):
    lines = [f"// Generated by tests/unit/gen_recurrent_attention_ref.py: do not edit (values from NumPy,",
             "// the ONNX reference evaluator and ONNX Runtime, never from kiln).",
             f"const std::vector<RefCase> {var} = {{"]
    for c in cases:
        lines.append(f'  {{"{c["name"]}", "{c["op"]}",  // {c["note"]}')
        lines.append("   {" + ", ".join(f'{{"{k}", {cpp_attr(v)}}}' for k, v in c["attrs"].items()) + "},")
        lines.append("   {" + ",\n    ".join(cpp_tensor(n, a) for n, a in c["inputs"]) + "},")
        lines.append("   {" + ",\n    ".join(cpp_tensor(f"out{k}", a) for k, a in enumerate(c["outputs"])) + "}},")
    lines.append("};")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    rec = recurrent_cases()
    for c in rec:
        print(f"{c['name']}: {c['note']}")
    write_inc(os.path.join(HERE, "recurrent_ref.inc"), "kRecurrentCases", rec)
    others = other_cases()
    for c in others:
        if c["outputs"][0] is None:
            x = c["inputs"][0][1]
            c["outputs"] = [mvn(x, c["attrs"].get("axes", [0, 2, 3]))]
        c["outputs"] = [np.asarray(o, dtype=c["inputs"][0][1].dtype) for o in c["outputs"]]
    write_inc(os.path.join(HERE, "attention_ref.inc"), "kAttentionCases", attention_cases() + others)


if __name__ == "__main__":
    main()
