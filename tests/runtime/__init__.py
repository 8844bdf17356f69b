"""Tests of autotune.runtime: what a training or serving process imports."""
