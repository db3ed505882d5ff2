"""lm-eval tasks as task partitions: lm-eval builds requests and scores; our engines answer."""
