#!/usr/bin/env python3
"""kiln.torch.compile against PyTorch itself: a torchvision CNN (ResNet-18, random weights) and a
transformers encoder (a small BertModel) with a dynamic batch, the on-disk engine cache, the
unsupported-op error; on the GPU (--device gpu) also CUDA tensors on a side stream.

Usage: test_torch_compile.py --module-dir build/python [--device cpu|gpu]
Skipped (and says so) where torch, torchvision or transformers are missing.
"""
import os
import sys

from harness import Env, Skip, check, expect_error, main


def need(*names):
    mods = []
    for n in names:
        try:
            mods.append(__import__(n))
        except ImportError:
            raise Skip(f"{n} is not installed")
    return mods if len(mods) > 1 else mods[0]


def device():
    torch = need("torch")
    if Env.device == "gpu":
        if not torch.cuda.is_available():
            raise Skip("PyTorch has no CUDA here")
        return torch.device("cuda", 0)
    return torch.device("cpu")


def close(actual, expected, tol):
    torch = need("torch")
    check(actual.shape == expected.shape and actual.dtype == expected.dtype, (actual.shape, expected.shape))
    check(actual.device == expected.device, (actual.device, expected.device))
    err = (actual.float() - expected.float()).abs().max().item()
    scale = expected.float().abs().max().item()
    check(err <= tol * max(scale, 1.0), f"max error {err} (output range {scale})")
    return torch


def build_messages():
    log = []
    return log, lambda severity, message: log.append(message)


def test_resnet18_matches_pytorch_and_is_cached():
    torch, torchvision = need("torch", "torchvision")
    import kiln.torch
    dev = device()
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval().to(dev)
    x = torch.randn(2, 3, 64, 64, device=dev)
    cache = os.path.join(Env.tmp, "resnet_cache")
    log, logger = build_messages()
    fast = kiln.torch.compile(model, (x,), dynamic_axes={0: {0: (1, 4)}}, cache_dir=cache, logger=logger,
                              optimization_level=1, tf32=False)
    check(any("engine built" in m for m in log), "the first compile builds")
    check(not model.training, "compile leaves the model in eval mode")
    check(fast.plan_path and os.path.dirname(fast.plan_path) == cache and os.path.exists(fast.plan_path))
    with torch.no_grad():
        for batch in (2, 3, 1):
            xb = torch.randn(batch, 3, 64, 64, device=dev)
            close(fast(xb), model(xb), 1e-3)
    # The same model and options again: the plan comes from the cache, nothing is built.
    log2, logger2 = build_messages()
    again = kiln.torch.compile(model, (x,), dynamic_axes={0: {0: (1, 4)}}, cache_dir=cache, logger=logger2,
                               optimization_level=1, tf32=False)
    check(again.plan_path == fast.plan_path and not any("engine built" in m for m in log2), log2)
    close(again(x), fast(x), 1e-6)
    # Other options are another engine.
    other = kiln.torch.compile(model, (x,), cache_dir=cache, optimization_level=0, tf32=False)
    check(other.plan_path != fast.plan_path)
    expect_error(lambda: fast(torch.randn(8, 3, 64, 64, device=dev)), "outside the optimization profile")
    expect_error(lambda: other(torch.randn(3, 3, 64, 64, device=dev)), "built for [2, 3, 64, 64]", ValueError)
    expect_error(lambda: fast(x.double()), "torch.float64", TypeError)


def test_bert_encoder_matches_pytorch():
    torch, transformers = need("torch", "transformers")
    import kiln.torch
    dev = device()
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, max_position_embeddings=64)
    model = transformers.BertModel(config).eval().to(dev)
    ids = torch.randint(0, 200, (2, 16), device=dev)
    mask = torch.ones(2, 16, dtype=torch.int64, device=dev)
    mask[1, 12:] = 0
    fast = kiln.torch.compile(model, (ids, mask), dynamic_axes={0: {0: (1, 4), 1: (1, 32)}, 1: {0: (1, 4), 1: (1, 32)}},
                              cache=False, optimization_level=1, tf32=False)
    with torch.no_grad():
        for batch, seq in ((2, 16), (3, 9), (1, 32)):
            ids = torch.randint(0, 200, (batch, seq), device=dev)
            mask = torch.ones(batch, seq, dtype=torch.int64, device=dev)
            mask[0, seq // 2:] = 0
            got, want = fast(ids, mask), model(ids, mask)
            check(type(got) is type(want), f"{type(got).__name__} is not {type(want).__name__}")
            close(got.last_hidden_state, want.last_hidden_state, 1e-3)
            close(got.pooler_output, want.pooler_output, 1e-3)


def test_dynamo_exporter_with_a_dynamic_batch():
    """dynamo=True: the torch.export-based exporter, the ranges given as torch.export.Dim."""
    torch, _ = need("torch", "onnxscript")
    import kiln.torch
    dev = device()
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to(dev)
    fast = kiln.torch.compile(model, (torch.randn(3, 8, device=dev),), dynamic_axes={0: [0]}, dynamo=True, opset=18,
                              cache=False, tf32=False)
    with torch.no_grad():
        for batch in (3, 1, 2):
            x = torch.randn(batch, 8, device=dev)
            close(fast(x), model(x), 1e-4)


def test_unsupported_op_is_named():
    torch = need("torch")
    import kiln
    import kiln.torch

    class Draw(torch.nn.Module):  # ONNX Multinomial: a sampling op kiln has no kernel for
        def forward(self, x):
            return torch.multinomial(torch.softmax(x, -1), 1) * 2

    expect_error(lambda: kiln.torch.compile(Draw(), (torch.randn(2, 8, device=device()),), cache=False),
                 "Multinomial", kiln.UnsupportedError)
    expect_error(lambda: kiln.torch.compile(Draw(), torch.randn(2, 8), cache=False, fp17=True), "unknown options", TypeError)


def test_data_dependent_output():
    """torch.unique's size depends on the values: the engine returns it with its real shape."""
    torch = need("torch")
    import kiln.torch

    class Uniques(torch.nn.Module):
        def forward(self, x):
            return torch.unique(x) * 2

    x = torch.tensor([3.0, 1.0, 3.0, -2.0, 1.0, 7.0], device=device())
    fast = kiln.torch.compile(Uniques(), (x,), cache=False)
    for v in (x, torch.tensor([5.0, 5.0, 5.0, 5.0, 5.0, 5.0], device=device())):
        got, want = fast(v), Uniques()(v)
        check(tuple(got.shape) == tuple(want.shape) and torch.equal(got.cpu(), want.cpu()), (got, want))


def test_gpu_side_stream_and_cpu_tensors_refused():
    torch, torchvision = need("torch", "torchvision")
    import kiln.torch
    if Env.device != "gpu" or not torch.cuda.is_available():
        raise Skip("needs --device gpu and PyTorch with CUDA")
    torch.manual_seed(1)
    model = torchvision.models.resnet18(weights=None).eval().cuda()
    x = torch.randn(4, 3, 96, 96, device="cuda")
    fast = kiln.torch.compile(model, (x,), cache=False, tf32=False, optimization_level=1)
    s = torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.stream(s):  # everything ordered on s; no host waits in between
        y = fast(x * 1)
        z = y * 1
    s.synchronize()
    close(z, model(x), 1e-3)
    expect_error(lambda: fast(x.cpu()), "on cpu", TypeError)


if __name__ == "__main__":
    sys.exit(main(globals(), "kiln.torch tests"))
