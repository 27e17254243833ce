"""BLiMP: zero-shot grammaticality judgements of a masked LM by pseudo-log-likelihood (`mapnet blimp`)."""

# Bump whenever scoring changes (the text path, PLL, the unigram sum, the random init), so that neither `mapnet blimp
# --resume` nor compare's caches (compare/blimp_scores.py) mix scores of two scorers. Files written before: 1.
SCORER_VERSION = 1
