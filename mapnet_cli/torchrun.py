"""torchrun as `mapnet pretrain --gpus/--nproc` starts it: `python -m mapnet_cli.torchrun ARGS` is
`python -m torch.distributed.run ARGS`, except that a stop signal ends it with the shell's status for that
signal (128 + its number) instead of a Python traceback.

torchrun passes SIGTERM (and SIGUSR1, when `TORCHELASTIC_SIGNALS_TO_HANDLE` names it, as `distributed.launch`
does) to its workers, which checkpoint the step they are in and stop (`train/stop_signals.py`); then it re-raises
the signal as an exception, whose traceback would bury the workers' one line.
"""

import sys

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.run import main

if __name__ == "__main__":
    try:
        main()
    except SignalException as exc:
        sys.exit(128 + int(exc.sigval))
