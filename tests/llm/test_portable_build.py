"""The installed llama.cpp library runs on every CPU of this machine kind.

A native build (llama.cpp's default ``GGML_NATIVE=ON``) on a CPU with AMX or AVX-512
puts those instructions in ``libggml-cpu.so``; on a CPU without them the server dies
with SIGILL on its first completion. ``scripts/llama_wheel.sh`` builds for the
x86-64-v3 baseline instead. This reads the machine code of every library in the
installed ``llama_cpp`` package with ``objdump`` and fails on any AVX-512 (``zmm``
registers, ``k`` mask registers) or AMX (``tmm`` tile registers, tile instructions)
instruction, so a native build is caught on any CPU, not only on the one it breaks.
"""

from __future__ import annotations

import importlib.util
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

# AVX-512 uses zmm registers or opmask registers (k0..k7, AT&T syntax: %k1, {%k1});
# EVEX-only ymm/xmm16..31 too. AMX uses tmm registers and tile* / tdp* instructions.
FORBIDDEN = re.compile(
    r"%zmm\d+|%k[0-7]\b|%[xy]mm(1[6-9]|2\d|3[01])\b|%tmm\d|\btile(loadd|stored|zero|release|cfg)|\btdpb[a-z0-9]*"
)


def llama_libraries() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    assert spec is not None and spec.submodule_search_locations, "llama-cpp-python is not installed (make install)"
    root = Path(next(iter(spec.submodule_search_locations)))
    return sorted(p for p in root.rglob("*.so*") if p.is_file())


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the instruction check is for x86-64")
def test_llama_cpp_libraries_use_no_avx512_or_amx_instructions():
    objdump = shutil.which("objdump")
    assert objdump, "objdump (binutils) is needed; it comes with the C toolchain that builds llama.cpp"
    libraries = llama_libraries()
    names = {p.name.split(".so")[0] for p in libraries}
    assert {"libllama", "libggml-cpu"} <= names, names
    offenders = {}
    for library in libraries:  # objdump is found: avx512_hits runs it by name
        if hits := avx512_hits(library):
            offenders[library.name] = hits
    assert not offenders, f"instructions beyond the portable baseline: {offenders}"


def avx512_hits(library: Path) -> int:
    listing = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True, text=True, check=True
    ).stdout
    return sum(1 for line in listing.splitlines() if FORBIDDEN.search(line))


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the instruction check is for x86-64")
def test_the_check_finds_avx512_in_real_machine_code():
    """A positive control: numpy's SIMD test module ships AVX-512 dispatch targets."""
    import numpy

    simd = sorted(Path(numpy.__file__).parent.glob("_core/_simd*.so"))
    assert simd, "numpy's _simd extension is missing"
    assert avx512_hits(simd[0]) > 100


def test_the_forbidden_pattern_catches_avx512_and_amx_and_spares_avx2():
    assert FORBIDDEN.search("vfmadd231ps %zmm1,%zmm2,%zmm3")
    assert FORBIDDEN.search("vmovups (%rax),%ymm0{%k1}")
    assert FORBIDDEN.search("vpaddd %ymm17,%ymm2,%ymm3")
    assert FORBIDDEN.search("tileloadd (%rsi,%rdx,1),%tmm0")
    assert FORBIDDEN.search("tdpbssd %tmm2,%tmm1,%tmm0")
    assert not FORBIDDEN.search("vfmadd231ps %ymm1,%ymm2,%ymm3")
    assert not FORBIDDEN.search("vpaddd %ymm15,%ymm2,%ymm3")
    assert FORBIDDEN.search("kmovw %eax,%k1")
