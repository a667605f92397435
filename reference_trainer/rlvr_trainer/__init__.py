"""A minimal vLLM-backed GRPO trainer that runs the two-clock experiments on its own."""
