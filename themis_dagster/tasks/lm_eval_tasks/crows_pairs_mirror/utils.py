"""The two functions of lm-eval's tasks/crows_pairs/utils.py that crows_pairs_english uses."""

from lm_eval.tasks.crows_pairs.utils import doc_to_choice, process_results

__all__ = ["doc_to_choice", "process_results"]
