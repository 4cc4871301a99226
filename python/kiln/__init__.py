"""kiln: an inference optimizer and runtime (ONNX -> optimized engine -> run).

The API is the C++ extension kiln._kiln; this package re-exports it and, when kiln was installed
with `pip install`, locates the files installed next to it (the `kiln` CLI, libkiln, headers and
the CMake/pkg-config files for building C++ programs and plugins against it).
"""
import os as _os

from ._kiln import *  # noqa: F401,F403
from ._kiln import __version__  # noqa: F401

_HERE = _os.path.dirname(_os.path.abspath(__file__))


def cmake_prefix_path() -> str:
    """The prefix to give CMake (-DCMAKE_PREFIX_PATH=...) so that find_package(kiln) finds this kiln."""
    return _HERE


def cli_path() -> str:
    """The path of the `kiln` command-line program installed with this package."""
    return _os.path.join(_HERE, "bin", "kiln")
