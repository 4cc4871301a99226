#!/usr/bin/env python3
"""PyTorch operators, exported as a user would, against ONNX Runtime on the CPU.

About 245 small modules (elementwise math, activations, reductions, indexing and shape ops,
convolutions and pools of every flavour, normalizations, resampling, padding modes, recurrent
layers, attention) are exported with torch.onnx.export (TorchScript exporter, opset 17; with
--dynamo the torch.export-based exporter at opset 18, ~10x slower), run by ONNX Runtime (CPU EP)
and by a kiln CPU engine built through the Python API, and compared: floats at rtol = atol = 1e-4,
integers and booleans exactly, shapes and dtype kinds equal. A module PyTorch cannot export (or
ONNX Runtime cannot run) is listed as not comparable and does not fail the run; a build error, a
run error or a mismatch does.

  test_torch_ops_vs_ort.py --module-dir build/python [--dynamo] [--dynamic] [--gpu-fusions] [--opset N] [--only name,...]

Exits 77 (skipped) without torch, onnx, onnxruntime or the kiln module."""
import argparse
import os
import sys
import tempfile
import warnings

try:
    import numpy as np
    import onnx
    import onnxruntime  # noqa: F401 (the reference, through vs_ort)
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

warnings.filterwarnings("ignore")
TOL = 1e-4
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from vs_ort import Tally, import_kiln, kiln_error, ort_outputs  # noqa: E402


def cases():
    """(name, module, example inputs), seeded."""
    torch.manual_seed(0)
    R = lambda *s: torch.randn(*s)
    P = lambda *s: torch.rand(*s) + 0.1
    I = lambda hi, *s: torch.randint(0, hi, s)

    class L(nn.Module):
        def __init__(s, f):
            super().__init__()
            s.f = f

        def forward(s, *a):
            return s.f(*a)

    C = []

    def case(name, m, *args):
        C.append((name, m if isinstance(m, nn.Module) else L(m), args))

    x4 = R(2, 3, 8, 8); x3 = R(2, 5, 7); x2 = R(4, 6)
    for n in ["abs","acos","asin","atan","ceil","cos","cosh","erf","exp","expm1","floor","frac","log1p","neg","reciprocal","round","rsqrt","sigmoid","sign","sin","sinh","sqrt","square","tan","tanh","trunc","log2","log10","exp2","sgn","erfinv","deg2rad","rad2deg","logit"]:
        inp = (torch.rand(3,4)*0.8+0.1) if n in ("acos","asin","erfinv","logit","log2","log10","log1p","rsqrt","sqrt","reciprocal") else R(3,4)
        case("unary_"+n, (lambda n: lambda t: getattr(torch, n)(t))(n), inp)
    case("atan2", torch.atan2, R(3,4), R(3,4)); case("fmod", torch.fmod, R(3,4), P(3,4)); case("remainder", torch.remainder, R(3,4), P(3,4))
    case("pow_t", torch.pow, P(3,4), R(3,4)); case("pow_s", lambda t: t**3, R(3,4)); case("lerp", lambda a,b: torch.lerp(a,b,0.3), R(3,4), R(3,4))
    case("addcmul", lambda a,b,c: torch.addcmul(a,b,c,value=0.5), R(3,4), R(3,4), R(3,4)); case("addcdiv", lambda a,b,c: torch.addcdiv(a,b,c,value=0.5), R(3,4), R(3,4), P(3,4))
    case("where", lambda a,b: torch.where(a>0, a, b), R(3,4), R(3,4)); case("masked_fill", lambda a: a.masked_fill(a<0, -1e4), R(3,4))
    case("max_min_elem", lambda a,b: torch.maximum(a,b)+torch.minimum(a,b), R(3,4), R(3,4)); case("nan_to_num", lambda a: torch.nan_to_num(torch.log(a)), R(3,4))
    case("isnan_isinf", lambda a: (torch.isnan(torch.log(a)) | torch.isinf(1/a)).float(), R(3,4)); case("floor_divide", lambda a,b: torch.floor_divide(a,b), R(3,4), P(3,4))
    case("int_div", lambda a,b: a // b, I(100,3,4), I(9,3,4)+1); case("int_rem", lambda a,b: a % b, I(100,3,4)-50, I(9,3,4)+1)
    case("bitwise", lambda a,b: (a & b) | (a ^ b), I(100,3,4), I(100,3,4)); case("logical", lambda a,b: torch.logical_xor(a>0, b>0) & ~(a>b), R(3,4), R(3,4))
    case("hypot", torch.hypot, R(3,4), R(3,4)); case("clamp_t", lambda a,b,c: torch.clamp(a, b, c), R(3,4), -P(3,4), P(3,4)); case("clamp_min", lambda a: a.clamp(min=-0.5), R(3,4))
    for n,f in [("relu6",F.relu6),("elu",F.elu),("selu",F.selu),("celu",F.celu),("gelu",F.gelu),("gelu_tanh",lambda t: F.gelu(t, approximate="tanh")),("silu",F.silu),("mish",F.mish),("hardswish",F.hardswish),("hardsigmoid",F.hardsigmoid),("hardtanh",F.hardtanh),("leaky_relu",lambda t: F.leaky_relu(t,0.2)),("softplus",lambda t: F.softplus(t, beta=2)),("softsign",F.softsign),("tanhshrink",F.tanhshrink),("softshrink",F.softshrink),("hardshrink",F.hardshrink),("threshold",lambda t: F.threshold(t,0.1,2.0)),("glu",F.glu),("logsigmoid",F.logsigmoid),("rrelu_eval",lambda t: F.rrelu(t, training=False)),("softmin",lambda t: F.softmin(t,1)),("log_softmax0",lambda t: F.log_softmax(t,0))]:
        case("act_"+n, f, R(4,6))
    case("prelu", nn.PReLU(3), x4)
    for n,f in [("sum",lambda t: t.sum((1,2))),("mean",lambda t: t.mean(-1,keepdim=True)),("prod",lambda t: t.prod(1)),("amax",lambda t: t.amax((0,2))),("amin",lambda t: t.amin(1)),("max_dim",lambda t: t.max(1)[0]+t.max(1)[1]),("min_dim",lambda t: t.min(2)[1].float()),("argmax",lambda t: t.argmax(-1)),("argmin_keep",lambda t: t.argmin(1,keepdim=True)),("std",lambda t: t.std(1)),("var_unb0",lambda t: t.var(2, unbiased=False)),("logsumexp",lambda t: t.logsumexp(1)),("norm1",lambda t: t.norm(p=1,dim=1)),("norm2",lambda t: t.norm(dim=-1)),("normfro",lambda t: torch.linalg.norm(t)),("all_any",lambda t: (t>0).all(1) | (t>1).any(1)),("cumsum",lambda t: t.cumsum(1)),("cumprod",lambda t: t.cumprod(2)),("topk",lambda t: t.topk(3,dim=-1)[0]),("topk_idx",lambda t: t.topk(2,dim=1,largest=False)[1]),("sort",lambda t: t.sort(-1,descending=True)[0]),("argsort",lambda t: t.argsort(1)),("std_mean",lambda t: torch.std_mean(t,1)[0]),("median_dim",lambda t: t.median(-1)[0]),("count_nonzero",lambda t: torch.count_nonzero(t>0, dim=1)),("logcumsumexp",lambda t: torch.logcumsumexp(t,1)),("cummax",lambda t: torch.cummax(t,1)[0]),("aminmax",lambda t: torch.aminmax(t,dim=1)[1])]:
        case("red_"+n, f, x3)
    for n,f,a in [("reshape",lambda t: t.reshape(2,-1),(x4,)),("permute",lambda t: t.permute(0,2,3,1),(x4,)),("transpose",lambda t: t.transpose(1,2),(x3,)),("flatten",lambda t: t.flatten(1),(x4,)),("unflatten",lambda t: t.unflatten(2,(2,4)),(x4,)),("squeeze",lambda t: t[:, :1].squeeze(1),(x4,)),("unsqueeze",lambda t: t.unsqueeze(-1),(x3,)),("expand",lambda t: t[:, :1].expand(-1,4,-1),(x3,)),("repeat",lambda t: t.repeat(2,1,3),(x3,)),("repeat_interleave",lambda t: t.repeat_interleave(2,dim=1),(x3,)),("tile",lambda t: torch.tile(t,(2,)),(x2,)),("flip",lambda t: t.flip(1,2),(x3,)),("roll",lambda t: t.roll(2,1),(x3,)),("roll2",lambda t: torch.roll(t,(1,-2),(1,2)),(x3,)),("narrow",lambda t: t.narrow(2,1,4),(x3,)),("split",lambda t: sum(s.sum(1) for s in t.split(2,1)),(x3,)),("chunk",lambda t: t.chunk(3,2)[1],(x3,)),("unbind",lambda t: t.unbind(1)[2],(x3,)),("stack",lambda a,b: torch.stack([a,b],1),(x3,x3)),("cat",lambda a,b: torch.cat([a,b],-1),(x3,x3)),("slice_step",lambda t: t[:, ::2, 1::3],(x3,)),("neg_index",lambda t: t[..., -1],(x3,)),("index_select",lambda t,i: t.index_select(1,i),(x3,torch.tensor([4,0,2]))),("gather",lambda t,i: t.gather(2,i),(x3,I(7,2,5,3))),("scatter",lambda t,i,s: t.scatter(2,i,s),(x3,torch.tensor([[[0,1,2]]*5]*2),R(2,5,3))),("scatter_add",lambda t,i,s: t.scatter_add(2,i,s),(x3,I(7,2,5,3),R(2,5,3))),("index_adv",lambda t,i: t[:, i],(x3,torch.tensor([1,3]))),("index_put",lambda t: t.index_put((torch.tensor([0,1]),), torch.zeros(5,7)),(x3,)),("take_along",lambda t,i: torch.take_along_dim(t,i,1),(x3,I(5,2,2,7))),("tril",lambda t: t.tril(1),(x3,)),("triu",lambda t: t.triu(-1),(x3,)),("diagonal",lambda t: torch.diagonal(t,0,1,2),(x3,)),("einsum",lambda a,b: torch.einsum("bij,bkj->bik",a,b),(x3,R(2,4,7))),("bmm",torch.bmm,(x3,R(2,7,3))),("matmul_bc",torch.matmul,(R(2,1,4,5),R(3,5,6))),("matvec",torch.matmul,(x2,R(6))),("baddbmm",lambda a,b,c: torch.baddbmm(a,b,c,beta=0.5,alpha=2),(R(2,5,3),x3,R(2,7,3))),("addmm",lambda a,b,c: torch.addmm(a,b,c),(R(4,3),x2,R(6,3))),("outer",torch.outer,(R(4),R(5))),("cross",lambda a,b: torch.linalg.cross(a,b),(R(4,3),R(4,3))),("cdist",torch.cdist,(R(2,5,3),R(2,4,3))),("cosine_sim",lambda a,b: F.cosine_similarity(a,b,dim=1),(x2,R(4,6))),("pairwise",F.pairwise_distance,(x2,R(4,6))),("normalize",lambda t: F.normalize(t,dim=1),(x3,)),("one_hot",lambda i: F.one_hot(i,7),(I(7,3,4),)),("arange",lambda t: t + torch.arange(t.shape[-1]),(x3,)),("full_like",lambda t: torch.full_like(t,3.)+torch.zeros_like(t)+torch.ones_like(t),(x3,)),("meshgrid",lambda a,b: torch.stack(torch.meshgrid(a,b,indexing="ij")),(R(3),R(4))),("to_int",lambda t: (t*10).long()+1,(x3,)),("to_bool",lambda t: t.bool().float(),(torch.tensor([[0.,1.,-2.]]),)),("bucketize",lambda t: torch.bucketize(t, torch.tensor([-1.,0.,1.])),(x3,)),("searchsorted",lambda t: torch.searchsorted(torch.tensor([-1.,0.,1.]),t),(x3,)),("linspace",lambda t: t*torch.linspace(0,1,7),(x3,)),("masked_select",lambda t: torch.masked_select(t, t>0),(x3,)),("nonzero",lambda t: torch.nonzero(t>0),(x3,)),("unique",lambda t: torch.unique(t),(I(5,10).float(),)),("where1",lambda t: torch.where(t>0)[1],(x3,)),("new_zeros",lambda t: t.new_zeros(t.shape[0],3)+1,(x3,)),("diff",lambda t: torch.diff(t,dim=1),(x3,)),("cumsum_rev",lambda t: t.flip(1).cumsum(1).flip(1),(x3,)),("tensor_split",lambda t: t.tensor_split(3,dim=2)[2],(x3,)),("movedim",lambda t: t.movedim(1,-1),(x4,)),("swapaxes",lambda t: t.swapaxes(0,2),(x3,)),("clamp_int",lambda t: t.clamp(0,5),(I(10,3,4),)),("sum_int",lambda t: t.sum(1),(I(10,3,4),)),("max_int",lambda t: t.max(1)[0],(I(10,3,4),)),("argmax_int",lambda t: t.argmax(),(I(10,3,4),))]:
        case("shape_"+n, f, *a)
    for n,m,a in [("conv1d",nn.Conv1d(5,4,3,padding=1),(x3,)),("conv2d_s2_d2",nn.Conv2d(3,4,3,stride=2,dilation=2,padding=2),(x4,)),("conv2d_group",nn.Conv2d(4,8,3,groups=2,padding="same"),(R(2,4,8,8),)),("conv3d",nn.Conv3d(2,3,3,padding=1),(R(1,2,4,5,6),)),("convT1d",nn.ConvTranspose1d(5,3,3,stride=2,output_padding=1),(x3,)),("convT2d",nn.ConvTranspose2d(3,4,4,stride=2,padding=1),(x4,)),("convT2d_group",nn.ConvTranspose2d(4,4,3,stride=2,groups=2,dilation=2),(R(2,4,5,5),)),("convT3d",nn.ConvTranspose3d(2,3,3,stride=2),(R(1,2,3,4,4),)),("maxpool1d",nn.MaxPool1d(3,2,1),(x3,)),("maxpool2d_ceil",nn.MaxPool2d(3,2,ceil_mode=True),(x4,)),("maxpool2d_dil",nn.MaxPool2d(2,1,dilation=2),(x4,)),("maxpool3d",nn.MaxPool3d(2),(R(1,2,4,4,4),)),("avgpool_ceil",nn.AvgPool2d(3,2,1,ceil_mode=True,count_include_pad=False),(x4,)),("avgpool_incl",nn.AvgPool2d(3,2,1),(x4,)),("avgpool1d",nn.AvgPool1d(2),(x3,)),("adaptive_avg",nn.AdaptiveAvgPool2d((2,4)),(x4,)),("adaptive_avg1",nn.AdaptiveAvgPool2d(1),(x4,)),("adaptive_max",nn.AdaptiveMaxPool2d((4,4)),(x4,)),("adaptive_avg1d",nn.AdaptiveAvgPool1d(1),(x3,)),("lppool",nn.LPPool2d(2,2),(x4,)),("bn",nn.BatchNorm2d(3).eval(),(x4,)),("in_affine",nn.InstanceNorm2d(3,affine=True),(x4,)),("in1d",nn.InstanceNorm1d(5),(x3,)),("gn",nn.GroupNorm(1,3),(x4,)),("ln",nn.LayerNorm([8,8]),(x4,)),("ln_noaffine",nn.LayerNorm(7,elementwise_affine=False),(x3,)),("lrn",nn.LocalResponseNorm(2),(x4,)),("embedding",nn.Embedding(10,4),(I(10,2,3),)),("embedding_pad",nn.Embedding(10,4,padding_idx=0),(I(10,2,3),)),("pixel_shuffle",nn.PixelShuffle(2),(R(1,8,3,3),)),("pixel_unshuffle",nn.PixelUnshuffle(2),(x4,)),("upsample_nearest",nn.Upsample(scale_factor=2),(x4,)),("upsample_bilinear",nn.Upsample(scale_factor=1.5,mode="bilinear"),(x4,)),("upsample_bilinear_ac",nn.Upsample(size=(5,11),mode="bilinear",align_corners=True),(x4,)),("upsample_bicubic",nn.Upsample(scale_factor=2,mode="bicubic"),(x4,)),("upsample_linear1d",nn.Upsample(scale_factor=2,mode="linear"),(x3,)),("upsample_trilinear",nn.Upsample(scale_factor=2,mode="trilinear"),(R(1,2,3,3,3),)),("interp_nearest_size",lambda t: F.interpolate(t,size=(5,3)),(x4,)),("pad_const",lambda t: F.pad(t,(1,2,0,1),value=0.5),(x4,)),("pad_reflect",lambda t: F.pad(t,(2,1,1,2),mode="reflect"),(x4,)),("pad_replicate",lambda t: F.pad(t,(2,1,1,2),mode="replicate"),(x4,)),("pad_circular",lambda t: F.pad(t,(2,1,1,2),mode="circular"),(x4,)),("pad_neg",lambda t: F.pad(t,(-1,1)),(x3,)),("unfold",lambda t: F.unfold(t,3,padding=1),(x4,)),("fold",lambda t: F.fold(t,(4,4),2,stride=2),(R(1,12,4),)),("grid_sample",lambda t,g: F.grid_sample(t,g,align_corners=False),(x4,R(2,5,5,2).clamp(-1,1))),("grid_sample_nearest_border",lambda t,g: F.grid_sample(t,g,mode="nearest",padding_mode="border",align_corners=True),(x4,R(2,5,5,2))),("affine_grid",lambda th: F.affine_grid(th,(2,3,4,5),align_corners=False),(R(2,2,3),)),("dropout_eval",nn.Dropout(0.5).eval(),(x3,)),("lstm",nn.LSTM(7,6,batch_first=True),(x3,)),("lstm_bi2",nn.LSTM(7,4,num_layers=2,bidirectional=True),(x3,)),("gru",nn.GRU(7,5,batch_first=True),(x3,)),("rnn_relu",nn.RNN(7,5,nonlinearity="relu"),(x3,)),("mha",nn.MultiheadAttention(8,2,batch_first=True).eval(),(R(2,5,8),R(2,5,8),R(2,5,8))),("sdpa_causal",lambda q,k,v: F.scaled_dot_product_attention(q,k,v,is_causal=True),(R(2,2,5,8),R(2,2,5,8),R(2,2,5,8))),("sdpa_mask",lambda q,k,v,m: F.scaled_dot_product_attention(q,k,v,attn_mask=m),(R(2,2,5,8),R(2,2,6,8),R(2,2,6,8),R(5,6)>0)),("transformer_layer",nn.TransformerEncoderLayer(16,4,32,batch_first=True).eval(),(R(2,5,16),)),("softmax_dim0",lambda t: F.softmax(t,0),(x3,)),("bilinear",nn.Bilinear(4,5,3),(R(2,4),R(2,5))),("linear3d",nn.Linear(7,3),(x3,)),("linear_nobias",nn.Linear(7,3,bias=False),(x3,)),("channel_shuffle",lambda t: t.reshape(2,2,2,8,8).transpose(1,2).reshape(2,4,8,8),(R(2,4,8,8),)),("max_unpool_like",lambda t: F.max_pool2d(t,2,return_indices=True)[1].float(),(x4,)),("embedding_bag",nn.EmbeddingBag(10,3,mode="mean"),(I(10,2,4),)),("ctc_like_logsoftmax",lambda t: t.log_softmax(2).transpose(0,1),(x3,)),("cumsum_dim0_int",lambda t: t.cumsum(0),(I(5,3,4),)),("celu_a",lambda t: F.celu(t,alpha=2.),(x3,)),("instnorm_noaffine3d",nn.InstanceNorm3d(2),(R(1,2,3,4,5),)),("group_conv_dw",nn.Conv2d(3,3,5,groups=3,padding=2),(x4,)),("conv_pad_reflect",nn.Conv2d(3,4,3,padding=1,padding_mode="reflect"),(x4,)),("conv_pad_circular",nn.Conv2d(3,4,3,padding=1,padding_mode="circular"),(x4,))]:
        case("nn_"+n, m, *a)
    return C


def compare(got, want):
    """Problems of one output (empty: equal within the tolerance)."""
    a, b = np.asarray(got), np.asarray(want)
    if a.shape != b.shape:
        return f"shape {a.shape}, ONNX Runtime {b.shape}"
    if a.dtype.kind != b.dtype.kind:
        return f"dtype {a.dtype}, ONNX Runtime {b.dtype}"
    if b.dtype.kind == "f":
        if not np.allclose(a, b, rtol=TOL, atol=TOL, equal_nan=True):
            return f"max |error| {np.nanmax(np.abs(a - b)):.3g}"
    elif not np.array_equal(a, b):
        return f"{int((a != b).sum())} of {a.size} values differ"
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module-dir", required=True, help="folder holding the kiln Python package")
    ap.add_argument("--dynamo", action="store_true", help="export with the torch.export-based exporter (opset 18)")
    ap.add_argument("--dynamic", action="store_true",
                    help="export dim 0 of every input of rank >= 2 as one dynamic 'batch' dim, build a profile "
                         "[1, batch + 2] and also run at batch + 1 (rows appended by repeating the first)")
    ap.add_argument("--gpu-fusions", action="store_true",
                    help="run the GPU-only fusions (attention, skip LayerNorm, ...) in the CPU build too, at optimization level 5")
    ap.add_argument("--opset", type=int, default=0, help="export opset (default: 17, 18 with --dynamo)")
    ap.add_argument("--only", default="", help="comma list of case names")
    args = ap.parse_args()
    kiln = import_kiln(args.module_dir)
    if kiln is None:
        return 77
    only = set(filter(None, args.only.split(",")))
    tally = Tally(f"torch ops vs ONNX Runtime ({'dynamo' if args.dynamo else 'TorchScript'} exporter"
                  f"{', dynamic batch' if args.dynamic else ''}{', GPU fusions' if args.gpu_fusions else ''})")
    with tempfile.TemporaryDirectory(prefix="kiln_torch_ops_") as tmp:
        for name, m, inputs in cases():
            if only and name not in only:
                continue
            m.eval()
            path = os.path.join(tmp, name + ".onnx")
            names = [f"i{k}" for k in range(len(inputs))]
            batched = [n for n, t in zip(names, inputs) if args.dynamic and t.dim() >= 2]
            try:
                with torch.no_grad():
                    torch.onnx.export(m, inputs, path, dynamo=args.dynamo, opset_version=args.opset or (18 if args.dynamo else 17),
                                      input_names=names, dynamic_axes={n: {0: "batch"} for n in batched} or None)
            except Exception as e:
                tally.not_comparable(name, "PyTorch cannot export it: " + str(e).strip().splitlines()[0][:120])
                continue
            model = onnx.load(path)
            graph_inputs = {i.name for i in model.graph.input}
            # Constants fold away at export: feed only what the graph still takes.
            runs = [{n: t.numpy() for n, t in zip(names, inputs) if n in graph_inputs}]
            if batched:
                runs.append({n: np.concatenate([v, v[:1]]) if n in batched else v for n, v in runs[0].items()})
            try:
                wants = [ort_outputs(path, f) for f in runs]
            except Exception as e:
                tally.not_comparable(name, "ONNX Runtime cannot run it: " + str(e).strip().splitlines()[0][:120])
                continue
            try:
                cfg = kiln.BuilderConfig(tf32=False, device="cpu", gpu_fusions=args.gpu_fusions,
                                         optimization_level=5 if args.gpu_fusions else 3)
                live = [n for n in batched if n in graph_inputs]
                if live:
                    p = kiln.OptimizationProfile()
                    for n in live:
                        dims = list(runs[0][n].shape)
                        p.set_shape(n, [1] + dims[1:], dims, [dims[0] + 2] + dims[1:])
                    cfg.add_optimization_profile(p)
                ctx = kiln.build_engine(path, cfg).create_execution_context()
                problems = []
                for feeds, want in zip(runs, wants):
                    got = ctx.infer(feeds)
                    problems += [f"{o.name}: {p}" for o, w in zip(model.graph.output, want) if (p := compare(got[o.name], w))]
            except Exception as e:
                problems = [kiln_error(e)]
            if problems:
                tally.fail(name, "; ".join(problems))
            else:
                tally.ok()
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
