#!/usr/bin/env python3
"""The kiln Triton backend in a real tritonserver (PyPI nvidia-pytriton's binary), on the CPU.

Builds a model repository in a temporary folder: a small CNN as model.onnx (built on load, config
auto-completed), the same CNN as a plan saved by the kiln CLI (two instances, per-shape contexts),
a BERT-style encoder with dynamic batch and sequence (explicit config, int64 inputs, two outputs),
a model whose config names an input the engine does not have, and one with a bad parameter. Starts
tritonserver with --backend-directory holding kiln/libtriton_kiln.so, explicit model control, on
127.0.0.1 with free ports, and checks through tritonclient (HTTP and gRPC), against ONNX Runtime:
  - the auto-completed configuration (names, types, dims, max_batch_size from the profile);
  - single requests, batch sizes 1..max, every output; both protocols;
  - a bounded concurrent load (dynamic batching: Triton's statistics must show batches of more
    than one request), reported as throughput and p50/p99 latency, with 0 failures;
  - encoder requests of different sequence lengths at once (separate batches per shape);
  - malformed requests (wrong shape, dtype, unknown input, batch too large, a dim beyond the
    profile) answered with an error naming the problem, the server serving on afterwards;
  - a model whose config does not match its engine, and one with a bad parameter value, refused
    at load with a clear message;
  - unload / load, and a reload while a client keeps sending (no failed request);
  - statistics (success counts, batch statistics) and a clean shutdown.
Usage: test_triton_server.py --backend-dir build/triton_backends --kiln build/bin/kiln
  [--device gpu]  KIND_GPU instances on GPU 0 (CUDA graphs per shape for the plan model; FP32
                  without TF32, compared at 1e-3); exit 77 (skipped) without a GPU
  [--protocols grpc]  gRPC only (the GPU machine has grpcio but not the HTTP client's gevent)
  [--tritonserver PATH]  the binary (default: the one nvidia-pytriton installed)
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import model_zoo  # noqa: E402

try:
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException
except ImportError as e:  # a missing dependency is a failure, not a skip: install_deps.sh installs it
    print(f"FAIL: tritonclient is not installed ({e}); run scripts/install_deps.sh", file=sys.stderr)
    sys.exit(1)
httpclient = None  # imported in main() unless --protocols leaves HTTP out

RTOL = ATOL = 1e-4
DEVICE = "cpu"
KIND = "KIND_CPU"
CNN_MAX_BATCH = 8
ENC_MAX_BATCH, ENC_MAX_SEQ = 4, 32
PASSED = []


def check(cond, msg):
    """An assert that `python -O` keeps."""
    if not cond:
        raise AssertionError(msg)


def step(name):
    PASSED.append(name)
    print(f"ok   {name}", flush=True)


def find_tritonserver() -> str:
    spec = importlib.util.find_spec("pytriton")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("FAIL: nvidia-pytriton (which ships tritonserver) is not installed; run scripts/install_deps.sh")
    path = os.path.join(list(spec.submodule_search_locations)[0], "tritonserver", "bin", "tritonserver")
    if not os.access(path, os.X_OK):
        raise SystemExit(f"FAIL: {path} is missing or not executable")
    return path


def gpu_present() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


# ---- models ------------------------------------------------------------------------------------
def make_cnn() -> onnx.ModelProto:
    """input[batch, 3, 32, 32] -> 2 x (conv+BN+ReLU, stride 2) -> global pool -> Gemm -> logits[batch, 10]."""
    g = model_zoo.GraphBuilder("cnn", seed=11)
    x = g.add_input("input", onnx.TensorProto.FLOAT, ["batch", 3, 32, 32])
    y = g.node("Relu", [model_zoo.conv_bn(g, x, "/conv1", 3, 16, 3, stride=2)], "/relu1")
    y = g.node("Relu", [model_zoo.conv_bn(g, y, "/conv2", 16, 32, 3, stride=2)], "/relu2")
    y = g.node("Flatten", [g.node("GlobalAveragePool", [y], "/pool")], "/flatten", axis=1)
    y = model_zoo.gemm(g, y, "/fc/Gemm", 32, 10)
    g.add_output(y, onnx.TensorProto.FLOAT, ["batch", 10])
    model = g.model()
    model_zoo.rename_outputs(model, {y: "logits"})
    return model


def make_encoder() -> onnx.ModelProto:
    return model_zoo.make_bert(layers=1, hidden=64, heads=2, intermediate=128, vocab=100, max_positions=64,
                               dynamic=True, seed=12, name="encoder")


def encoder_inputs(batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), np.int64)
    mask[:, seq - seq // 4:] = 0  # padded tails, so the mask matters
    return {"input_ids": rng.integers(0, 100, (batch, seq)).astype(np.int64), "attention_mask": mask,
            "token_type_ids": rng.integers(0, 2, (batch, seq)).astype(np.int64)}


def write_model(repo: str, name: str, config: str, files: dict[str, bytes]) -> None:
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(config)
    for fname, data in files.items():
        with open(os.path.join(repo, name, "1", fname), "wb") as f:
            f.write(data)


def make_repository(repo: str, kiln: str) -> dict[str, str]:
    """Writes the repository; returns the ONNX path of each model (the reference's input)."""
    onnx_dir = os.path.join(repo, "..", "onnx")
    os.makedirs(onnx_dir, exist_ok=True)
    cnn, enc = make_cnn(), make_encoder()
    paths = {"cnn": os.path.join(onnx_dir, "cnn.onnx"), "encoder": os.path.join(onnx_dir, "encoder.onnx")}
    onnx.save(cnn, paths["cnn"])
    onnx.save(enc, paths["encoder"])

    # cnn: model.onnx built on load with the profile [1, max_batch_size] (only the batch is
    # dynamic); inputs and outputs are left to auto-complete.
    write_model(repo, "cnn", f"""
backend: "kiln"
max_batch_size: {CNN_MAX_BATCH}
dynamic_batching {{ max_queue_delay_microseconds: 20000 }}
instance_group [ {{ kind: {KIND}, count: 1 }} ]
parameters {{ key: "tf32" value {{ string_value: "false" }} }}
parameters {{ key: "builder_optimization_level" value {{ string_value: "1" }} }}
parameters {{ key: "timing_cache_file" value {{ string_value: "cnn.cache" }} }}
parameters {{ key: "threads" value {{ string_value: "1" }} }}
""", {"model.onnx": cnn.SerializeToString()})

    # cnn_plan: a plan saved by the CLI; config gives only the backend: everything else
    # (I/O and max_batch_size from the plan's profile) is auto-completed. Two instances with
    # per-shape contexts (cuda_graphs: on the CPU it warns and keeps one context per shape set),
    # three batches in flight per instance (lanes answered by the completion thread).
    plan = os.path.join(onnx_dir, "cnn.plan")
    device_flags = ["--backend=gpu", "--noTF32"] if DEVICE == "gpu" else ["--backend=cpu", "--threads=1"]
    subprocess.run([kiln, f"--onnx={paths['cnn']}", *device_flags, "--builderOptimizationLevel=1",
                    "--minShapes=input:1x3x32x32", f"--optShapes=input:{CNN_MAX_BATCH}x3x32x32",
                    f"--maxShapes=input:{CNN_MAX_BATCH}x3x32x32", f"--saveEngine={plan}", "--skipInference"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(plan, "rb") as f:
        plan_bytes = f.read()
    write_model(repo, "cnn_plan", f"""
backend: "kiln"
dynamic_batching {{ max_queue_delay_microseconds: 5000 }}
instance_group [ {{ kind: {KIND}, count: 2 }} ]
parameters {{ key: "cuda_graphs" value {{ string_value: "true" }} }}
parameters {{ key: "batches_in_flight" value {{ string_value: "3" }} }}
""", {"model.plan": plan_bytes})

    # encoder: explicit I/O (checked against the engine), dynamic batch and sequence ranges.
    ranges = {k: ",".join(f"{n}:{b}x{s}" for n in ("input_ids", "attention_mask", "token_type_ids"))
              for k, (b, s) in {"min": (1, 1), "opt": (ENC_MAX_BATCH, 16), "max": (ENC_MAX_BATCH, ENC_MAX_SEQ)}.items()}
    inputs = ",\n".join(f'  {{ name: "{n}" data_type: TYPE_INT64 dims: [ -1 ] }}'
                        for n in ("input_ids", "attention_mask", "token_type_ids"))
    write_model(repo, "encoder", f"""
backend: "kiln"
max_batch_size: {ENC_MAX_BATCH}
input [
{inputs}
]
output [
  {{ name: "last_hidden_state" data_type: TYPE_FP32 dims: [ -1, 64 ] }},
  {{ name: "pooler_output" data_type: TYPE_FP32 dims: [ 64 ] }}
]
dynamic_batching {{ max_queue_delay_microseconds: 20000 }}
instance_group [ {{ kind: {KIND} }} ]
parameters {{ key: "tf32" value {{ string_value: "false" }} }}
parameters {{ key: "min_shapes" value {{ string_value: "{ranges['min']}" }} }}
parameters {{ key: "opt_shapes" value {{ string_value: "{ranges['opt']}" }} }}
parameters {{ key: "max_shapes" value {{ string_value: "{ranges['max']}" }} }}
parameters {{ key: "builder_optimization_level" value {{ string_value: "0" }} }}
""", {"model.onnx": enc.SerializeToString()})

    # bad_config: the config names an input the engine does not have.
    write_model(repo, "bad_config", f"""
backend: "kiln"
max_batch_size: {CNN_MAX_BATCH}
input [ {{ name: "image" data_type: TYPE_FP32 dims: [ 3, 32, 32 ] }} ]
instance_group [ {{ kind: {KIND} }} ]
""", {"model.plan": plan_bytes})
    # bad_parameter: a build parameter with a value the backend refuses.
    write_model(repo, "bad_parameter", f"""
backend: "kiln"
max_batch_size: {CNN_MAX_BATCH}
instance_group [ {{ kind: {KIND} }} ]
parameters {{ key: "precision" value {{ string_value: "int4" }} }}
""", {"model.onnx": cnn.SerializeToString()})
    return paths


# ---- server ------------------------------------------------------------------------------------
class Server:
    def __init__(self, binary: str, repo: str, backend_dir: str, log_path: str):
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        self.log = open(log_path, "w")
        self.log_path = log_path
        cmd = [binary, f"--model-repository={repo}", f"--backend-directory={backend_dir}",
               "--model-control-mode=explicit", "--load-model=cnn", "--load-model=cnn_plan", "--load-model=encoder",
               "--http-address=127.0.0.1", f"--http-port={self.http_port}",
               "--grpc-address=127.0.0.1", f"--grpc-port={self.grpc_port}",
               "--allow-metrics=false", f"--metrics-port={self.metrics_port}", "--exit-timeout-secs=10"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.http_url = f"127.0.0.1:{self.http_port}"
        self.grpc_url = f"127.0.0.1:{self.grpc_port}"

    def wait_ready(self, timeout_s: float) -> None:
        client = grpcclient.InferenceServerClient(self.grpc_url)
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"tritonserver exited with {self.proc.returncode} while starting:\n{self.tail()}")
            try:
                if client.is_server_ready():
                    client.close()
                    return
            except Exception:  # not listening yet
                pass
            time.sleep(0.2)
        raise AssertionError(f"tritonserver not ready after {timeout_s} s:\n{self.tail()}")

    def tail(self, lines: int = 60) -> str:
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("tritonserver did not stop within 60 s of SIGINT")
        self.log.close()
        return self.proc.returncode


# ---- requests ----------------------------------------------------------------------------------
def infer(module, client, model: str, feeds: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
    inputs = []
    for name, value in feeds.items():
        inp = module.InferInput(name, list(value.shape), "FP32" if value.dtype == np.float32 else
                                {np.dtype(np.int64): "INT64", np.dtype(np.float64): "FP64"}[value.dtype])
        inp.set_data_from_numpy(value)
        inputs.append(inp)
    result = client.infer(model, inputs, outputs=[module.InferRequestedOutput(o) for o in outputs])
    return {o: result.as_numpy(o) for o in outputs}


def expect_close(got: dict, ref: dict, what: str) -> None:
    for name, want in ref.items():
        check(got[name] is not None, f"{what}: no output {name}")
        check(got[name].shape == want.shape, f"{what}: {name} has shape {got[name].shape}, ONNX Runtime {want.shape}")
        err = float(np.max(np.abs(got[name] - want))) if want.size else 0.0
        check(np.allclose(got[name], want, rtol=RTOL, atol=ATOL), f"{what}: {name} differs from ONNX Runtime (max abs err {err:.3g})")


def expect_error(fn, needles: list[str], what: str) -> str:
    try:
        fn()
    except InferenceServerException as e:
        msg = str(e)
        for n in needles:
            check(n in msg, f"{what}: the error does not say '{n}': {msg}")
        return msg
    raise AssertionError(f"{what}: the request succeeded")


class Api:
    """One protocol: its tritonclient module and the server's address for it."""

    made = []  # every client, closed before the server stops (open HTTP connections delay its exit)

    def __init__(self, module, url: str):
        self.module, self.url = module, url

    def client(self):
        c = self.module.InferenceServerClient(self.url)
        Api.made.append(c)
        return c

    @staticmethod
    def close_all():
        for c in Api.made:
            c.close()
        Api.made.clear()

    def model_config(self, client, model: str) -> dict:
        if self.module is grpcclient:
            return client.get_model_config(model, as_json=True)["config"]
        return client.get_model_config(model)

    def statistics(self, client, model: str) -> dict:
        kw = {"as_json": True} if self.module is grpcclient else {}
        return client.get_inference_statistics(model, **kw)["model_stats"][0]


def run_checks(server: Server, onnx_paths: dict[str, str], protocols: list[str], load_clients: int,
               load_requests: int) -> None:
    apis = [Api(httpclient, server.http_url) if p == "http" else Api(grpcclient, server.grpc_url) for p in protocols]
    main = apis[0]  # the protocol of the load, control and error checks
    ctl = main.client()
    clients = [(a.module, a.client()) for a in apis]
    # ONNX Runtime without graph optimizations, as tests/models does (its fused attention does not
    # compute this export's mask pattern as written)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    cnn_ref = ort.InferenceSession(onnx_paths["cnn"], opts, providers=["CPUExecutionProvider"])
    enc_ref = ort.InferenceSession(onnx_paths["encoder"], opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)

    def cnn_input(batch):
        return {"input": rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)}

    def cnn_expected(feeds):
        return {"logits": cnn_ref.run(["logits"], feeds)[0]}

    # auto-completed configurations
    for model in ("cnn", "cnn_plan"):
        cfg = main.model_config(ctl, model)
        check(cfg.get("max_batch_size") == CNN_MAX_BATCH, f"{model}: max_batch_size {cfg.get('max_batch_size')}, want {CNN_MAX_BATCH}")
        ins = {t["name"]: t for t in cfg["input"]}
        outs = {t["name"]: t for t in cfg["output"]}
        check(list(ins) == ["input"] and list(outs) == ["logits"], f"{model}: I/O {list(ins)} -> {list(outs)}")
        check(ins["input"]["data_type"] == "TYPE_FP32" and [int(d) for d in ins["input"]["dims"]] == [3, 32, 32],
              f"{model}: input config {ins['input']}")
        check([int(d) for d in outs["logits"]["dims"]] == [10], f"{model}: output config {outs['logits']}")
    step("config auto-complete (I/O and max_batch_size from the engine)")

    # single requests, every batch size, both protocols, both CNN models
    for model in ("cnn", "cnn_plan"):
        for batch in range(1, CNN_MAX_BATCH + 1):
            feeds = cnn_input(batch)
            for module, client in clients:
                expect_close(infer(module, client, model, feeds, ["logits"]), cnn_expected(feeds), f"{model} batch {batch}")
    step(f"cnn and cnn_plan, batch 1..{CNN_MAX_BATCH}, {' and '.join(protocols)}, against ONNX Runtime")

    # encoder: two outputs, several sequence lengths, both protocols
    for batch, seq in ((1, 1), (2, 7), (ENC_MAX_BATCH, 16), (3, ENC_MAX_SEQ)):
        feeds = encoder_inputs(batch, seq, seed=batch * 100 + seq)
        names = ["last_hidden_state", "pooler_output"]
        ref = dict(zip(names, enc_ref.run(names, feeds)))
        for module, client in clients:
            expect_close(infer(module, client, "encoder", feeds, names), ref, f"encoder {batch}x{seq}")
    step("encoder (int64 inputs, two outputs, dynamic sequence) against ONNX Runtime")

    # bounded concurrent load with dynamic batching
    def load(model: str, n_clients: int, n_requests: int) -> None:
        """n_clients threads send n_requests each (batch 1 or 2), every output checked; reports
        throughput and latency, and checks Triton's statistics for the model."""
        before = main.statistics(ctl, model)
        latencies, failures = [], []
        lock = threading.Lock()

        def client_loop(cid: int):
            c = main.client()
            local_rng = np.random.default_rng(1000 + cid)
            for i in range(n_requests):
                batch = 1 + (cid + i) % 2
                feeds = {"input": local_rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)}
                t0 = time.perf_counter()
                try:
                    got = infer(main.module, c, model, feeds, ["logits"])
                    dt = time.perf_counter() - t0
                    expect_close(got, cnn_expected(feeds), f"{model} load client {cid} request {i}")
                    with lock:
                        latencies.append(dt)
                except Exception as e:  # noqa: BLE001 (every failure is counted and reported)
                    with lock:
                        failures.append(f"client {cid} request {i}: {e}")

        t0 = time.perf_counter()
        threads = [threading.Thread(target=client_loop, args=(c,)) for c in range(n_clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        check(not failures, f"{model}: {len(failures)} failed requests under load, e.g. {failures[:3]}")
        total = n_clients * n_requests
        check(len(latencies) == total, f"{model}: {len(latencies)} of {total} requests answered")
        lat = np.array(latencies) * 1000
        print(f"     {model} load: {n_clients} clients x {n_requests} requests = {total} in {wall:.2f} s: "
              f"{total / wall:.1f} req/s, p50 {np.percentile(lat, 50):.2f} ms, p99 {np.percentile(lat, 99):.2f} ms, "
              "0 failures")
        # Triton counts a request when it is released, just after its response went out: wait for
        # the last ones.
        deadline = time.time() + 10
        while True:
            after = main.statistics(ctl, model)
            done = int(after["inference_stats"]["success"]["count"]) - int(before["inference_stats"]["success"]["count"])
            if done >= total or time.time() > deadline:
                break
            time.sleep(0.05)
        executions = int(after["execution_count"]) - int(before["execution_count"])
        check(done == total, f"{model}: statistics count {done} successful requests, {total} were sent")
        for phase in ("compute_input", "compute_infer", "compute_output"):  # the backend's timestamps
            ns = int(after["inference_stats"][phase]["ns"]) - int(before["inference_stats"][phase]["ns"])
            check(ns > 0, f"{model}: no {phase} time reported")
        check(executions < total, f"{model}: no dynamic batching: {executions} executions for {total} requests")
        # batches run during the load, per size (the statistics are cumulative); requests have 1 or
        # 2 rows, so a batch of more than 2 rows joined several requests
        def runs(stats):
            return {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats.get("batch_stats", [])}
        r0, r1 = runs(before), runs(after)
        sizes = {size: n - r0.get(size, 0) for size, n in sorted(r1.items()) if n > r0.get(size, 0)}
        check(any(size > 2 for size in sizes), f"{model}: no batch of more than 2 rows during the load: {sizes}")
        print(f"     {model} statistics: {total} requests in {executions} executions; batches per size: {sizes}")

    load("cnn", load_clients, load_requests)
    load("cnn_plan", 16, 10)  # two instances, per-shape contexts
    step("concurrent load with dynamic batching (cnn; cnn_plan with two instances), 0 failures, statistics reported")

    # encoder requests of different shapes at once: separate batches per sequence length
    shapes = [(1, 5), (2, 5), (1, 9), (2, 9), (1, 5), (1, 17)]
    errors = []

    def enc_request(i, batch, seq):
        try:
            feeds = encoder_inputs(batch, seq, seed=500 + i)
            names = ["last_hidden_state", "pooler_output"]
            got = infer(main.module, main.client(), "encoder", feeds, names)
            expect_close(got, dict(zip(names, enc_ref.run(names, feeds))), f"encoder {batch}x{seq} (concurrent)")
        except Exception as e:  # noqa: BLE001
            errors.append(str(e))

    threads = [threading.Thread(target=enc_request, args=(i, b, s)) for i, (b, s) in enumerate(shapes * 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, f"concurrent encoder requests of mixed shapes: {errors[:3]}")
    step("encoder requests of mixed sequence lengths at once")

    # malformed requests: clear errors, the server keeps serving
    good = cnn_input(2)
    expect_error(lambda: infer(main.module, ctl, "cnn", {"input": np.zeros((1, 3, 31, 32), np.float32)}, ["logits"]),
                 ["input"], "wrong shape")
    expect_error(lambda: infer(main.module, ctl, "cnn", {"input": np.zeros((1, 3, 32, 32), np.float64)}, ["logits"]),
                 ["FP64"], "wrong dtype")
    expect_error(lambda: infer(main.module, ctl, "cnn", {"input": good["input"], "extra": good["input"]}, ["logits"]),
                 ["extra"], "unknown input")
    expect_error(lambda: infer(main.module, ctl, "cnn", cnn_input(CNN_MAX_BATCH + 1), ["logits"]),
                 ["batch"], "batch too large")
    expect_error(lambda: infer(clients[-1][0], clients[-1][1], "cnn", good, ["nope"]), ["nope"], "unknown output")
    msg = expect_error(lambda: infer(main.module, ctl, "encoder", encoder_inputs(1, ENC_MAX_SEQ + 8, seed=1),
                                     ["pooler_output"]),
                       ["input_ids", "dim 1 is 40", f"[1, {ENC_MAX_SEQ}]"], "sequence beyond the profile")
    print(f"     e.g. {msg}")
    check(ctl.is_server_live() and ctl.is_model_ready("cnn"), "the server is not live after bad requests")
    expect_close(infer(main.module, ctl, "cnn", good, ["logits"]), cnn_expected(good), "a good request after bad ones")
    step("malformed requests answered with clear errors; the server serves on")

    # a config that does not match the engine is refused at load, with the reason
    expect_error(lambda: ctl.load_model("bad_config"), ["image", "not an engine input"], "mismatched config")
    expect_error(lambda: ctl.load_model("bad_parameter"), ["precision", "int4", "fp32, fp16 or bf16"], "bad parameter")
    check(ctl.is_server_live(), "the server died on a bad model")
    step("mismatched config and bad parameter refused at load with clear messages")

    # unload / load
    ctl.unload_model("encoder")
    deadline = time.time() + 30
    while ctl.is_model_ready("encoder") and time.time() < deadline:
        time.sleep(0.1)
    check(not ctl.is_model_ready("encoder"), "encoder still ready after unload")
    expect_error(lambda: infer(main.module, ctl, "encoder", encoder_inputs(1, 4, seed=2), ["pooler_output"]),
                 ["encoder"], "request to an unloaded model")
    ctl.load_model("encoder")
    feeds = encoder_inputs(2, 6, seed=3)
    expect_close(infer(main.module, ctl, "encoder", feeds, ["pooler_output"]),
                 {"pooler_output": enc_ref.run(["pooler_output"], feeds)[0]}, "encoder after reload")
    step("unload, request refused, load again, correct outputs")

    # reload while a client keeps sending: every request answered correctly
    stop = threading.Event()
    reload_failures, sent = [], [0]

    def keep_sending():
        c = main.client()
        while not stop.is_set():
            f = cnn_input(1)
            try:
                expect_close(infer(main.module, c, "cnn", f, ["logits"]), cnn_expected(f), "during reload")
                sent[0] += 1
            except Exception as e:  # noqa: BLE001
                reload_failures.append(str(e))

    sender = threading.Thread(target=keep_sending)
    sender.start()
    time.sleep(0.3)
    ctl.load_model("cnn")  # a reload of a loaded model: Triton swaps once the new one is ready
    time.sleep(0.3)
    stop.set()
    sender.join()
    check(not reload_failures, f"requests failed during the reload: {reload_failures[:3]}")
    check(sent[0] > 0, "no request ran during the reload")
    step(f"reload under load ({sent[0]} requests during it, 0 failures)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend-dir", required=True, help="folder holding kiln/libtriton_kiln.so")
    parser.add_argument("--kiln", required=True, help="the kiln CLI (saves the plan model)")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=200, help="requests per client in the load step")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--protocols", default="http,grpc", help="comma list of http, grpc (the first drives the load)")
    parser.add_argument("--tritonserver", default="", help="the tritonserver binary (default: nvidia-pytriton's)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (repository, server log)")
    args = parser.parse_args()
    global DEVICE, KIND, RTOL, ATOL, httpclient
    protocols = [p for p in args.protocols.split(",") if p]
    check(protocols and all(p in ("http", "grpc") for p in protocols), f"--protocols {args.protocols}: http and/or grpc")
    if "http" in protocols:
        try:
            import tritonclient.http as httpclient
        except ImportError as e:
            print(f"FAIL: tritonclient.http cannot be imported ({e}); run scripts/install_deps.sh", file=sys.stderr)
            return 1
    if args.device == "gpu":
        if not gpu_present():
            print("SKIPPED: no GPU on this machine (the KIND_GPU run needs one)")
            return 77
        DEVICE, KIND = "gpu", "KIND_GPU"
        RTOL = ATOL = 1e-3  # FP32 without TF32 on the GPU, as kiln's other GPU tests
    lib = os.path.join(args.backend_dir, "kiln", "libtriton_kiln.so")
    check(os.path.isfile(lib), f"{lib} does not exist (build the triton_kiln target)")
    binary = args.tritonserver or find_tritonserver()
    tmp = tempfile.mkdtemp(prefix="kiln_triton_")
    repo = os.path.join(tmp, "models")
    t0 = time.time()
    paths = make_repository(repo, args.kiln)
    server = Server(binary, repo, os.path.abspath(args.backend_dir), os.path.join(tmp, "server.log"))
    status = 0
    try:
        server.wait_ready(timeout_s=240)
        step(f"tritonserver ready with cnn, cnn_plan, encoder loaded ({time.time() - t0:.1f} s)")
        run_checks(server, paths, protocols, args.clients, args.requests)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL: {e}\n--- server log (tail) ---\n{server.tail()}", file=sys.stderr)
        status = 1
    finally:
        Api.close_all()
        rc = server.stop()
    if status == 0:
        if rc != 0:
            print(f"FAIL: tritonserver exited with {rc}\n{server.tail()}", file=sys.stderr)
            status = 1
        else:
            step("server stopped cleanly")
    print(f"{len(PASSED)} passed, {status} failed ({time.time() - t0:.1f} s; log {server.log_path})")
    if not args.keep and status == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
