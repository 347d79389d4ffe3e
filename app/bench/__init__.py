"""Load and fault benchmarks and the scripted provider they run against."""
