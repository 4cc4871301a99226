#!/usr/bin/env python3
"""Serving overhead of the kiln Triton backend: one plan's throughput through tritonserver against
the kiln CLI's on the same plan, in one run.

The plan is served with max_batch_size 0 (its own shapes, e.g. a static batch of 32: the throughput
batch), by 1 and 2 instances (--instances). Clients send requests whose tensors live in system
shared memory (registered once, so the sockets carry no tensor bytes): the backend then copies
inputs to the device and outputs back, as the CLI does when it times with data transfers (its
default), so the two numbers compare the same work. Each client keeps one request in flight; the
throughput is completed requests per second over --seconds, after a warm-up. Writes a markdown table.

Usage (GPU machine; KIND_GPU on GPU 0, plan built there):
  kiln --onnx=resnet50.onnx --fp16 --saveEngine=/tmp/r50_b32.plan --skipInference
  python3 bench/triton_bench.py --kiln $K/bin/kiln --backend-dir $K/triton_backends \\
      --tritonserver /tmp/tritonserver/pytriton/tritonserver/bin/tritonserver \\
      --plan /tmp/r50_b32.plan --name resnet50_b32 --device gpu --out /tmp/triton_bench.md
(--device cpu runs KIND_CPU, as tested on the development machine.)
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "triton"))
from test_triton_server import find_tritonserver, free_ports  # noqa: E402

NP_TYPES = {"TYPE_FP32": np.float32, "TYPE_FP16": np.float16, "TYPE_INT64": np.int64, "TYPE_INT32": np.int32,
            "TYPE_INT8": np.int8, "TYPE_UINT8": np.uint8, "TYPE_BOOL": np.bool_, "TYPE_FP64": np.float64}


def cli_throughput(args, inputs: list, work: str) -> float:
    loads = []
    for name, dtype, dims in inputs:
        path = os.path.join(work, f"in{len(loads)}.npy")
        np.save(path, input_data(dtype, dims))
        loads.append(f"{name}:{path}")
    cmd = [args.kiln, f"--loadEngine={args.plan}", f"--backend={args.device}", f"--duration={args.seconds}",
           "--warmUp=500", f"--loadInputs={','.join(loads)}"]
    if args.device == "gpu":
        cmd.append("--useCudaGraph")
    p = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"Throughput: ([0-9.]+) qps", p.stdout)
    if p.returncode != 0 or not m:
        raise SystemExit(f"kiln CLI failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return float(m.group(1))


def start_server(args, repo: str, log_path: str):
    http, grpc_port, metrics = free_ports(3)
    log = open(log_path, "w")
    proc = subprocess.Popen([args.tritonserver, f"--model-repository={repo}", f"--backend-directory={args.backend_dir}",
                             "--http-address=127.0.0.1", f"--http-port={http}", "--grpc-address=127.0.0.1",
                             f"--grpc-port={grpc_port}", "--allow-metrics=false", f"--metrics-port={metrics}"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"127.0.0.1:{grpc_port}"
    client = grpcclient.InferenceServerClient(url)
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"tritonserver exited with {proc.returncode}; see {log_path}")
        try:
            if client.is_server_ready():
                break
        except Exception:  # not listening yet
            pass
        time.sleep(0.2)
    else:
        raise SystemExit(f"tritonserver not ready after 300 s; see {log_path}")
    return proc, log, url, client


def input_data(dtype: str, dims: list[int]) -> np.ndarray:
    """The same inputs for the CLI and the clients: N(0,1) floats, zeros for integers and bools
    (token ids and masks any embedding accepts)."""
    t = NP_TYPES[dtype]
    if np.issubdtype(t, np.floating):
        return np.random.default_rng(0).standard_normal(dims).astype(t)
    return np.zeros(dims, t)


def serve_throughput(args, instances: int, work: str) -> tuple[float, float, float, list]:
    """Requests/s, p50 and p99 ms through tritonserver; also the model's inputs (name, type, dims)."""
    repo = os.path.join(work, f"repo_{instances}")
    os.makedirs(os.path.join(repo, "m", "1"))
    shutil.copy(args.plan, os.path.join(repo, "m", "1", "model.plan"))
    kind = "KIND_GPU" if args.device == "gpu" else "KIND_CPU"
    with open(os.path.join(repo, "m", "config.pbtxt"), "w") as f:
        f.write(f'backend: "kiln"\nmax_batch_size: 0\ninstance_group [ {{ kind: {kind}, count: {instances} }} ]\n'
                f'parameters {{ key: "cuda_graphs" value {{ string_value: "{str(args.device == "gpu").lower()}" }} }}\n')
    proc, log, url, ctl = start_server(args, repo, os.path.join(work, f"server_{instances}.log"))
    regions, errors, lat = [], [], []
    lock = threading.Lock()
    warmed = threading.Barrier(args.clients + 1)
    measuring, stop = threading.Event(), threading.Event()
    try:
        cfg = ctl.get_model_config("m", as_json=True)["config"]
        inputs = [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in cfg["input"]]
        outputs = [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in cfg["output"]]
        if any(d < 0 for _, _, dims in inputs + outputs for d in dims):
            raise SystemExit("the plan has dynamic dims: build it with static shapes (the batch to measure)")

        def shared(c, region: str, nbytes: int):
            h = shm.create_shared_memory_region(region, "/" + region, nbytes)
            with lock:
                regions.append((c, region, h))
            c.register_system_shared_memory(region, "/" + region, nbytes)
            return h

        def run_client(cid: int):
            c = grpcclient.InferenceServerClient(url)
            reqs, outs = [], []
            for k, (name, dtype, dims) in enumerate(inputs):
                data = input_data(dtype, dims)
                region = f"kiln_bench_{os.getpid()}_{instances}_{cid}_in{k}"
                shm.set_shared_memory_region(shared(c, region, data.nbytes), [data])
                inp = grpcclient.InferInput(name, dims, dtype[len("TYPE_"):])
                inp.set_shared_memory(region, data.nbytes)
                reqs.append(inp)
            for k, (name, dtype, dims) in enumerate(outputs):
                nbytes = int(np.prod(dims)) * np.dtype(NP_TYPES[dtype]).itemsize
                region = f"kiln_bench_{os.getpid()}_{instances}_{cid}_out{k}"
                shared(c, region, nbytes)
                out = grpcclient.InferRequestedOutput(name)
                out.set_shared_memory(region, nbytes)
                outs.append(out)
            for _ in range(args.warmup):
                c.infer("m", reqs, outputs=outs)
            warmed.wait()
            while not stop.is_set():
                t0 = time.perf_counter()
                c.infer("m", reqs, outputs=outs)
                dt = time.perf_counter() - t0
                if measuring.is_set():
                    with lock:
                        lat.append(dt)

        def client_loop(cid: int):
            try:
                run_client(cid)
            except Exception as e:  # noqa: BLE001 (reported after the run)
                errors.append(f"client {cid}: {e}")
                warmed.abort()

        threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        try:
            warmed.wait()  # every client warmed up: the measurement starts with all of them sending
        except threading.BrokenBarrierError:
            pass
        measuring.set()
        t0 = time.perf_counter()
        time.sleep(args.seconds if not errors else 0)
        measuring.clear()
        wall = time.perf_counter() - t0
        stop.set()
        for t in threads:
            t.join()
        if errors or not lat:
            raise SystemExit(f"{len(errors)} clients failed, {len(lat)} requests timed: {errors[:3]}")
        ms = np.array(lat) * 1000
        return len(lat) / wall, float(np.percentile(ms, 50)), float(np.percentile(ms, 99)), inputs
    finally:
        for c, region, h in regions:
            try:
                c.unregister_system_shared_memory(region)
            except Exception:  # noqa: BLE001 (the server may be gone: the region is removed below anyway)
                pass
            shm.destroy_shared_memory_region(h)
        for c in {id(c): c for c, _, _ in regions}.values():
            c.close()
        ctl.close()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--backend-dir", required=True)
    parser.add_argument("--tritonserver", default="")
    parser.add_argument("--plan", required=True, help="a plan with static shapes (the batch to measure)")
    parser.add_argument("--name", default="", help="the model's name in the table")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="gpu")
    parser.add_argument("--instances", default="1,2")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients, one request in flight each")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=int, default=5, help="requests per client before the timing")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    args.tritonserver = args.tritonserver or find_tritonserver()
    args.backend_dir = os.path.abspath(args.backend_dir)
    name = args.name or os.path.splitext(os.path.basename(args.plan))[0]
    work = tempfile.mkdtemp(prefix="kiln_triton_bench_")
    served = []
    for n in [int(x) for x in args.instances.split(",") if x]:
        qps, p50, p99, inputs = serve_throughput(args, n, work)
        served.append((n, qps, p50, p99))
        print(f"Triton, {n} instance(s): {qps:.1f} requests/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms", flush=True)
    cli = cli_throughput(args, inputs, work)
    rows = [f"| {name} | kiln CLI ({'CUDA graph, with transfers' if args.device == 'gpu' else 'with transfers'}) | - | "
            f"{cli:.1f} | - | - | - |"]
    for n, qps, p50, p99 in served:
        rows.append(f"| {name} | Triton, {n} instance{'s' if n > 1 else ''}, {args.clients} clients | {n} | {qps:.1f} | "
                    f"{100 * (1 - qps / cli):+.1f}% | {p50:.2f} | {p99:.2f} |")
    table = "\n".join([f"Triton serving overhead ({args.device}, {datetime.date.today()}, plan {args.plan}; requests per "
                       f"second, each one batch of the plan's shape; overhead = 1 - Triton / CLI)", "",
                       "| model | run | instances | requests/s | overhead | p50 ms | p99 ms |", "|---|---|---:|---:|---:|---:|---:|",
                       *rows, ""])
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
