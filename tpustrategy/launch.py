"""``python -m tpustrategy.launch -n N [--devices-per-process K] [--timeout S] script.py [args]``.

Runs a job of N local processes on 127.0.0.1; see ``tpustrategy._src.cluster.launch``.
"""

import sys

from tpustrategy._src.cluster.launch import Job as Job
from tpustrategy._src.cluster.launch import main as main

if __name__ == "__main__":
    sys.exit(main())
