"""Tests of autotune.measure: the measurement engine, its statistics, its choice and its recipes."""
