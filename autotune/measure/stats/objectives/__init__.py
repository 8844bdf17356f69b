"""The objectives a study may optimise, one module each (see `autotune.measure.stats.Objective`)."""
