"""`python -m kiln ...` and the `kiln` console script: runs the CLI installed inside the package."""
import os
import sys

from . import cli_path


def main() -> None:
    exe = cli_path()
    if not os.path.exists(exe):
        sys.exit(f"kiln: the command-line program is not installed at {exe} (this kiln was not installed with pip)")
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
