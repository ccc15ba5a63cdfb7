"""``python -m tpustrategy.demo``: the main job (see ``tpustrategy._src.demo``)."""

from __future__ import annotations

import os
import sys

# Fake CPU devices only matter when there is no accelerator. The flag must be set
# before JAX starts; importing this module already imported the package (and JAX),
# so when the flag is missing the job re-executes itself once with it set.
_FLAG = "--xla_force_host_platform_device_count=8"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if _FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()
        os.execv(sys.executable, [sys.executable, "-m", "tpustrategy.demo", *argv])
    from tpustrategy._src.demo.main import main as _main

    return _main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
