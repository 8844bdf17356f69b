"""Tests of autotune.study: search, storage, report, retune and doctor, driven by Optuna."""
