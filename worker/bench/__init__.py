"""`ribbon bench e2e`, `steady`, `engine`: the product's own benchmarks (the scripts under bench/ use them too)."""
