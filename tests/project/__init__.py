"""Tests of the repository as a whole: documentation, references, layers, examples and the GPU check."""
