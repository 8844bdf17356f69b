"""Small workload targets that `resolve` is pointed at in the tests, good ones and broken ones."""
