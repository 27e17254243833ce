"""The encoder and its checkpoints:

bert.py         the BERT encoder with its MLM head (`BertForMLM`), config, FLOPs per token
modern.py       the modern encoder block (`model.block = "modern"`): rotary positions, GeGLU, no biases
attention.py    what both blocks share around attention: the key mask, the masked-only query grid
widths.py       widths derived from the settings (the feed-forward's), without torch
checkpoint.py   checkpoint folders: safetensors weights, training state, manifest, marker; resolve and verify
"""
