"""The `streamlint` command, installed from a wheel: `find_streamlint_bin()` says where the
binary is, and `python -m streamlint` runs it."""

import os
import sys
import sysconfig


def find_streamlint_bin():
    """The path of the `streamlint` binary this package installed."""
    name = "streamlint" + (sysconfig.get_config_var("EXE") or "")
    schemes = [sysconfig.get_default_scheme()]
    if sys.version_info >= (3, 10):
        schemes.append(sysconfig.get_preferred_scheme("user"))
    elif os.name == "nt":
        schemes.append("nt_user")
    else:
        schemes.append("posix_user")
    for scheme in schemes:
        candidate = os.path.join(sysconfig.get_path("scripts", scheme=scheme), name)
        if os.path.isfile(candidate):
            return candidate
    # Installed with `pip install --target DIR`: the binary sits in DIR/bin.
    beside = os.path.join(os.path.dirname(os.path.dirname(__file__)), "bin", name)
    if os.path.isfile(beside):
        return beside
    raise FileNotFoundError(f"the {name} binary is not installed next to this package")
