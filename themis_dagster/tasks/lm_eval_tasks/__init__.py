"""lm-eval's own tasks as partitions: task files run by the lm-eval bridge, and local lm-eval task folders."""
