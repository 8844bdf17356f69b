"""Tests of autotune.trial: one trial in a fresh process, its records, its measurement and its gate."""
