"""litellm, imported on the first model call with its switches that keep it off the network.

Importing litellm takes seconds of a core and, unless told to use its bundled price list, fetches
one; so pragma imports it only when a model is called (:func:`imported_litellm`), or ahead of time
where that is part of starting (:func:`preload`). A process that imports litellm itself sets the
switches first with :func:`set_offline_switches`.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from ..errors import PragmaError

__all__ = ["imported_litellm", "preload", "set_offline_switches"]

_OFFLINE_ENVIRONMENT = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # else import downloads the price list
    "LITELLM_OFFLINE_MODE": "true",  # the same switch in newer litellm releases
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",  # else the first anthropic call downloads them
}


def set_offline_switches() -> None:
    """Set litellm's switches that keep its import and its token counting off the network, unless
    the environment already chose (a process that imports litellm later inherits them)."""
    for variable, value in _OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(variable, value)


def preload() -> None:
    """Import litellm now, as the provider does (seconds of a core), rather than at the first
    model call: a bench task does it while it starts (:func:`~pragma_core.machine.timing_slot.start_turn`)."""
    imported_litellm()


@functools.cache
def imported_litellm() -> Any:
    """The litellm module, imported once with the offline switches set and its console chatter off."""
    set_offline_switches()
    try:
        import litellm
    except ImportError:
        raise PragmaError("the litellm provider needs the litellm package: pip install litellm") from None
    litellm.suppress_debug_info = True  # else bad requests print a banner to stdout
    if litellm.disable_hf_tokenizer_download is None:
        litellm.disable_hf_tokenizer_download = True  # counting tokens must not download tokenizers
    return litellm
