#!/usr/bin/env python3
"""Dynamic-axis exports must lower to the same engine layers as fixed-shape exports (issue 23).

For each model (a small Hugging Face BertModel and LlamaModel with dynamic batch and sequence axes,
the LlamaModel called with ids alone, a T5 encoder-decoder called with ids alone, a small torchvision-style CNN, a timm ViT and a torchvision Swin
with a dynamic batch axis) this script
  1. exports it twice with torch.onnx.export (TorchScript exporter): once with fixed shapes at the
     profile's opt shape, once with dynamic_axes;
  2. builds both with kiln (CPU, --gpuFusions so that the GPU-only fusions run too), prints the
     engines' layers by op type (--exportLayerInfo), and compares the layers that run at the opt
     shape (--exportProfile: a dynamic engine also holds shape layers, Shape -> Gather -> Range ...
     of position and mask indices, that the context computes on the host when shapes change and
     that a static engine holds as constants): same count per op type (Add / Sub / Mul / Div /
     PointwiseChain counted as one elementwise kind: constant addends fold in a static engine only),
     or it fails;
  3. runs the dynamic engine at several shapes of its profile (min, opt, max and odd ones) and
     compares each output with ONNX Runtime (CPU) on the same dynamic export and the same inputs.
Usage: dynamic_vs_static.py --kiln build/bin/kiln [--models bert,cnn] [--work DIR] [--counts-only]
Exit status: 0 when every check passed, 1 otherwise, 77 when torch/transformers/timm/onnxruntime are missing."""
import argparse, collections, json, os, subprocess, sys

import numpy as np


def with_mask(m):
    """A transformers body called with (input_ids, attention_mask), returning last_hidden_state."""
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__(); self.m = m
        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return Hidden(m)


def padded_tokens(b, s, rng):
    """Random ids and an attention_mask whose last quarter is padding (the mask matters)."""
    ids = rng.integers(0, 1000, size=(b, s)).astype(np.int64)
    mask = np.ones((b, s), np.int64)
    mask[:, s - s // 4:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def bert_model():
    import torch
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=128, attn_implementation="eager")
    torch.manual_seed(0)
    m = BertModel(cfg).eval()

    return dict(module=with_mask(m), inputs=["input_ids", "attention_mask"], axes={0: "batch", 1: "seq"},
                shapes={"min": (1, 8), "opt": (4, 32), "max": (8, 64)}, extra_shapes=[(3, 37), (1, 1 + 8), (8, 17)],
                feeds=padded_tokens, key_flags=True)


def cnn_model():
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            return torch.relu(self.b2(self.c2(y)) + x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.MaxPool2d(2))
            self.blocks = nn.Sequential(Block(16), Block(16))
            self.fc = nn.Linear(16, 10)
        def forward(self, x):
            x = self.blocks(self.stem(x))
            x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
            return self.fc(x)

    torch.manual_seed(0)
    m = Net()
    with torch.no_grad():  # informative BatchNorm statistics
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.1); mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5); mod.bias.normal_(0, 0.1)
    m.eval()

    def feeds(b, _, rng):
        return {"input": rng.standard_normal((b, 3, 32, 32)).astype(np.float32)}

    # No shape-derived values: the engines must have the same layers, not only the same running ones.
    return dict(module=m, inputs=["input"], axes={0: "batch"}, shapes={"min": (1, 0), "opt": (4, 0), "max": (8, 0)},
                extra_shapes=[(3, 0), (5, 0)], feeds=feeds, same_engine=True)


def vit_model():
    """timm's ViT (packed QKV unbound by reshape/permute, a class token Expand-ed to the batch): with a
    dynamic batch the attention reads the packed projection in place, as in the fixed export."""
    import torch
    import timm
    torch.manual_seed(0)
    m = timm.models.vision_transformer.VisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4,
                                                        num_classes=10).eval()

    def feeds(b, _, rng):
        return {"input": rng.standard_normal((b, 3, 32, 32)).astype(np.float32)}

    return dict(module=m, inputs=["input"], axes={0: "batch"}, shapes={"min": (1, 0), "opt": (4, 0), "max": (8, 0)},
                extra_shapes=[(3, 0), (7, 0)], feeds=feeds)


def swin_model():
    """torchvision's Swin (shifted windows; every stage padded to a multiple of the window and the
    padding sliced off again, all zero here): with a dynamic batch the zero Pads and whole-axis
    Slices are elided as in the fixed export."""
    import torch
    from torchvision.models.swin_transformer import SwinTransformer
    torch.manual_seed(0)
    m = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                        num_classes=10).eval()

    def feeds(b, _, rng):
        return {"input": rng.standard_normal((b, 3, 32, 32)).astype(np.float32)}

    return dict(module=m, inputs=["input"], axes={0: "batch"}, shapes={"min": (1, 0), "opt": (4, 0), "max": (8, 0)},
                extra_shapes=[(3, 0)], feeds=feeds)


def llama_model():
    """A LLaMA decoder (GQA, RoPE, RMSNorm, SwiGLU) with dynamic batch and sequence and a padded
    attention_mask: causal + key padding become is_causal + key flags in both exports."""
    import torch
    from transformers import LlamaConfig, LlamaModel
    cfg = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=128, attn_implementation="eager", use_cache=False)
    torch.manual_seed(0)
    m = LlamaModel(cfg).eval()

    return dict(module=with_mask(m), inputs=["input_ids", "attention_mask"], axes={0: "batch", 1: "seq"},
                shapes={"min": (1, 8), "opt": (4, 32), "max": (8, 64)}, extra_shapes=[(3, 37), (8, 17)],
                feeds=padded_tokens, key_flags=True)


def llama_ones_model():
    """The LLaMA decoder called with ids alone and an all-ones attention_mask made from their shape,
    as generation code (and the perf zoo) calls it: the mask is a value of the shapes alone (the
    flags Gather-ed from ConstantOfShape(Shape(ids)) in transformers 5.17's export), so both engines
    take is_causal and no mask at all."""
    import torch
    from transformers import LlamaConfig, LlamaModel
    cfg = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=128, attn_implementation="eager", use_cache=False)
    torch.manual_seed(0)
    m = LlamaModel(cfg).eval()

    class Ones(torch.nn.Module):
        def __init__(self, m):
            super().__init__(); self.m = m
        def forward(self, input_ids):
            return self.m(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).last_hidden_state

    def ids(b, s, rng):
        return {"input_ids": rng.integers(0, 1000, size=(b, s)).astype(np.int64)}
    return dict(module=Ones(m), inputs=["input_ids"], axes={0: "batch", 1: "seq"},
                shapes={"min": (1, 1), "opt": (4, 32), "max": (8, 64)}, extra_shapes=[(3, 37), (8, 17), (2, 1)],
                feeds=ids, no_mask=True)


def t5_model(attn="sdpa"):
    """A T5 encoder-decoder called with ids alone (the decoder reads their first half): relative
    position bias in every self-attention, causal decoder, masks of the shapes alone. The fixed
    export folds the bias and the masks to constants; the dynamic one computes the bias at run time
    (a few small layers per stack, which the fixed engine lacks) and adds shape-only masks (and, in
    cross-attention, a zero bias of run-time dims) that must go, so that each Attention reads what
    the fixed engine's reads: the [1, H, Sq, Skv] bias alone, is_causal in the decoder.
    attn "sdpa" (transformers' default) masks the bias, Where(mask, bias, min); "eager" adds both."""
    import torch
    from transformers import T5Config, T5Model
    cfg = T5Config(vocab_size=1000, d_model=64, d_ff=128, d_kv=16, num_layers=2, num_decoder_layers=2, num_heads=4,
                   relative_attention_num_buckets=8, relative_attention_max_distance=32)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    m = T5Model(cfg).eval()

    class EncDec(torch.nn.Module):
        def __init__(self, m):
            super().__init__(); self.m = m
        def forward(self, input_ids):
            half = input_ids.shape[1] // 2
            return self.m(input_ids=input_ids, decoder_input_ids=input_ids[:, :half]).last_hidden_state

    def ids(b, s, rng):
        return {"input_ids": rng.integers(0, 1000, size=(b, s)).astype(np.int64)}
    return dict(module=EncDec(m), inputs=["input_ids"], axes={0: "batch", 1: "seq"},
                shapes={"min": (1, 4), "opt": (4, 32), "max": (8, 64)}, extra_shapes=[(3, 37), (2, 9)],
                feeds=ids, attention_like_static=True)


MODELS = {"bert": bert_model, "cnn": cnn_model, "vit": vit_model, "swin": swin_model, "llama": llama_model,
          "llama_ones": llama_ones_model, "t5": t5_model, "t5_eager": lambda: t5_model("eager")}


def export(spec, path, dynamic):
    import torch
    rng = np.random.default_rng(0)
    b, s = spec["shapes"]["opt"]
    example = spec["feeds"](b, s, rng)
    args = tuple(torch.from_numpy(example[n]) for n in spec["inputs"])
    axes = {n: spec["axes"] for n in spec["inputs"]} if dynamic else None
    if axes:
        axes["output"] = {0: "batch"} if len(spec["axes"]) == 1 else dict(spec["axes"])
    torch.onnx.export(spec["module"], args, path, dynamo=False, opset_version=17, input_names=spec["inputs"],
                      output_names=["output"], dynamic_axes=axes)


def shape_flag(spec, rng_feeds):
    return ",".join(f"{n}:{'x'.join(str(d) for d in rng_feeds[n].shape)}" for n in spec["inputs"])


def key_flag_masks(work, tag):
    """Whether every Attention layer of the engine (static or dynamic) reads a [B,1,1,S] (key flags) mask."""
    doc = json.load(open(os.path.join(work, f"layers_{tag}.json")))
    att = [l for l in (doc.get("layers") or doc.get("Layers")) if l["op"] == "Attention"]
    def flags(l):
        ins = [i for i in l["inputs"][3:4] if i]
        return bool(ins) and len(ins[0]["dims"]) == 4 and ins[0]["dims"][1] == 1 and ins[0]["dims"][2] == 1
    return bool(att) and all(flags(l) for l in att)


def causal_without_mask(work, tag):
    """Whether every Attention layer of the engine is causal and reads no mask."""
    doc = json.load(open(os.path.join(work, f"layers_{tag}.json")))
    att = [l for l in (doc.get("layers") or doc.get("Layers")) if l["op"] == "Attention"]
    def ok(l):
        causal = (l.get("parameters") or {}).get("is_causal") == 1
        return len([i for i in l["inputs"] if i]) == 3 and causal
    return bool(att) and all(ok(l) for l in att)


def attention_reads(work, tag):
    """Per Attention layer of the engine, in order: (is_causal, mask rank, mask dims that are 1)."""
    doc = json.load(open(os.path.join(work, f"layers_{tag}.json")))
    att = [l for l in (doc.get("layers") or doc.get("Layers")) if l["op"] == "Attention"]
    def reads(l):
        mask = l["inputs"][3] if len(l["inputs"]) > 3 and l["inputs"][3] else None
        ones = tuple(k for k, d in enumerate(mask["dims"]) if d == 1) if mask else None
        return ((l.get("parameters") or {}).get("is_causal", 0), len(mask["dims"]) if mask else 0, ones)
    return [reads(l) for l in att]


def layer_ops(kiln, onnx_path, work, tag, extra):
    info = os.path.join(work, f"layers_{tag}.json")
    cmd = [kiln, f"--onnx={onnx_path}", "--device=cpu", "--gpuFusions", "--skipInference",
           f"--exportLayerInfo={info}", "--builderOptimizationLevel=0", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"kiln exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    doc = json.load(open(info))
    layers = doc.get("layers") or doc.get("Layers")
    return collections.Counter(l["op"] for l in layers), layers


def save_feeds(feeds, work, tag):
    """Writes each input as .npy; returns the name:file items of --loadInputs."""
    loads = []
    for n, v in feeds.items():
        f = os.path.join(work, f"{tag}_{n}.npy")
        np.save(f, v)
        loads.append(f"{n}:{f}")
    return loads


# One elementwise kernel whatever it computes: a static engine folds constant addends that a dynamic
# one computes at run time (BERT's position + token-type embeddings: Add vs PointwiseChain(Add, Add)).
ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "PointwiseChain"}


def by_kind(ops):
    """ops with the elementwise layers counted as one kind."""
    out = collections.Counter()
    for op, n in ops.items():
        out["elementwise" if op in ELEMENTWISE else op] += n
    return out


def running_ops(kiln, engine_args, spec, work, tag, b, s):
    """Op types of the layers that run at shape b x s (the profiler reports those only)."""
    loads = save_feeds(spec["feeds"](b, s, np.random.default_rng(5)), work, f"prof_{tag}")
    prof = os.path.join(work, f"profile_{tag}.json")
    cmd = [kiln, *engine_args, "--device=cpu", f"--loadInputs={','.join(loads)}", f"--exportProfile={prof}",
           "--iterations=1", "--warmUp=0", "--duration=0"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"kiln exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    return collections.Counter(l["op"] for l in json.load(open(prof))[1:])


def profile_flags(spec, work):
    rng = np.random.default_rng(1)
    flags = []
    for key, flag in (("min", "--minShapes"), ("opt", "--optShapes"), ("max", "--maxShapes")):
        b, s = spec["shapes"][key]
        flags.append(f"{flag}={shape_flag(spec, spec['feeds'](b, s, rng))}")
    return flags


def run_dynamic(kiln, onnx_path, spec, work, b, s, prof):
    import onnxruntime as ort
    feeds = spec["feeds"](b, s, np.random.default_rng(100 + 7 * b + s))
    loads = save_feeds(feeds, work, f"in_{b}x{s}")
    out = os.path.join(work, f"out_{b}x{s}.json")
    cmd = [kiln, f"--loadEngine={onnx_path}.plan", "--device=cpu", f"--shapes={shape_flag(spec, feeds)}",
           f"--loadInputs={','.join(loads)}", f"--exportOutput={out}", "--iterations=3", "--warmUp=0", "--duration=0"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        return False, f"kiln exited {p.returncode}: {p.stderr.strip()[-500:]}"
    got = json.load(open(out))[0]
    got = np.array(got["values"], np.float64).reshape(got["dims"])
    ref = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"]).run(None, feeds)[0].astype(np.float64)
    if got.shape != ref.shape:
        return False, f"shape {got.shape} != ORT {ref.shape}"
    err = np.abs(got - ref)
    ok = bool(np.all(err <= 1e-4 + 1e-4 * np.abs(ref)))
    return ok, f"max abs err {err.max():.3g} (ORT absmax {np.abs(ref).max():.3g})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", default="bert,cnn,vit,swin,llama,llama_ones,t5,t5_eager")
    ap.add_argument("--work", default="/tmp/kiln_dynamic_vs_static")
    ap.add_argument("--counts-only", action="store_true", help="print the layer counts, compare nothing")
    a = ap.parse_args()
    try:
        import torch, onnxruntime, transformers, timm  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    failures = 0
    for name in a.models.split(","):
        spec = MODELS[name]()
        work = os.path.join(a.work, name)
        os.makedirs(work, exist_ok=True)
        static_path, dyn_path = os.path.join(work, "static.onnx"), os.path.join(work, "dynamic.onnx")
        export(spec, static_path, dynamic=False)
        export(spec, dyn_path, dynamic=True)
        prof = profile_flags(spec, work)
        s_ops, _ = layer_ops(a.kiln, static_path, work, "static", [f"--saveEngine={static_path}.plan"])
        d_ops, _ = layer_ops(a.kiln, dyn_path, work, "dynamic", prof + [f"--saveEngine={dyn_path}.plan"])
        print(f"{name}: static {sum(s_ops.values())} layers, dynamic {sum(d_ops.values())} layers")
        for op in sorted(set(s_ops) | set(d_ops)):
            mark = "" if s_ops[op] == d_ops[op] else "   <- differs"
            print(f"  {op:28s} static {s_ops[op]:4d}  dynamic {d_ops[op]:4d}{mark}")
        b, sq = spec["shapes"]["opt"]
        try:
            s_run = running_ops(a.kiln, [f"--onnx={static_path}", "--gpuFusions", "--builderOptimizationLevel=0"], spec,
                                work, "static", b, sq)
            opt_shapes = shape_flag(spec, spec["feeds"](b, sq, np.random.default_rng(0)))
            d_run = running_ops(a.kiln, [f"--loadEngine={dyn_path}.plan", f"--shapes={opt_shapes}"], spec, work, "dynamic", b, sq)
        except RuntimeError as e:
            print(f"FAIL {name} profiled run at the opt shape: {e}")
            failures += 1
            continue
        print(f"  layers that run at {b}x{sq}: static {sum(s_run.values())}, dynamic {sum(d_run.values())}")
        for op in sorted(set(s_run) | set(d_run)):
            mark = "" if s_run[op] == d_run[op] else "   <- differs"
            print(f"    {op:26s} static {s_run[op]:4d}  dynamic {d_run[op]:4d}{mark}")
        if a.counts_only:
            continue
        same = by_kind(s_run) == by_kind(d_run)
        if spec.get("attention_like_static"):
            same = s_run["Attention"] == d_run["Attention"]
            print(f"{'PASS' if same else 'FAIL'} {name} Attention layers that run at the opt shape: dynamic == static")
        else:
            print(f"{'PASS' if same else 'FAIL'} {name} layers that run at the opt shape, by op type (elementwise ones as one kind): "
                  "dynamic == static")
        if spec.get("key_flags"):  # the exporters' dense causal/padding mask became key flags in both engines
            for tag in ("static", "dynamic"):
                ok = key_flag_masks(work, tag)
                print(f"{'PASS' if ok else 'FAIL'} {name} {tag} engine: every Attention reads [B,1,1,S] key flags")
                failures += not ok
        if spec.get("no_mask"):  # a mask of the shapes alone (all-ones attention_mask): is_causal, no mask
            for tag in ("static", "dynamic"):
                ok = causal_without_mask(work, tag)
                print(f"{'PASS' if ok else 'FAIL'} {name} {tag} engine: every Attention is causal and reads no mask")
                failures += not ok
        if spec.get("attention_like_static"):  # the running layers may differ (run-time bias); the attentions may not
            s_att, d_att = attention_reads(work, "static"), attention_reads(work, "dynamic")
            ok = bool(s_att) and s_att == d_att
            print(f"{'PASS' if ok else 'FAIL'} {name} every Attention reads what the static engine's does "
                  f"(is_causal, mask rank, broadcast dims): {d_att if not ok else len(d_att)}"
                  + ("" if ok else f" vs static {s_att}"))
            failures += not ok
        failures += not same
        if spec.get("same_engine"):
            same = s_ops == d_ops
            print(f"{'PASS' if same else 'FAIL'} {name} engine layers by op type: dynamic == static")
            failures += not same
        ok, text = run_dynamic(a.kiln, static_path, spec, work, *spec["shapes"]["opt"], prof)  # the static engine too
        print(f"{'PASS' if ok else 'FAIL'} {name} static engine at {b}x{sq} vs ONNX Runtime: {text}")
        failures += not ok
        shapes = [spec["shapes"][k] for k in ("min", "opt", "max")] + spec["extra_shapes"]
        for b, s in shapes:
            ok, text = run_dynamic(a.kiln, dyn_path, spec, work, b, s, prof)
            print(f"{'PASS' if ok else 'FAIL'} {name} dynamic engine at {b}x{s} vs ONNX Runtime: {text}")
            failures += not ok
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
