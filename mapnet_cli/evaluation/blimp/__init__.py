"""BLiMP: zero-shot grammaticality judgements of a masked LM by pseudo-log-likelihood (`mapnet blimp`)."""
