"""Measurement: turning a call into timed samples on this machine.

``call`` (one ``infer_bench(...)`` call, prepared), ``mode`` (the ``Mode`` protocol a
session measures it with, and its stash key), ``timing`` (first call, warmup, block
calibration, adaptive sampling),
``profile`` (the profiled pass after timing: FLOPs, operators, kernels, device time),
``backends/`` (torch, ONNX Runtime, generation, plain callables), ``memory`` (host peak
RSS), ``drift`` (the reference workload), ``gpu`` (NVML state), ``tenancy`` (what spoils a
GPU's timing: throttles, other jobs), ``gpupin`` (an xdist worker per GPU) and
``environment`` (the
fingerprint a measurement ran on). Imports the core and the statistics only; the A/B
worker runs this layer in its own process.
"""
