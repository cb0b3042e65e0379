"""Steering methods that improve a frozen generative policy without retraining it."""
