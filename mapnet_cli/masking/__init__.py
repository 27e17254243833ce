"""Masking: where masks are drawn, how each masked position's loss is weighted, and what is learned.

    uniform.py      keyed per-sequence random streams; uniform BERT masking and the 80/10/10 replacement
    designs.py      fixed-size sampling designs with exact inclusion probabilities; Horvitz-Thompson weights
    strategy.py     the `Strategy` protocol (and its table); uniform, stratified and frequency strategies
    adaptive.py     loss-adaptive masking (AMLM): a per-token table moved by the model's own scores
    units.py        whole-word and span (SpanBERT) masking: word boundaries, the token budget
    pmi_units.py    PMI n-gram masking over a PMI vocabulary
    pmi_vocab.py    building, writing and reading that vocabulary (`mapnet pmi-vocab`)
    mapnet/         MAP-Net: the proposal network trained with the encoder, and its strategy

Nothing here imports the training loop or evaluation (tests/test_imports.py checks it).
"""
