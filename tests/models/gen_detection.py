#!/usr/bin/env python3
"""Exports torchvision detection models with torch.onnx (TorchScript exporter, opset 17): random
weights, seeded, small images so that CI stays quick. Their post-processing is data-dependent
(NonZero of score masks, TopK with k from those counts, NonMaxSuppression in an If, RoiAlign of the
kept proposals): what tests/models/test_detection.py runs through kiln against ONNX Runtime.

  gen_detection.py --out DIR [--only ssdlite,frcnn]

Writes DIR/<name>.onnx and DIR/<name>_image.npy; a model already there is kept (export takes ~35 s
each on the CI machine). Random weights are rescaled layer by layer on the test image
(normalize_layers) so that scores and boxes are informative: varied, few ties for TopK and NMS.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

MODELS = {
    # name: (torchvision builder, kwargs, image size, output names in the model's dict order)
    "ssdlite": ("ssdlite320_mobilenet_v3_large", {"num_classes": 4, "score_thresh": 0.05, "detections_per_img": 50}, 256,
                ["boxes", "scores", "labels"]),
    "frcnn": ("fasterrcnn_mobilenet_v3_large_320_fpn",
              {"num_classes": 4, "min_size": 224, "max_size": 224, "box_score_thresh": 0.05, "box_detections_per_img": 50,
               "rpn_pre_nms_top_n_test": 300, "rpn_post_nms_top_n_test": 100}, 224, ["boxes", "labels", "scores"]),
}


def informative_image(size: int) -> np.ndarray:
    """A few bright rectangles on a noisy background: features with structure, not uniform noise."""
    rng = np.random.default_rng(7)
    img = rng.uniform(0.0, 0.2, (3, size, size)).astype(np.float32)
    for _ in range(4):
        y0, x0 = rng.integers(0, size * 3 // 4, 2)
        h, w = rng.integers(size // 8, size // 3, 2)
        img[:, y0:y0 + h, x0:x0 + w] = rng.uniform(0.5, 1.0, (3, 1, 1))
    return img


def normalize_layers(model, torch, image) -> None:
    """Random weights let activations vanish or explode layer after layer (FPN outputs ~2000, every
    position alike, scores all equal or all 0/1). Each Conv/Linear is rescaled in forward order so that
    its output has unit standard deviation on the test image (data-dependent initialisation, as LSUV),
    which is roughly what trained weights give: varied scores and boxes."""
    layers = [m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    done = set()

    def hook(module, _inputs, output):
        if module in done or output.numel() < 2:
            return None
        done.add(module)
        std = float(output.std())
        if not np.isfinite(std) or std < 1e-12:
            return None
        with torch.no_grad():
            module.weight.div_(std)
            if module.bias is not None:
                module.bias.div_(std)
        return output / std

    handles = [m.register_forward_hook(hook) for m in layers]
    with torch.no_grad():
        model([image])
    for h in handles:
        h.remove()


def build(name: str):
    """The seeded torchvision model (eval mode) and its image."""
    import torch
    import torchvision
    builder, kwargs, size, _ = MODELS[name]
    torch.manual_seed(0)
    model = getattr(torchvision.models.detection, builder)(weights=None, weights_backbone=None, **kwargs).eval()
    image = torch.from_numpy(informative_image(size))
    normalize_layers(model, torch, image)
    return model, image


def export(name: str, out: str) -> str:
    import torch
    import torchvision
    builder, kwargs, size, outputs = MODELS[name]
    path = os.path.join(out, f"{name}.onnx")
    np.save(os.path.join(out, f"{name}_image.npy"), informative_image(size))
    if os.path.exists(path):
        return path
    model, image = build(name)
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, ([image],), path + ".tmp", opset_version=17, input_names=["image"],
                          output_names=outputs, dynamo=False)
    os.replace(path + ".tmp", path)
    print(f"exported {name} ({builder}, image {size}x{size}) in {time.time() - t0:.1f} s")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=",".join(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.only.split(","):
        export(name, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
