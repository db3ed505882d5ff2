"""Task kinds the benchmark families share: a family declares ``TASK`` as one of them instead of writing every hook.

``choices.py`` is the multiple-choice kind (the likeliest option by log-likelihood, ``LikeliestChoice``) and
``lettered.py`` its chat variant (the options as letters, the reply read and checked for a refusal). A kind is
built on the task contract (``tasks/``) and the shared services (``refusals``), below the families that use it.
"""
