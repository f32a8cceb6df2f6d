"""Where something ran, in one line: every record, model card and run history names its machine."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """CPU, cores, load, torch threads, GPU and torch version, on one line."""
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return (
        f"{cpu_name()} ({os.cpu_count()} cores{load}), {torch.get_num_threads()} torch threads, {gpu}, "
        f"torch {torch.__version__}"
    )
