"""Tests of autotune.cli: what a person sees and the exit codes."""
