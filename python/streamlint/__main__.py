"""`python -m streamlint ARGS`: the same as `streamlint ARGS`."""

import os
import subprocess
import sys

from streamlint import find_streamlint_bin


def main():
    binary = find_streamlint_bin()
    if os.name == "nt":
        sys.exit(subprocess.call([binary, *sys.argv[1:]]))
    os.execvp(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
