"""kiln.torch.compile: a PyTorch module -> ONNX (torch.onnx.export) -> kiln engine -> a callable
that takes and returns torch tensors.

    import torch, torchvision, kiln.torch
    model = torchvision.models.resnet18().eval().cuda()
    fast = kiln.torch.compile(model, (torch.randn(8, 3, 224, 224, device="cuda"),),
                              dynamic_axes={0: {0: (1, 32)}}, fp16=True)
    y = fast(torch.randn(4, 3, 224, 224, device="cuda"))

The engine runs on the device of the example inputs (CUDA tensors: the GPU they are on; CPU
tensors: kiln's CPU backend), reads the inputs and writes the outputs where torch keeps them (no
copies), on torch's current CUDA stream. Engines are cached on disk, keyed by the exported ONNX
bytes and the options, so a second compile of the same model loads its plan instead of building.
Inference only: the outputs carry no autograd history.
"""
import hashlib
import json
import os
import tempfile
import threading

import torch
from torch.utils import _pytree as pytree

from . import _kiln

__all__ = ["compile", "CompiledModule"]

_DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64,
    "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "bool": torch.bool,
}
for _name in ("uint16", "uint32", "uint64"):  # torch >= 2.3
    if hasattr(torch, _name):
        _DTYPES[_name] = getattr(torch, _name)

# The BuilderConfig keywords compile passes on (everything but device and profiles, which it sets).
_BUILD_OPTIONS = {
    "fp16", "bf16", "int8", "tf32", "strongly_typed", "precision_constraints", "layer_precisions",
    "optimization_level", "avg_timing", "max_aux_streams", "threads", "timing_cache", "workspace_limit",
    "disabled_tactics", "skipped_passes", "channels_last", "gpu_fusions", "plugin_override", "progress",
}


def default_cache_dir():
    """~/.cache/kiln/torch: where compile keeps engines unless told otherwise (cache_dir=)."""
    return os.path.join(os.path.expanduser("~"), ".cache", "kiln", "torch")


def _as_tuple(example_inputs):
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    inputs = tuple(example_inputs)
    for i, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"example input {i} is a {type(t).__name__}; kiln.torch.compile takes tensors")
    return inputs


def _device_of(inputs):
    devices = {t.device for t in inputs}
    if len(devices) != 1:
        raise ValueError(f"the example inputs are on several devices ({sorted(map(str, devices))}); put them on one")
    device = devices.pop()
    if device.type == "cuda":
        return device if device.index is not None else torch.device("cuda", torch.cuda.current_device())
    if device.type == "cpu":
        return device
    raise ValueError(f"kiln runs on CUDA GPUs and on the CPU, not on {device}")


def _ranges(dynamic_axes, inputs):
    """{input index: {axis: (min, max)}} from dynamic_axes, keyed by input index or 'input_<i>';
    an axis list means (1, the example's size)."""
    out = {}
    for key, axes in (dynamic_axes or {}).items():
        i = int(key.split("_")[-1]) if isinstance(key, str) else int(key)
        if not 0 <= i < len(inputs):
            raise ValueError(f"dynamic_axes names input {key!r}, but there are {len(inputs)} example inputs")
        shape = inputs[i].shape
        if not isinstance(axes, dict):
            axes = {a: (1, shape[a]) for a in axes}
        ranges = {}
        for axis, (lo, hi) in axes.items():
            axis = int(axis) % len(shape)
            if not lo <= shape[axis] <= hi:
                raise ValueError(f"dynamic_axes: input {i} axis {axis} has size {shape[axis]} in the example, outside ({lo}, {hi})")
            ranges[axis] = (int(lo), int(hi))
        out[i] = ranges
    return out


class _Call(torch.nn.Module):
    """module(*inputs) as the exported graph's top: the TorchScript tracer rejects some modules as
    the top one (transformers 5's BertModel: "got multiple values for argument 'use_cache'") and
    traces them fine when called from inside a module. Built in eval mode: export puts the top
    module back into the mode it found it in, recursively, so a wrapper left in training mode
    would switch the user's model to training (BatchNorm batch statistics, dropout)."""

    def __init__(self, module):
        super().__init__()
        self.module = module
        self.eval()

    def forward(self, *inputs):
        return self.module(*inputs)


def _export(module, inputs, n_outputs, ranges, opset, dynamo):
    """The ONNX bytes of module(*inputs), inputs named input_<i>, outputs output_<j>."""
    input_names = [f"input_{i}" for i in range(len(inputs))]
    output_names = [f"output_{j}" for j in range(n_outputs)]
    axes = {f"input_{i}": {a: f"input_{i}_dim{a}" for a in r} for i, r in ranges.items()}
    shapes = None
    if dynamo and ranges:  # the torch.export-based exporter takes ranges as torch.export.Dim
        shapes = tuple({a: torch.export.Dim(f"input_{i}_dim{a}", min=lo, max=hi) for a, (lo, hi) in ranges.get(i, {}).items()}
                       or None for i in range(len(inputs)))
        shapes, axes = (shapes,), None  # one entry: the wrapper's *inputs
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        try:
            extra = {"dynamic_shapes": shapes, "external_data": False} if dynamo else {}
            torch.onnx.export(_Call(module), inputs, path, input_names=input_names, output_names=output_names,
                              dynamic_axes=axes or None, opset_version=opset, dynamo=dynamo, **extra)
        except Exception as e:
            raise _kiln.UnsupportedError(
                f"kiln.torch.compile: torch.onnx.export cannot export {type(module).__name__} "
                f"({type(e).__name__}: {e})") from e
        if os.path.exists(path + ".data") or len(os.listdir(tmp)) > 1:
            raise _kiln.UnsupportedError("kiln.torch.compile: the model's weights exceed 2 GB (ONNX external data); "
                                         "export it to a file and use kiln.build_engine(path, config)")
        with open(path, "rb") as f:
            return f.read()


def _config(device, inputs, ranges, options):
    cfg = _kiln.BuilderConfig(device="gpu" if device.type == "cuda" else "cpu",
                              device_index=device.index if device.type == "cuda" else 0, **options)
    if ranges:
        p = _kiln.OptimizationProfile()
        for i, axes in ranges.items():
            shape = list(inputs[i].shape)
            lo, hi = list(shape), list(shape)
            for axis, (a, b) in axes.items():
                lo[axis], hi[axis] = a, b
            p.set_shape(f"input_{i}", lo, shape, hi)
        cfg.add_optimization_profile(p)
    return cfg


def _cache_key(onnx_bytes, device, ranges, options):
    described = {k: v for k, v in options.items() if k != "progress"}  # progress does not change the engine
    meta = json.dumps({"kiln": _kiln.__version__, "device": str(device), "ranges": ranges, "options": described},
                      sort_keys=True, default=str)
    return hashlib.sha256(onnx_bytes + meta.encode()).hexdigest()[:32]


def compile(module, example_inputs, *, dynamic_axes=None, cache_dir=None, cache=True, opset=17, dynamo=False,
            logger=None, **options):
    """Compiles `module` for inputs like `example_inputs` (a tensor or a tuple of tensors, all on one
    device) and returns a CompiledModule.

    dynamic_axes: {input index (or 'input_<i>'): {axis: (min, max)} or [axis, ...]} (a list means
    1 up to the example's size); the example's sizes are the profile's optimum. cache_dir: where
    engines are kept (default ~/.cache/kiln/torch); cache=False builds every time. opset, dynamo:
    passed to torch.onnx.export (dynamo=True uses the torch.export-based exporter, which needs
    onnxscript). logger: fn(severity, message) for kiln's messages. Other keywords are
    BuilderConfig options (fp16=True, optimization_level=5, timing_cache=..., ...).

    A model kiln cannot build raises kiln.UnsupportedError naming the op (or the exporter's error).
    """
    unknown = set(options) - _BUILD_OPTIONS
    if unknown:
        raise TypeError(f"kiln.torch.compile: unknown options {sorted(unknown)} (BuilderConfig's are {sorted(_BUILD_OPTIONS)})")
    inputs = _as_tuple(example_inputs)
    device = _device_of(inputs)
    ranges = _ranges(dynamic_axes, inputs)
    module.eval()
    with torch.no_grad():
        reference = module(*inputs)
    flat, spec = pytree.tree_flatten(reference)
    if not all(isinstance(t, torch.Tensor) for t in flat):
        raise TypeError(f"kiln.torch.compile: {type(module).__name__} returns something other than tensors")
    onnx_bytes = _export(module, inputs, len(flat), ranges, opset, dynamo)
    cfg = _config(device, inputs, ranges, options)

    engine = None
    path = None
    if cache:
        directory = cache_dir or default_cache_dir()
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, _cache_key(onnx_bytes, device, ranges, options) + ".plan")
        if os.path.exists(path):
            try:
                engine = _kiln.Engine.load(path, device=device.index if device.type == "cuda" else -1, logger=logger)
            except _kiln.Error:
                engine = None  # a plan of another kiln or device: build again
    if engine is None:
        try:
            engine = _kiln.build_engine(onnx_bytes, cfg, logger=logger)
        except _kiln.UnsupportedError as e:
            raise _kiln.UnsupportedError(f"kiln.torch.compile: kiln cannot build {type(module).__name__}: {e}") from e
        if path:
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
            os.close(fd)
            engine.save(tmp)
            os.replace(tmp, path)  # readers never see half a plan
    return CompiledModule(engine, device, len(inputs), spec, len(flat), path)


class CompiledModule:
    """Calls a kiln engine with torch tensors: fn(*inputs) -> outputs shaped as the module's.

    Inputs must have the example's dtypes, device and, for static axes, sizes. One execution
    context per calling thread. On the GPU the engine runs on torch's current stream of the
    engine's device and the call returns without waiting, as a torch op does."""

    def __init__(self, engine, device, n_inputs, spec, n_outputs, plan_path):
        self.engine = engine
        self.device = device
        self.plan_path = plan_path  # the cached plan (None with cache=False)
        self._n_inputs = n_inputs
        self._spec = spec
        self._leaf = spec.num_leaves == 1 and pytree.tree_unflatten([0], spec) == 0  # the module returns one tensor
        self._local = threading.local()
        self._inputs, self._outputs = [], []
        for t in engine.io_tensors:
            dtype = _DTYPES.get(t["dtype"])
            if dtype is None:
                raise _kiln.UnsupportedError(f"tensor '{t['name']}' is {t['dtype']}, which torch has no type for")
            static = t["shape"] if all(d >= 0 for d in t["shape"]) else None
            if t["mode"] == "input":  # the exporter drops inputs the graph does not use
                self._inputs.append((t["name"], int(t["name"].split("_")[-1]), dtype, static))
            else:
                self._outputs.append((t["name"], dtype, static and torch.Size(static)))
        if len(self._outputs) != n_outputs:
            raise _kiln.Error(f"the engine has {len(self._outputs)} outputs but the module returns {n_outputs} tensors")
        cuda = device.type == "cuda"
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None) if cuda else None
        if raw is not None:
            self._stream = lambda: raw(device.index)
        elif cuda:
            self._stream = lambda: torch.cuda.current_stream(device).cuda_stream
        else:
            self._stream = lambda: None

    def _context(self):
        ctx = getattr(self._local, "ctx", None)
        if ctx is None:
            ctx = self._local.ctx = self.engine.create_execution_context()
        return ctx

    def __call__(self, *args):
        if len(args) != self._n_inputs:
            raise TypeError(f"expected {self._n_inputs} input tensors, got {len(args)}")
        ctx = self._context()
        keep = []  # contiguous copies of strided inputs live until the run is enqueued
        for name, pos, dtype, static in self._inputs:
            t = args[pos]
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"input {pos} is a {type(t).__name__}, not a tensor")
            if t.dtype != dtype or t.device != self.device:
                raise TypeError(f"input {pos} is {t.dtype} on {t.device}; the engine takes {dtype} on {self.device}")
            if not t.is_contiguous():
                t = t.contiguous()
                keep.append(t)
            if static is None:
                ctx.set_input_shape(name, t.shape)
            elif list(t.shape) != static:
                raise ValueError(f"input {pos} has shape {list(t.shape)}; the engine was built for {static} "
                                 "(dynamic_axes makes axes dynamic)")
            ctx.set_tensor_address(name, t.data_ptr())
        outputs, dynamic = [], None
        for name, dtype, static in self._outputs:
            shape = static if static is not None else ctx.get_tensor_shape(name)
            if -1 in shape:  # data-dependent (torch.unique, nonzero, ...): memory and shape come during the run
                dynamic = dynamic or _TorchOutputs(torch, self.device)
                ctx.set_output_allocator(name, dynamic)
                outputs.append((name, dtype))
                continue
            ctx.set_output_allocator(name, None)
            o = torch.empty(shape, dtype=dtype, device=self.device)
            ctx.set_tensor_address(name, o.data_ptr())
            outputs.append(o)
        ctx.execute_async(self._stream())
        if dynamic is not None:
            outputs = [dynamic.tensor(*o) if isinstance(o, tuple) else o for o in outputs]
        return outputs[0] if self._leaf else pytree.tree_unflatten(outputs, self._spec)


class _TorchOutputs:
    """An output allocator (ExecutionContext.set_output_allocator) whose memory is torch tensors on the
    engine's device, for outputs whose shape the engine knows only while it runs."""

    def __init__(self, torch, device):
        self._torch, self._device, self._bytes, self._shapes = torch, device, {}, {}

    def reallocate_output(self, name, current, size, alignment):
        buf = self._torch.empty(max(int(size), 1), dtype=self._torch.uint8, device=self._device)
        self._bytes[name] = buf
        return buf.data_ptr()  # torch's allocations are aligned to 512 bytes at least

    def notify_shape(self, name, shape):
        self._shapes[name] = list(shape)

    def tensor(self, name, dtype):
        shape = self._shapes[name]
        count = 1
        for d in shape:
            count *= d
        item = self._torch.empty((), dtype=dtype).element_size()
        return self._bytes[name][:count * item].view(dtype).reshape(shape)
