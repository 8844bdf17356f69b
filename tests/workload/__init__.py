"""Tests of autotune.workload: the Workload contract, target resolution, bare models and Lightning modules."""
