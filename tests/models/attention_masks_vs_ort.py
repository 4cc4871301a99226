#!/usr/bin/env python3
"""Attention masks end to end (issue 14): transformers decoders and encoders (LLaMA, Qwen2, GPT-2, BERT;
small configs, random weights) exported with torch.onnx, the attention_mask a graph input. Built with
--gpuFusions on the CPU, the fused Attention layers must take the key-padding form (is_causal for the
decoders, a bool [B, 1, 1, S] mask, kiln_mask_fill = finfo.min) instead of the dense [B, 1, S, S] mask
(the builder's key-padding analysis, src/builder/passes/fuse_attention_key_padding.cpp), and the engine
must match ONNX Runtime (CPU EP, no graph optimizations) for masks with right padding, left padding
(whole query rows masked), an all-zero row and all ones.

  attention_masks_vs_ort.py --kiln build/bin/kiln --work DIR [--only llama,bert]

Exits 77 (skipped) without torch, transformers or onnxruntime."""
import argparse
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import onnxruntime as ort
    import torch
    import transformers
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

B, S = 4, 24
RTOL = ATOL = 1e-4


class WithMask(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, mask):
        return self.m(input_ids=ids, attention_mask=mask).last_hidden_state


def make(cls, cfg_cls, **kw):
    cfg = getattr(transformers, cfg_cls)(**kw)
    if hasattr(cfg, "use_cache"):
        cfg.use_cache = False
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    return WithMask(getattr(transformers, cls)(cfg)).eval()


MODELS = {  # name -> (make, causal)
    "llama": (lambda: make("LlamaModel", "LlamaConfig", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, vocab_size=100, max_position_embeddings=128), True),
    "qwen2": (lambda: make("Qwen2Model", "Qwen2Config", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=1, vocab_size=100, max_position_embeddings=128), True),
    "gpt2": (lambda: make("GPT2Model", "GPT2Config", n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=128), True),
    "bert": (lambda: make("BertModel", "BertConfig", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=128, vocab_size=100, max_position_embeddings=128), False),
}


def masks():
    """attention_mask patterns [B, S] (int64): name -> array."""
    ones = np.ones((B, S), np.int64)
    right = ones.copy()
    for b, n in enumerate([S, S - 5, 3, S - 1]):
        right[b, n:] = 0
    left = ones.copy()
    for b, n in enumerate([0, 7, S - 2, 1]):
        left[b, :n] = 0  # rows before the first kept key mask every key
    mixed = right.copy()
    mixed[2] = 0  # a sequence that is all padding
    mixed[3, ::3] = 0
    return {"ones": ones, "right_padding": right, "left_padding": left, "all_zero_row": mixed}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {(p.stdout + p.stderr)[-2000:]}")
    return p.stdout


def attention_layers(info_path):
    with open(info_path) as f:
        return [l for l in json.load(f)["layers"] if l["op"] == "Attention"]


def key_padding_form(layer):
    """The mask input is the bool key flags [B, 1, 1, S] (the dense one is float [B, 1, S, S]). Whether
    is_causal and kiln_mask_fill are right shows in the outputs: without is_causal the decoders'
    all-ones run differs from ONNX Runtime, without the fill the left-padding rows (every key masked)
    come out zero instead of ONNX Runtime's uniform average."""
    ins = [t for t in layer["inputs"] if isinstance(t, dict)]
    return len(ins) == 4 and ins[3]["dtype"] == "bool" and ins[3]["dims"] == [B, 1, 1, S]


def check_model(args, name):
    make_model, causal = MODELS[name]
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, f"{name}.onnx")
    ids = np.random.default_rng(1).integers(1, 100, (B, S)).astype(np.int64)
    with torch.no_grad():
        torch.onnx.export(make_model(), (torch.from_numpy(ids), torch.ones(B, S, dtype=torch.int64)), path, dynamo=False,
                          opset_version=17, input_names=["ids", "mask"], output_names=["out"])
    engine = os.path.join(work, "engine.plan")
    info = os.path.join(work, "layers.json")
    run([args.kiln, f"--onnx={path}", "--gpuFusions", f"--saveEngine={engine}", f"--exportLayerInfo={info}",
         "--skipInference", "--threads=2"])
    att = attention_layers(info)
    ok = len(att) == 2 and all(key_padding_form(l) for l in att)
    print(f"{'PASS' if ok else 'FAIL'} {name}: {len(att)} Attention layers with a bool [B, 1, 1, S] key mask"
          + ("" if ok else f": {json.dumps(att)[:1500]}"))
    failures = 0 if ok else 1
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    for tag, mask in masks().items():
        np.save(os.path.join(work, "ids.npy"), ids)
        np.save(os.path.join(work, "mask.npy"), mask)
        out = os.path.join(work, f"out_{tag}.json")
        run([args.kiln, f"--loadEngine={engine}", "--threads=2", "--iterations=1", "--warmUp=0", "--duration=0",
             f"--loadInputs=ids:{work}/ids.npy,mask:{work}/mask.npy", f"--exportOutput={out}"])
        with open(out) as f:
            got = next(o for o in json.load(f) if o["name"] == "out")
        got = np.asarray(got["values"], np.float32).reshape(got.get("dims", got.get("dimensions")))
        ref = sess.run(["out"], {"ids": ids, "mask": mask})[0]
        err = np.abs(got - ref) - (ATOL + RTOL * np.abs(ref))
        good = bool(np.all(err <= 0)) and np.isfinite(got).all() == np.isfinite(ref).all()
        failures += not good
        print(f"{'PASS' if good else 'FAIL'} {name} {tag}: max |kiln - ort| = {np.abs(got - ref).max():.3g}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    failures = sum(check_model(args, n) for n in names)
    print(f"{'FAILED' if failures else 'PASSED'}: {failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
