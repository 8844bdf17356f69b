"""Tests of autotune.integrations: a tuned configuration in the Hugging Face Trainer and in Lightning."""
