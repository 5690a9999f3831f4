"""Ctrl-C in a Lightning fit raised again as a KeyboardInterrupt; SIGTERM as `TerminatedError`.

Lightning (2.6, `pytorch_lightning/trainer/call.py`) catches a KeyboardInterrupt raised in
`Trainer.fit`: it runs the callbacks' `on_exception`, tears the trainer down, ignores SIGINT
from then on and calls `sys.exit(1)`, its notice logged at INFO only. The CLI would then exit 1
without a word; raised again, the interrupt exits 130 with `interrupted` (`app.cli`), as one
anywhere else does. On SIGTERM Lightning stops the loop with its `SIGTERMException`, a
`SystemExit` of code 0: the command would end as if it had succeeded, with nothing published,
and `make up` or compose's api would go on to serve no model. It leaves the fit as
`TerminatedError`, a failure (exit 1).
"""

from __future__ import annotations

import signal
from typing import Any

import pytorch_lightning as pl_lightning
from pytorch_lightning.utilities.exceptions import SIGTERMException


class TerminatedError(Exception):
    """SIGTERM stopped a fit before it finished."""


def interruptible_fit(trainer: pl_lightning.Trainer, *args: Any, **kwargs: Any) -> None:
    """`trainer.fit(*args, **kwargs)`, an interrupt leaving it as a KeyboardInterrupt.

    Raises:
        KeyboardInterrupt: the fit was interrupted (SIGINT's handler is restored first).
        TerminatedError: SIGTERM stopped the fit.

    """
    handler = signal.getsignal(signal.SIGINT)
    try:
        trainer.fit(*args, **kwargs)
    except SIGTERMException:
        raise TerminatedError(
            "SIGTERM stopped the training before it finished; nothing was published"
        ) from None
    except SystemExit as err:
        interrupt = err.__context__  # Lightning exits inside its `except KeyboardInterrupt`
        if not isinstance(interrupt, KeyboardInterrupt):
            raise
        if handler is not None:  # None: a handler not set from Python, which cannot be restored
            signal.signal(signal.SIGINT, handler)
        raise interrupt from None
