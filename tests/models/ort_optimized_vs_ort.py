#!/usr/bin/env python3
"""Models that ONNX Runtime's transformer optimizer has rewritten, against ONNX Runtime.

A tiny Hugging Face BERT (padding mask, token types) and GPT-2 are exported with torch.onnx.export
(opset 17; GPT-2 with the torch.export-based exporter at opset 18, its causal mask needs it) and rewritten by onnxruntime.transformers.optimizer.optimize_model (opt levels 1 and 2:
com.microsoft Gelu / BiasGelu / FastGelu, SkipLayerNormalization, ONNX Runtime's LayerNormalization),
then one-node models of each op the expander takes (com.microsoft Gelu, BiasGelu, FastGelu with
and without bias, QuickGelu, SkipLayerNormalization with bias and all four outputs,
SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization at opsets 14 and 18, LayerNormalization
at opset 14), and the model tests' MobileNetV2, BERT, GPT-2 and MLP as ONNX Runtime saves them after its
extended optimizations (com.microsoft FusedConv, FusedGemm, FusedMatMul; one-node forms of each with
sums, LeakyRelu / HardSigmoid / Clip, transposes and alpha). kiln (CPU, Python API) and ONNX Runtime (CPU EP) run each on the same inputs;
outputs must agree at 1e-4 (absolute and relative).

  ort_optimized_vs_ort.py --module-dir build/python

Exits 77 (skipped) without numpy, onnx or onnxruntime; the Hugging Face models are skipped (and
said so) without torch and transformers."""
import argparse
import os
import sys
import tempfile
import warnings

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

TOL = 1e-4
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from vs_ort import Tally, import_kiln, kiln_error, kiln_outputs, ort_outputs  # noqa: E402


def one_node(op, domain, inputs, outputs, inits=(), opset=17, **attrs):
    node = helper.make_node(op, [n for n, _ in inputs] + [i.name for i in inits], [n for n, _ in outputs], domain=domain, **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs if n], list(inits))
    imports = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=imports, ir_version=8)


def single_cases(rng):
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    skip = rng.standard_normal((2, 5, 16)).astype(np.float32)
    gamma = numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype(np.float32), "gamma")
    beta = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32) * 0.1, "beta")
    bias = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32) * 0.1, "bias")
    X = [("x", [2, 5, 16])]
    cases = [
        ("gelu", one_node("Gelu", "com.microsoft", X, [("y", None)]), {"x": x}),
        ("bias_gelu", one_node("BiasGelu", "com.microsoft", X, [("y", None)], [bias]), {"x": x}),
        ("fast_gelu", one_node("FastGelu", "com.microsoft", X, [("y", None)]), {"x": x}),
        ("fast_gelu_bias", one_node("FastGelu", "com.microsoft", X, [("y", None)], [bias]), {"x": x}),
        ("quick_gelu", one_node("QuickGelu", "com.microsoft", X, [("y", None)], alpha=1.5), {"x": x}),
        ("skip_layer_norm_all_outputs",
         one_node("SkipLayerNormalization", "com.microsoft", X + [("skip", [2, 5, 16])],
                  [("y", None), ("mean", None), ("inv_std", None), ("sum", None)], [gamma, beta, bias], epsilon=1e-5),
         {"x": x, "skip": skip}),
        ("skip_layer_norm", one_node("SkipLayerNormalization", "com.microsoft", X + [("skip", [2, 5, 16])], [("y", None)], [gamma],
                                     epsilon=1e-6), {"x": x, "skip": skip}),
        ("skip_simplified_layer_norm",
         one_node("SkipSimplifiedLayerNormalization", "com.microsoft", X + [("skip", [2, 5, 16])],
                  [("y", None), ("", None), ("inv_std", None), ("sum", None)], [gamma, bias], epsilon=1e-6),
         {"x": x, "skip": skip}),
    ]
    for opset in (14, 18):
        cases.append((f"simplified_layer_norm_opset{opset}",
                      one_node("SimplifiedLayerNormalization", "", X, [("y", None), ("inv_std", None)], [gamma], opset=opset,
                               axis=-1, epsilon=1e-5), {"x": x}))
    # What ONNX Runtime writes when it saves a model it optimized (ORT_ENABLE_EXTENDED).
    img = rng.standard_normal((2, 4, 7, 7)).astype(np.float32)
    w = numpy_helper.from_array(rng.standard_normal((6, 4, 3, 3)).astype(np.float32) * 0.3, "w")
    b = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32) * 0.1, "b")
    conv_attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    z = numpy_helper.from_array(rng.standard_normal((2, 6, 7, 7)).astype(np.float32), "z")  # the sum input, after B
    cases.append(("fused_conv_sum_leaky", one_node("FusedConv", "com.microsoft", [("x", [2, 4, 7, 7])], [("y", None)],
                                                   [w, b, z], activation="LeakyRelu", activation_params=[0.2], **conv_attrs),
                  {"x": img}))
    cases.append(("fused_conv_hardsigmoid", one_node("FusedConv", "com.microsoft", [("x", [2, 4, 7, 7])], [("y", None)], [w, b],
                                                     activation="HardSigmoid", activation_params=[0.3, 0.4], **conv_attrs), {"x": img}))
    cases.append(("fused_conv_clip_opset9", one_node("FusedConv", "com.microsoft", [("x", [2, 4, 7, 7])], [("y", None)], [w, b], opset=9,
                                                     activation="Clip", activation_params=[0.0, 6.0], **conv_attrs), {"x": img}))
    wg = numpy_helper.from_array(rng.standard_normal((5, 16)).astype(np.float32), "wg")
    cases.append(("fused_gemm_leaky", one_node("FusedGemm", "com.microsoft", [("x", [3, 16])], [("y", None)], [wg],
                                               transB=1, alpha=0.5, activation="LeakyRelu", activation_alpha=0.3),
                  {"x": rng.standard_normal((3, 16)).astype(np.float32)}))
    cases.append(("fused_matmul_trans_alpha", one_node("FusedMatMul", "com.microsoft", [("x", [2, 16, 5]), ("z", [2, 3, 16])], [("y", None)],
                                                       transA=1, transB=1, alpha=0.25),
                  {"x": rng.standard_normal((2, 16, 5)).astype(np.float32), "z": rng.standard_normal((2, 3, 16)).astype(np.float32)}))
    cases.append(("layer_norm_opset14", one_node("LayerNormalization", "", X, [("y", None)], [gamma, beta], opset=14, epsilon=1e-5),
                  {"x": x}))
    return cases


def hf_cases(tmp, tally):
    """(name, path, feeds) of ORT-optimized Hugging Face models; [] with a note without torch / transformers."""
    try:
        import torch
        import transformers
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as e:
        print(f"note: Hugging Face models skipped ({e})")
        return []
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    bert = transformers.BertModel(transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                          intermediate_size=128, vocab_size=100, max_position_embeddings=64,
                                                          attn_implementation="eager")).eval()
    gpt2 = transformers.GPT2Model(transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=64,
                                                          attn_implementation="eager")).eval()

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = bert

        def forward(self, ids, mask, types):
            r = self.m(input_ids=ids, attention_mask=mask, token_type_ids=types)
            return r.last_hidden_state, r.pooler_output

    class Gpt2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = gpt2

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=False).last_hidden_state

    rng = np.random.default_rng(4)
    ids = rng.integers(0, 100, (2, 16)).astype(np.int64)
    mask = np.ones((2, 16), np.int64)
    mask[1, 11:] = 0
    types = np.zeros((2, 16), np.int64)
    types[:, 8:] = 1
    out = []
    for name, module, feeds, model_type in (("bert", Bert(), {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}, "bert"),
                                            ("gpt2", Gpt2(), {"input_ids": ids}, "gpt2")):
        path = os.path.join(tmp, name + ".onnx")
        args_ = tuple(torch.from_numpy(v) for v in feeds.values())
        with torch.no_grad():
            try:
                torch.onnx.export(module, args_, path, dynamo=False, opset_version=17, input_names=list(feeds))
            except Exception:  # GPT-2's causal mask uses aten::diff, which only the torch.export-based exporter takes
                torch.onnx.export(module, args_, path, dynamo=True, opset_version=18, input_names=list(feeds))
        for level in (1, 2):
            opt = os.path.join(tmp, f"{name}_ort_opt{level}.onnx")
            try:
                optimize_model(path, model_type=model_type, num_heads=4, hidden_size=64, opt_level=level).save_model_to_file(opt)
            except Exception as e:  # the optimizer's own failure (its GPT-2 pass on a torch.export graph): nothing to compare
                tally.not_comparable(f"{name}_ort_opt{level}", f"ONNX Runtime's optimizer failed ({type(e).__name__}: {e})")
                continue
            ops = sorted({n.op_type for n in onnx.load(opt).graph.node if n.domain == "com.microsoft"})
            out.append((f"{name}_ort_opt{level} ({', '.join(ops) or 'no contrib ops'})", opt, feeds))
    return out


def ort_saved_cases(tmp):
    """The model tests' MobileNetV2, BERT, GPT-2 and MLP as ONNX Runtime saves them after its extended
    optimizations (FusedConv, FusedGemm, FusedMatMul, SkipLayerNormalization, Gelu, FastGelu)."""
    import subprocess
    gen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen_models.py")
    subprocess.run([sys.executable, gen, "--out", tmp, "--only", "mobilenetv2,bert,gpt2,mlp"], check=True, stdout=subprocess.DEVNULL)
    rng = np.random.default_rng(6)
    out = []
    for name in ("mobilenetv2", "bert", "gpt2", "mlp"):
        src, saved = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name + "_ort_saved.onnx")
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = saved
        so.log_severity_level = 3
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        model = onnx.load(saved)
        feeds = {}
        for i in model.graph.input:
            dims = [d.dim_value or 2 for d in i.type.tensor_type.shape.dim]
            if i.type.tensor_type.elem_type == TensorProto.INT64:
                feeds[i.name] = rng.integers(0, 2 if "mask" in i.name or "type" in i.name else 50, dims).astype(np.int64)
            else:
                feeds[i.name] = rng.standard_normal(dims).astype(np.float32)
        ops = sorted({n.op_type for n in model.graph.node if n.domain == "com.microsoft"})
        out.append((f"{name}_ort_saved ({', '.join(ops)})", saved, feeds))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module-dir", required=True)
    args = ap.parse_args()
    kiln = import_kiln(args.module_dir)
    if kiln is None:
        return 77
    tally = Tally("ORT-optimized models vs ONNX Runtime")
    with tempfile.TemporaryDirectory(prefix="kiln_ortopt_") as tmp:
        runs = []
        for name, model, feeds in single_cases(np.random.default_rng(8)):
            path = os.path.join(tmp, name + ".onnx")
            onnx.save(model, path)
            runs.append((name, path, feeds))
        runs += hf_cases(tmp, tally)
        runs += ort_saved_cases(tmp)
        for name, path, feeds in runs:
            outputs = [o.name for o in onnx.load(path).graph.output]
            want = ort_outputs(path, feeds)
            try:
                got = kiln_outputs(kiln, path, feeds)
            except Exception as e:
                tally.fail(name, kiln_error(e))
                continue
            bad = [f"{o}: max |error| {np.abs(np.asarray(got[o]) - w).max() if np.shape(got[o]) == w.shape else 'shape'}"
                   for o, w in zip(outputs, want) if np.shape(got[o]) != w.shape or not np.allclose(got[o], w, rtol=TOL, atol=TOL)]
            if bad:
                tally.fail(name, "; ".join(bad))
            else:
                tally.ok(name)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
