"""Steering methods that improve a frozen generative policy without retraining it.

DSRL (``dsrl.py``), EXPO and RLPD (``expo.py``) learn online; V-GPS (``vgps.py``) re-ranks with an offline
critic. Their runs load through ``policies.loading.load``, like every run.
"""

STEERING_KINDS = ("dsrl", "expo")

__all__ = ["STEERING_KINDS"]
