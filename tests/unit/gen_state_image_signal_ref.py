#!/usr/bin/env python3
"""Generates the expected values of test_ops_state.cpp, test_ops_image_geometry.cpp and test_ops_signal.cpp.

Run from anywhere:  python3 tests/unit/gen_state_image_signal_ref.py
Writes tests/unit/state_ops_ref.inc, image_ops_ref.inc and signal_ops_ref.inc (seeded, deterministic),
and fft_ref.inc for test_fft.cpp.

Independent references (never kiln), on shapes and attributes the ONNX node tests do not use:
  * NumPy transcriptions of the operator specs: CausalConvWithState (direct sums), LinearAttention
    (the recurrence, per head), TensorScatter, Col2Im (im2col's scatter-add), CenterCropPad,
    AffineGrid, DeformConv (bilinear taps), ConvInteger (padded patches), MaxUnpool (a NumPy
    MaxPool's indices scattered back), DFT / STFT (numpy.fft), the windows (their formulas; the
    symmetric Hann and Blackman are numpy.hanning / numpy.blackman).
  * fft_ref.inc: numpy.fft.ifft on complex64 (pocketfft in float32; numpy computes complex64 forward
    transforms in float64), bit for bit, for lengths whose factors are 2, 3, 4 and 5 and that 8 does
    not divide (where kiln's plan is pocketfft's).
  * Each case is also run by the ONNX reference evaluator (onnx.reference) and, where it has the
    op, ONNX Runtime; both must agree with the NumPy model (the script fails otherwise), which
    validates the NumPy models themselves. MelWeightMatrix comes from the reference evaluator only.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
RNG = np.random.RandomState(20270117)


def rand(*shape, dtype=np.float32, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


# ------------------------------------------------------------------------------------------------
# Running a case through onnx.reference and ONNX Runtime

def onnx_type(a):
    return helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype)


def single_node_model(op, attrs, inputs, n_out, opset, out_types=None):
    names = [n if a is not None else "" for n, a in inputs]
    node = helper.make_node(op, names, [f"out{k}" for k in range(n_out)], **attrs)
    graph_inputs = [helper.make_tensor_value_info(n, onnx_type(a), np.asarray(a).shape) for n, a in inputs if a is not None]
    out_types = out_types or [TP.UNDEFINED] * n_out
    outs = [helper.make_tensor_value_info(f"out{k}", out_types[k], None) for k in range(n_out)]
    graph = helper.make_graph([node], "g", graph_inputs, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def feeds(inputs):
    return {n: np.asarray(a) for n, a in inputs if a is not None}


def reference_run(op, attrs, inputs, n_out, opset):
    return ReferenceEvaluator(single_node_model(op, attrs, inputs, n_out, opset)).run(None, feeds(inputs))


def onnxruntime_run(op, attrs, inputs, expected, opset):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    m = single_node_model(op, attrs, inputs, len(expected), opset, [onnx_type(e) for e in expected])
    try:
        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return s.run(None, feeds(inputs))
    except Exception:  # noqa: BLE001 - ONNX Runtime lacks the op, this opset or this form of it
        return None


def close(a, b, rtol, atol):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def case(name, op, attrs, inputs, expected, opset, rtol=1e-5, atol=1e-6, check_reference=True, check_ort=True):
    """A case whose expected outputs come from the NumPy model, checked by onnx.reference and ORT."""
    expected = [np.asarray(e) for e in expected]
    notes = ["numpy"]
    if check_reference:
        ref = reference_run(op, attrs, inputs, len(expected), opset)
        for k, (e, r) in enumerate(zip(expected, ref)):
            if not close(e, r, rtol, atol):
                raise SystemExit(f"{name}: output {k} of the NumPy model differs from onnx.reference:\n{e}\n{r}")
        notes.append("onnx.reference")
    ort = onnxruntime_run(op, attrs, inputs, expected, opset) if check_ort else None
    if ort is not None:
        for k, (e, r) in enumerate(zip(expected, ort)):
            if not close(e, r, rtol, atol):
                raise SystemExit(f"{name}: output {k} of the NumPy model differs from onnxruntime:\n{e}\n{r}")
        notes.append("onnxruntime")
    return dict(name=name, op=op, attrs=attrs, inputs=inputs, outputs=expected, note=" = ".join(notes))


# ------------------------------------------------------------------------------------------------
# Sequence-state ops: CausalConvWithState, LinearAttention, TensorScatter

def causal_conv(x, w, bias=None, past=None, activation="none"):
    b, c, length = x.shape
    k = w.shape[2]
    past = np.zeros((b, c, k - 1), x.dtype) if past is None else past
    padded = np.concatenate([past, x], axis=2).astype(np.float64)
    y = np.zeros((b, c, length))
    for t in range(length):
        y[:, :, t] = (padded[:, :, t:t + k] * w[None, :, 0, :]).sum(-1)
    if bias is not None:
        y += bias[None, :, None]
    if activation in ("silu", "swish"):
        y = y / (1 + np.exp(-y))
    return y.astype(x.dtype), padded[:, :, length:].astype(x.dtype)


def causal_conv_case(name, B, C, L, K, bias=False, past=False, activation=None, dtype=np.float32):
    x, w = rand(B, C, L, dtype=dtype), rand(C, 1, K, dtype=dtype)
    bv = rand(C, dtype=dtype) if bias else None
    pv = rand(B, C, K - 1, dtype=dtype) if past else None
    attrs = {"activation": activation} if activation else {}
    inputs = [("input", x), ("weight", w), ("bias", bv), ("past_state", pv)]
    while inputs[-1][1] is None:
        inputs.pop()
    return case(name, "CausalConvWithState", attrs, inputs, causal_conv(x, w, bv, pv, activation or "none"), 27)


def linear_attention(q, k, v, hq, hkv, rule, past=None, decay=None, beta=None, scale=0.0):
    b, t, _ = q.shape
    dk, dv = q.shape[2] // hq, v.shape[2] // hkv
    state = np.zeros((b, hkv, dk, dv)) if past is None else past.astype(np.float64).copy()
    scale = 1 / np.sqrt(dk) if scale == 0.0 else scale
    out = np.zeros((b, t, hq, dv))
    group = hq // hkv
    for bi in range(b):
        for h in range(hkv):
            S = state[bi, h]
            for ti in range(t):
                kt = k[bi, ti, h * dk:(h + 1) * dk].astype(np.float64)
                vt = v[bi, ti, h * dv:(h + 1) * dv].astype(np.float64)
                if decay is not None:
                    g = decay[bi, ti]
                    g = g[h] if g.shape[0] == hkv else g[h * dk:(h + 1) * dk]
                    S = S * np.exp(np.asarray(g, np.float64)).reshape(-1, 1)
                if beta is not None:
                    bt = beta[bi, ti, 0 if beta.shape[2] == 1 else h]
                    vt = bt * (vt - S.T @ kt)
                S = S + np.outer(kt, vt)
                for j in range(group):
                    qh = h * group + j
                    out[bi, ti, qh] = scale * (S.T @ q[bi, ti, qh * dk:(qh + 1) * dk])
            state[bi, h] = S
    state_type = past.dtype if past is not None else q.dtype
    return out.reshape(b, t, hq * dv).astype(q.dtype), state.astype(state_type)


def linear_attention_case(name, B, T, hq, hkv, dk, dv, rule, past=False, decay=None, beta=None, scale=0.0,
                          dtype=np.float32):
    q, k, v = rand(B, T, hq * dk, dtype=dtype), rand(B, T, hkv * dk, dtype=dtype), rand(B, T, hkv * dv, dtype=dtype)
    pv = rand(B, hkv, dk, dv, dtype=dtype) if past else None
    dv_in = None
    if decay == "head":
        dv_in = rand(B, T, hkv, dtype=dtype, lo=-0.5, hi=0.0)
    elif decay == "row":
        dv_in = rand(B, T, hkv * dk, dtype=dtype, lo=-0.5, hi=0.0)
    bv = None
    if beta == "head":
        bv = rand(B, T, hkv, dtype=dtype, lo=0.0, hi=1.0)
    elif beta == "one":
        bv = rand(B, T, 1, dtype=dtype, lo=0.0, hi=1.0)
    attrs = {"q_num_heads": hq, "kv_num_heads": hkv, "update_rule": rule}
    if scale:
        attrs["scale"] = scale
    inputs = [("query", q), ("key", k), ("value", v), ("past_state", pv), ("decay", dv_in), ("beta", bv)]
    while inputs[-1][1] is None:
        inputs.pop()
    return case(name, "LinearAttention", attrs, inputs,
                linear_attention(q, k, v, hq, hkv, rule, pv, dv_in, bv, scale), 27)


def tensor_scatter(past, update, write, mode, axis):
    out = past.copy()
    axis %= past.ndim
    seq, cap = update.shape[axis], past.shape[axis]
    for idx in np.ndindex(past.shape[:axis]):
        for i in range(seq):
            pos = write[idx[0]] + i
            pos = pos % cap if mode == "circular" else pos
            out[idx + (pos,)] = update[idx + (i,)]
    return out


def tensor_scatter_case(name, past_shape, seq, axis, mode, write):
    past = rand(*past_shape)
    ushape = list(past_shape)
    ushape[axis] = seq
    update = rand(*ushape)
    wi = np.array(write, dtype=np.int64) if write is not None else None
    inputs = [("past_cache", past), ("update", update), ("write_indices", wi)]
    if wi is None:
        inputs.pop()
    w = wi if wi is not None else np.zeros(past_shape[0], np.int64)
    return case(name, "TensorScatter", {"mode": mode, "axis": axis}, inputs, [tensor_scatter(past, update, w, mode, axis)], 24)


def state_cases():
    return [
        causal_conv_case("causal_conv_bias_past_silu", 2, 3, 5, 3, bias=True, past=True, activation="silu"),
        causal_conv_case("causal_conv_kernel_longer_than_input", 1, 2, 2, 4, past=True),
        causal_conv_case("causal_conv_double", 2, 2, 4, 2, bias=True, dtype=np.float64),
        linear_attention_case("linear_attention_gated_delta_gqa_past_rowdecay", 2, 3, 4, 2, 3, 2, "gated_delta", past=True,
                              decay="row", beta="head"),
        linear_attention_case("linear_attention_delta_beta_one_scale", 1, 4, 2, 2, 2, 3, "delta", beta="one", scale=0.5),
        linear_attention_case("linear_attention_gated_head_decay_mqa", 1, 3, 3, 1, 2, 2, "gated", past=True, decay="head"),
        linear_attention_case("linear_attention_linear_double", 1, 2, 2, 2, 2, 2, "linear", past=True, dtype=np.float64),
        tensor_scatter_case("tensor_scatter_axis1_linear", (2, 5, 3), 2, 1, "linear", [3, 0]),
        tensor_scatter_case("tensor_scatter_axis_minus1_circular", (2, 2, 4), 3, -1, "circular", [2, 3]),
        tensor_scatter_case("tensor_scatter_no_indices", (3, 4, 2), 2, -2, "linear", None),
    ]


# ------------------------------------------------------------------------------------------------
# Image geometry: Col2Im, CenterCropPad, AffineGrid, DeformConv

def col2im(x, image, block, strides, dilations, pads):
    n, cb, L = x.shape
    s = len(image)
    bv = int(np.prod(block))
    c = cb // bv
    blocks = [(image[a] + pads[a] + pads[s + a] - dilations[a] * (block[a] - 1) - 1) // strides[a] + 1 for a in range(s)]
    assert int(np.prod(blocks)) == L
    y = np.zeros((n, c, *image))
    cols = x.reshape(n, c, *block, *blocks)
    for j in np.ndindex(*block):
        for b in np.ndindex(*blocks):
            pos = [b[a] * strides[a] - pads[a] + j[a] * dilations[a] for a in range(s)]
            if all(0 <= pos[a] < image[a] for a in range(s)):
                y[(slice(None), slice(None), *pos)] += cols[(slice(None), slice(None), *j, *b)]
    return y.astype(x.dtype)


def col2im_case(name, n, c, image, block, strides=None, dilations=None, pads=None, dtype=np.float32):
    s = len(image)
    st, di, pa = strides or [1] * s, dilations or [1] * s, pads or [0] * (2 * s)
    blocks = [(image[a] + pa[a] + pa[s + a] - di[a] * (block[a] - 1) - 1) // st[a] + 1 for a in range(s)]
    x = rand(n, c * int(np.prod(block)), int(np.prod(blocks)), dtype=dtype)
    attrs = {}
    if strides:
        attrs["strides"] = strides
    if dilations:
        attrs["dilations"] = dilations
    if pads:
        attrs["pads"] = pads
    inputs = [("input", x), ("image_shape", np.array(image, np.int64)), ("block_shape", np.array(block, np.int64))]
    return case(name, "Col2Im", attrs, inputs, [col2im(x, image, block, st, di, pa)], 18)


def center_crop_pad(x, shape, axes):
    axes = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    out_shape = list(x.shape)
    for a, s in zip(axes, shape):
        out_shape[a] = s
    y = np.zeros(out_shape, x.dtype)
    src, dst = [], []
    for a in range(x.ndim):
        d, s = x.shape[a], out_shape[a]
        n = min(d, s)
        i0 = (d - s) // 2 if s < d else 0
        o0 = (s - d) // 2 if s > d else 0
        src.append(slice(i0, i0 + n))
        dst.append(slice(o0, o0 + n))
    y[tuple(dst)] = x[tuple(src)]
    return y


def center_crop_pad_case(name, x, shape, axes=None):
    attrs = {"axes": axes} if axes is not None else {}
    inputs = [("input_data", x), ("shape", np.array(shape, np.int64))]
    return case(name, "CenterCropPad", attrs, inputs, [center_crop_pad(x, shape, axes)], 18)


def affine_grid(theta, size, align):
    n, s = theta.shape[0], len(size) - 2
    spatial = size[2:]

    def base(m):
        if align:
            return np.array([-1.0]) if m == 1 else np.linspace(-1, 1, m)
        return (2 * np.arange(m) + 1) / m - 1

    axes = [base(m) for m in spatial]  # D, H, W order
    mesh = np.meshgrid(*axes, indexing="ij")
    coords = [mesh[k] for k in reversed(range(s))] + [np.ones(spatial)]  # x, y, (z,) 1
    homo = np.stack(coords, axis=-1)
    grid = np.einsum("nrk,...k->n...r", theta.astype(np.float64), homo)
    return grid.astype(theta.dtype)


def affine_grid_case(name, theta, size, align):
    # A spatial size of 1 with align_corners: onnx.reference (and torch.linspace) put the point at
    # -1; ONNX Runtime 1.32 does not, so that case is checked against onnx.reference only.
    check_ort = not (align and 1 in size[2:])
    inputs = [("theta", theta), ("size", np.array(size, np.int64))]
    return case(name, "AffineGrid", {"align_corners": align}, inputs, [affine_grid(theta, size, align)], 20,
                check_ort=check_ort)


def deform_conv(x, w, off, b=None, mask=None, strides=(1, 1), dil=(1, 1), pads=(0, 0, 0, 0), group=1, og=1):
    n, c, ih, iw = x.shape
    oc, cg, kh, kw = w.shape
    oh, ow = off.shape[2:]
    off = off.reshape(n, og, kh, kw, 2, oh, ow)
    mask = np.ones((n, og, kh, kw, oh, ow)) if mask is None else mask.reshape(n, og, kh, kw, oh, ow)

    def sample(plane, y, xx):
        y0, x0 = int(np.floor(y)), int(np.floor(xx))
        v = 0.0
        for r, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
            for q, wx in ((x0, 1 - (xx - x0)), (x0 + 1, xx - x0)):
                if 0 <= r < ih and 0 <= q < iw:
                    v += wy * wx * plane[r, q]
        return v

    cols = np.zeros((n, c, kh, kw, oh, ow))
    for bi in range(n):
        for ci in range(c):
            g = ci // (c // og)
            for a in range(kh):
                for bb in range(kw):
                    for i in range(oh):
                        for j in range(ow):
                            y = i * strides[0] - pads[0] + a * dil[0] + off[bi, g, a, bb, 0, i, j]
                            xx = j * strides[1] - pads[1] + bb * dil[1] + off[bi, g, a, bb, 1, i, j]
                            cols[bi, ci, a, bb, i, j] = mask[bi, g, a, bb, i, j] * sample(x[bi, ci].astype(np.float64), y, xx)
    y = np.zeros((n, oc, oh, ow))
    for o in range(oc):
        gi = o // (oc // group)
        y[:, o] = np.einsum("ncklij,ckl->nij", cols[:, gi * cg:(gi + 1) * cg], w[o].astype(np.float64))
    if b is not None:
        y += b[None, :, None, None]
    return y.astype(x.dtype)


def deform_conv_case(name, n, c, ih, iw, oc, kh, kw, strides=(1, 1), dil=(1, 1), pads=(0, 0, 0, 0), group=1, og=1,
                     bias=False, mask=False):
    x, w = rand(n, c, ih, iw), rand(oc, c // group, kh, kw)
    oh = (ih + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (iw + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    off = rand(n, og * kh * kw * 2, oh, ow, lo=-1.5, hi=1.5)
    bv = rand(oc) if bias else None
    mv = rand(n, og * kh * kw, oh, ow, lo=0.0, hi=1.0) if mask else None
    attrs = {"kernel_shape": [kh, kw], "strides": list(strides), "dilations": list(dil), "pads": list(pads), "group": group,
             "offset_group": og}
    inputs = [("X", x), ("W", w), ("offset", off), ("B", bv), ("mask", mv)]
    while inputs[-1][1] is None:
        inputs.pop()
    return case(name, "DeformConv", attrs, inputs, [deform_conv(x, w, off, bv, mv, strides, dil, pads, group, og)], 22,
                rtol=1e-4, atol=1e-5)


def conv_integer(x, w, xz, wz, strides, pads, group):
    n, c, ih, iw = x.shape
    m, cg, kh, kw = w.shape
    xp = np.full((n, c, ih + pads[0] + pads[2], iw + pads[1] + pads[3]), 0 if xz is None else int(xz), np.int64)
    xp[:, :, pads[0]:pads[0] + ih, pads[1]:pads[1] + iw] = x
    xp -= 0 if xz is None else int(xz)
    wi = w.astype(np.int64) - (0 if wz is None else np.asarray(wz, np.int64).reshape(-1, 1, 1, 1))
    oh, ow = (xp.shape[2] - kh) // strides[0] + 1, (xp.shape[3] - kw) // strides[1] + 1
    y = np.zeros((n, m, oh, ow), np.int64)
    for o in range(m):
        g = o // (m // group)
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * strides[0]:i * strides[0] + kh, j * strides[1]:j * strides[1] + kw]
                y[:, o, i, j] = (patch * wi[o]).sum(axis=(1, 2, 3))
    return y.astype(np.int32)


def conv_integer_case(name, dtype, n, c, ih, iw, m, kh, kw, strides=(1, 1), pads=(0, 0, 0, 0), group=1, xz=None,
                      wz=None):
    info = np.iinfo(dtype)
    x = RNG.randint(info.min, info.max + 1, size=(n, c, ih, iw)).astype(dtype)
    w = RNG.randint(info.min, info.max + 1, size=(m, c // group, kh, kw)).astype(dtype)
    xzv = None if xz is None else np.array(xz, dtype)
    wzv = None if wz is None else np.array(wz, dtype)
    attrs = {"strides": list(strides), "pads": list(pads), "group": group}
    inputs = [("x", x), ("w", w), ("x_zero_point", xzv), ("w_zero_point", wzv)]
    while inputs[-1][1] is None:
        inputs.pop()
    return case(name, "ConvInteger", attrs, inputs, [conv_integer(x, w, xzv, wzv, strides, pads, group)], 10)


def max_unpool_case(name, n, c, h, w, k, stride, out_shape=None):
    x = rand(n, c, h, w)
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    pooled, idx = np.zeros((n, c, oh, ow), np.float32), np.zeros((n, c, oh, ow), np.int64)
    for b in range(n):
        for ch in range(c):
            for i in range(oh):
                for j in range(ow):
                    win = x[b, ch, i * stride:i * stride + k, j * stride:j * stride + k]
                    r, q = np.unravel_index(np.argmax(win), win.shape)
                    pooled[b, ch, i, j] = win[r, q]
                    idx[b, ch, i, j] = ((b * c + ch) * h + i * stride + r) * w + j * stride + q
    inner = (n, c, (oh - 1) * stride + k, (ow - 1) * stride + k)
    y = np.zeros(inner, np.float32).reshape(-1)
    y[idx.reshape(-1)] = pooled.reshape(-1)  # the flat indices count over MaxPool's input, which has `inner`'s shape here
    y = y.reshape(inner)
    if out_shape is not None:
        big = np.zeros(out_shape, np.float32)
        big[tuple(slice(0, d) for d in inner)] = y
        y = big
    inputs = [("X", pooled), ("I", idx), ("output_shape", None if out_shape is None else np.array(out_shape, np.int64))]
    if out_shape is None:
        inputs.pop()
    # ONNX Runtime reads the indices against output_shape itself; onnx.reference (and kiln) against
    # the unpooled shape, so a larger output_shape is checked against onnx.reference only.
    return case(name, "MaxUnpool", {"kernel_shape": [k, k], "strides": [stride, stride]}, inputs, [y], 22,
                check_ort=out_shape is None)


def image_cases():
    return [
        conv_integer_case("conv_integer_uint8_groups_stride_pad", np.uint8, 1, 4, 5, 6, 4, 3, 2, strides=(2, 1),
                          pads=(1, 0, 1, 1), group=2, xz=128, wz=[3, 250, 0, 17]),
        conv_integer_case("conv_integer_int8_scalar_zero_points", np.int8, 2, 2, 4, 4, 3, 2, 2, xz=-5, wz=7),
        max_unpool_case("max_unpool_default_shape", 1, 2, 4, 6, 2, 2),
        max_unpool_case("max_unpool_larger_output_shape", 2, 1, 5, 5, 3, 2, out_shape=[2, 1, 6, 7]),
        col2im_case("col2im_1d_stride_pad", 1, 2, [7], [3], strides=[2], pads=[1, 2]),
        col2im_case("col2im_2d_dilation_stride_two_channels", 2, 2, [5, 6], [2, 3], strides=[1, 2], dilations=[2, 1],
                    pads=[1, 0, 0, 1]),
        col2im_case("col2im_3d_double", 1, 1, [3, 4, 3], [2, 2, 2], dtype=np.float64),
        center_crop_pad_case("center_crop_pad_odd_crop_and_pad", rand(5, 4, 3), [2, 7, 3]),
        center_crop_pad_case("center_crop_pad_axes_int64_data", np.arange(24, dtype=np.int64).reshape(2, 3, 4), [4, 1],
                             axes=[-1, 1]),
        affine_grid_case("affine_grid_2d_nonsquare", rand(2, 2, 3), [2, 1, 3, 5], 0),
        affine_grid_case("affine_grid_2d_align_size1", rand(1, 2, 3), [1, 3, 1, 4], 1),
        affine_grid_case("affine_grid_3d_align", rand(1, 3, 4), [1, 2, 2, 3, 2], 1),
        affine_grid_case("affine_grid_3d_double", rand(2, 3, 4, dtype=np.float64), [2, 1, 3, 2, 2], 0),
        deform_conv_case("deform_conv_groups_mask_bias", 1, 4, 5, 5, 2, 2, 2, group=2, og=2, bias=True, mask=True),
        deform_conv_case("deform_conv_stride_dilation_pad", 2, 1, 6, 5, 3, 3, 2, strides=(2, 1), dil=(1, 2),
                         pads=(1, 1, 0, 2)),
    ]


# ------------------------------------------------------------------------------------------------
# Signal processing: DFT, STFT, the windows, MelWeightMatrix

def as_complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


def split_complex(z):
    return np.stack([z.real, z.imag], axis=-1)


def dft(x, axis, n=None, inverse=False, onesided=False):
    rank = x.ndim
    a = axis % rank
    z = as_complex(x.astype(np.float64))
    if inverse and onesided:
        n = n or 2 * (x.shape[a] - 1)
        return np.fft.irfft(z, n=n, axis=a)[..., None].astype(x.dtype)
    n = n or x.shape[a]
    y = np.fft.ifft(z, n=n, axis=a) if inverse else np.fft.fft(z, n=n, axis=a)
    if onesided and not inverse:
        y = np.take(y, range(n // 2 + 1), axis=a)
    return split_complex(y).astype(x.dtype)


def dft_case(name, x, axis, n=None, inverse=0, onesided=0):
    attrs = {"inverse": inverse, "onesided": onesided}
    inputs = [("input", x), ("dft_length", None if n is None else np.array(n, np.int64)), ("axis", np.array(axis, np.int64))]
    return case(name, "DFT", attrs, inputs, [dft(x, axis, n, bool(inverse), bool(onesided))], 20, rtol=1e-4, atol=1e-5)


def stft(signal, step, window, length, onesided):
    z = as_complex(signal.astype(np.float64))
    frames = (z.shape[1] - length) // step + 1
    w = np.ones(length) if window is None else window.astype(np.float64)
    out = np.stack([np.fft.fft(z[:, f * step:f * step + length] * w, axis=1) for f in range(frames)], axis=1)
    if onesided:
        out = out[:, :, :length // 2 + 1]
    return split_complex(out).astype(signal.dtype)


def stft_case(name, signal, step, window=None, length=None, onesided=1):
    n = length if length is not None else window.shape[0]
    inputs = [("signal", signal), ("frame_step", np.array(step, np.int64)), ("window", window),
              ("frame_length", None if length is None else np.array(length, np.int64))]
    while inputs[-1][1] is None:
        inputs.pop()
    return case(name, "STFT", {"onesided": onesided}, inputs, [stft(signal, step, window, n, onesided)], 17, rtol=1e-4,
                atol=1e-5)


def window(op, size, periodic, dtype):
    n1 = size if periodic else size - 1
    x = np.arange(size) / n1
    w = {"HannWindow": np.sin(np.pi * x) ** 2,
         "HammingWindow": 25 / 46 - 21 / 46 * np.cos(2 * np.pi * x),
         "BlackmanWindow": 0.42 - 0.5 * np.cos(2 * np.pi * x) + 0.08 * np.cos(4 * np.pi * x)}[op]
    if not periodic:  # the symmetric windows are NumPy's own
        np_w = {"HannWindow": np.hanning, "HammingWindow": None, "BlackmanWindow": np.blackman}[op]
        if np_w is not None:
            assert np.allclose(w, np_w(size), atol=1e-12)
    return w.astype(dtype)


def window_case(name, op, size, periodic, out_type=None):
    attrs = {"periodic": periodic}
    dtype = np.float32
    if out_type is not None:
        attrs["output_datatype"] = out_type
        dtype = helper.tensor_dtype_to_np_dtype(out_type)
    inputs = [("size", np.array(size, np.int64))]
    return case(name, op, attrs, inputs, [window(op, size, periodic, dtype)], 17)


def mel_case(name, bins, dft_length, rate, lo, hi):
    inputs = [("num_mel_bins", np.array(bins, np.int64)), ("dft_length", np.array(dft_length, np.int64)),
              ("sample_rate", np.array(rate, np.int64)), ("lower_edge_hertz", np.array(lo, np.float32)),
              ("upper_edge_hertz", np.array(hi, np.float32))]
    out = reference_run("MelWeightMatrix", {}, inputs, 1, 17)
    c = case(name, "MelWeightMatrix", {}, inputs, out, 17)
    c["note"] = "onnx.reference" + (" = onnxruntime" if "onnxruntime" in c["note"] else "")
    return c


def signal_cases():
    return [
        dft_case("dft_complex_axis0_padded", rand(5, 3, 2), 0, n=7),
        dft_case("dft_real_onesided_truncated", rand(2, 9, 1), -2, n=6, onesided=1),
        dft_case("dft_inverse_complex_axis1", rand(2, 6, 3, 2), 1, inverse=1),
        dft_case("dft_irfft_odd_length", rand(1, 4, 2), 1, n=7, inverse=1, onesided=1),
        dft_case("dft_irfft_default_length", rand(3, 5, 2, dtype=np.float64), 1, inverse=1, onesided=1),
        stft_case("stft_complex_window_twosided", rand(2, 20, 2), 3, window=rand(6), onesided=0),
        stft_case("stft_real_length_onesided", rand(1, 17, 1), 4, length=8),
        window_case("hann_periodic", "HannWindow", 7, 1),
        window_case("hann_symmetric_double", "HannWindow", 6, 0, TP.DOUBLE),
        window_case("hamming_symmetric", "HammingWindow", 5, 0),
        window_case("blackman_periodic", "BlackmanWindow", 9, 1),
        mel_case("mel_weight_matrix_small", 6, 32, 8000, 100.0, 3500.0),
    ]


# ------------------------------------------------------------------------------------------------
# .inc writer

DTYPE_NAME = {np.float32: "kFLOAT", np.float64: "kDOUBLE", np.int64: "kINT64", np.int32: "kINT32", np.int8: "kINT8",
              np.uint8: "kUINT8", np.bool_: "kBOOL"}


def cpp_attr(v):
    if isinstance(v, str):
        return f'std::string("{v}")'
    if isinstance(v, bool) or isinstance(v, (int, np.integer)):
        return f"int64_t({int(v)})"
    if isinstance(v, float):
        return f"{v!r}f"
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
    lines = ["// Generated by tests/unit/gen_state_image_signal_ref.py: do not edit (values from NumPy models",
             "// checked against the ONNX reference evaluator and ONNX Runtime, never from kiln).",
             f"const std::vector<RefCase> {var} = {{"]
    for c in cases:
        lines.append(f'  {{"{c["name"]}", "{c["op"]}",  // {c["note"]}')
        lines.append("   {" + ", ".join(f'{{"{k}", {cpp_attr(v)}}}' for k, v in c["attrs"].items()) + "},")
        lines.append("   {" + ",\n    ".join(cpp_tensor(n, a) for n, a in c["inputs"]) + "},")
        lines.append("   {" + ",\n    ".join(cpp_tensor(f"out{k}", a) for k, a in enumerate(c["outputs"])) + "}},")
    lines.append("};")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def fft_cases():
    """Inverse float32 transforms as numpy.fft.ifft computes them on complex64 (in float32, scaled by
    float32(1/n)): input and output float32 bits. (Its forward transforms of complex64 run in float64.)"""
    out = ["// Generated by tests/unit/gen_state_image_signal_ref.py: do not edit (numpy " + np.__version__ +
           " ifft on complex64: pocketfft in float32).",
           "struct FftCase { int64_t n; std::vector<uint32_t> in, want; };  // (re, im) float32 bits",
           "const std::vector<FftCase> kFftCases = {"]
    rng = np.random.RandomState(20270125)  # its own stream: the other cases' data stay as they are
    bits = lambda z: ", ".join(f"0x{int(v):08x}u" for v in np.stack([z.real, z.imag], -1).astype(np.float32).view(np.uint32).ravel())
    for n in (1, 2, 3, 4, 5, 6, 10, 12, 20, 30, 36, 45, 60, 100, 300):
        z = (rng.uniform(-1, 1, n) + 1j * rng.uniform(-1, 1, n)).astype(np.complex64)
        y = np.fft.ifft(z)
        assert y.dtype == np.complex64
        out.append(f"  {{{n}, {{{bits(z)}}},\n   {{{bits(y)}}}}},")
    out.append("};")
    return "\n".join(out) + "\n"


def main():
    with open(os.path.join(HERE, "fft_ref.inc"), "w") as f:
        f.write(fft_cases())
    for file, var, cases in (("state_ops_ref.inc", "kStateOpCases", state_cases()),
                             ("image_ops_ref.inc", "kImageOpCases", image_cases()),
                             ("signal_ops_ref.inc", "kSignalOpCases", signal_cases())):
        for c in cases:
            print(f"{c['name']}: {c['note']}")
        write_inc(os.path.join(HERE, file), var, cases)


if __name__ == "__main__":
    main()
