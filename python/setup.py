"""Builds tessera_torch._C, the torch.distributed backend over libtessera.

It compiles against the torch that is installed (not one pip would download into an isolated
build environment: the extension must match the torch it is imported with) and links the
libtessera that the first of these holds:
  TESSERA_BUILD_DIR      a CMake build folder of tessera (libtessera.so in <dir>/src)
  CMAKE_PREFIX_PATH      install prefixes (<prefix>/include/tessera, <prefix>/lib*/libtessera.so)
  ../build               the build folder of this checkout (scripts/test.sh makes it)
  /usr/local, /usr       installed copies
The extension records libtessera's folder as its run path, so importing it needs no
LD_LIBRARY_PATH. CUDA tensors are supported when torch has CUDA and the CUDA toolkit is found
(TESSERA_TORCH_CUDA=0 builds without).
"""

import os
import pathlib
import subprocess
import sys

from setuptools import setup

HERE = pathlib.Path(__file__).resolve().parent


def _installed_torch():
    """Makes the installed torch importable here.

    pip builds a project in an isolated environment that holds only the build requirements
    (setuptools). The torch to build against is the one of the interpreter that runs pip: ask that
    interpreter, without pip's isolation, where it is, and look there after the build packages.
    """
    try:
        import torch  # noqa: F401

        return
    except ImportError:
        pass
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONSAFEPATH")
    }
    probe = subprocess.run(
        [sys.executable, "-c", "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))"],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        sys.exit(
            "tessera-torch builds against the torch of this Python, and there is none: "
            f"install torch first ({sys.executable} -m pip install torch)"
        )
    sys.path.append(probe.stdout.strip())


def _source_dir_of(build_dir):
    cache = build_dir / "CMakeCache.txt"
    if cache.is_file():
        for line in cache.read_text(errors="replace").splitlines():
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                return pathlib.Path(line.split("=", 1)[1])
    return None


def _from_build_dir(build_dir):
    """(include dirs, library dir) of a CMake build folder, or None."""
    build_dir = pathlib.Path(build_dir).resolve()
    lib = build_dir / "src" / "libtessera.so"
    version = build_dir / "include" / "tessera" / "version.h"
    source = _source_dir_of(build_dir)
    if not (lib.exists() and version.is_file() and source is not None):
        return None
    if not (source / "include" / "tessera" / "tessera.h").is_file():
        return None
    return [str(source / "include"), str(build_dir / "include")], str(lib.parent)


def _from_prefix(prefix):
    prefix = pathlib.Path(prefix)
    include = prefix / "include"
    if not (include / "tessera" / "tessera.h").is_file():
        return None
    for libdir in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"):
        if (prefix / libdir / "libtessera.so").exists():
            return [str(include)], str(prefix / libdir)
    return None


def find_tessera():
    tried = []
    if os.environ.get("TESSERA_BUILD_DIR"):
        d = os.environ["TESSERA_BUILD_DIR"]
        found = _from_build_dir(d)
        if found is None:
            sys.exit(
                f"TESSERA_BUILD_DIR={d} is not a built tessera build folder "
                "(no src/libtessera.so, include/tessera/version.h and CMakeCache.txt there)"
            )
        return found
    for prefix in filter(None, os.environ.get("CMAKE_PREFIX_PATH", "").replace(";", ":").split(":")):
        tried.append(prefix)
        found = _from_prefix(prefix)
        if found:
            return found
    checkout = HERE.parent / "build"
    tried.append(str(checkout))
    found = _from_build_dir(checkout)
    if found:
        return found
    for prefix in ("/usr/local", "/usr"):
        tried.append(prefix)
        found = _from_prefix(prefix)
        if found:
            return found
    sys.exit(
        "tessera-torch needs libtessera: build tessera first (scripts/test.sh, or cmake -B build "
        "&& cmake --build build), or point TESSERA_BUILD_DIR at a build folder or "
        "CMAKE_PREFIX_PATH at an install prefix. Looked in: " + ", ".join(tried)
    )


def extension():
    _installed_torch()
    import torch
    from torch.utils import cpp_extension

    includes, libdir = find_tessera()
    with_cuda = (
        torch.version.cuda is not None
        and cpp_extension.CUDA_HOME is not None
        and os.environ.get("TESSERA_TORCH_CUDA", "1") != "0"
    )
    sources = sorted(str(p.relative_to(HERE)) for p in (HERE / "csrc").glob("*.cpp"))
    maker = cpp_extension.CUDAExtension if with_cuda else cpp_extension.CppExtension
    print(
        f"tessera-torch: torch {torch.__version__}, libtessera in {libdir}, "
        f"CUDA tensors {'on' if with_cuda else 'off'}",
        file=sys.stderr,
    )
    ext = maker(
        name="tessera_torch._C",
        sources=sources,
        include_dirs=includes,
        library_dirs=[libdir],
        libraries=["tessera"],
        define_macros=[("TESSERA_TORCH_CUDA", "1" if with_cuda else "0")],
        extra_compile_args={"cxx": ["-O2"], "nvcc": []} if with_cuda else ["-O2"],
        extra_link_args=[f"-Wl,-rpath,{libdir}"],
    )
    return ext, cpp_extension.BuildExtension


ext, build_ext = extension()
setup(ext_modules=[ext], cmdclass={"build_ext": build_ext.with_options(use_ninja=True)})
