"""The static gate: what it rejects, what it lets through, and which error kind it names."""

import pytest

from drkernel.verify.gate import check_source

KERNEL = """
import torch
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
"""


def test_honest_source_passes_and_names_its_kernels():
    result = check_source(KERNEL)
    assert result.passed and result.kind is None
    assert result.triton_kernels == ["k"]


def test_aliased_jit_decorators_are_recognised():
    src = KERNEL.replace("import triton\n", "import triton as tr\nfrom triton import jit\n").replace("@triton.jit", "@jit")
    assert check_source(src).triton_kernels == ["k"]
    src2 = KERNEL.replace("@triton.jit", "@triton.jit(do_not_specialize=['n'])")
    assert check_source(src2).passed


def test_syntax_error_is_classified():
    result = check_source("def broken(:\n  pass")
    assert not result.passed and result.kind == "syntax" and "line 1" in result.message


def test_no_triton_kernel_rejected_only_when_required():
    src = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"
    assert check_source(src).kind == "no_triton"
    assert check_source(src, require_triton=False).passed


@pytest.mark.parametrize(
    "snippet, needle",
    [
        ("import subprocess", "subprocess"),
        ("import socket", "socket"),
        ("from ctypes import CDLL", "ctypes"),
        ("import threading", "threading"),
        ("from multiprocessing import Pool", "multiprocessing"),
        ("import os\nos.system('true')", "os.system"),
        ("from os import fork", "os.fork"),
        ("import drkernel.verify.engine", "drkernel"),
        ("import gc", "gc"),
        ("import sys\nf = sys._getframe(1)", "sys._getframe"),
        ("x = __import__('socket')", "__import__"),
        ("eval('1')", "eval"),
        ("exec('x = 1')", "exec"),
        ("open('/tmp/x', 'w')", "open() for writing"),
        ("s = torch.cuda.Stream()", "stream API"),
        ("with torch.cuda.stream(None):\n    pass", "stream API"),
        ("s = torch.npu.Stream()", "stream API"),
        ("torch.allclose = lambda *a, **k: True", "monkey-patching"),
        ("torch.Tensor.clone = lambda self: self", "monkey-patching"),
        ("import torch as T\nT.cuda.synchronize = None", "monkey-patching"),
        ("setattr(torch, 'allclose', None)", "monkey-patching"),
        ("import time\ntime.perf_counter = lambda: 0.0", "monkey-patching"),
        ("class Fake(torch.Tensor):\n    pass", "subclasses torch.Tensor"),
    ],
)
def test_forbidden_constructs(snippet, needle):
    result = check_source(KERNEL + "\n" + snippet + "\n")
    assert not result.passed and result.kind == "forbidden"
    assert needle in result.message


def test_reading_files_and_ordinary_attribute_writes_are_allowed():
    src = KERNEL + "\nwith open('notes.txt') as f:\n    pass\nclass Holder:\n    pass\nh = Holder()\nh.value = 3\n"
    assert check_source(src).passed
