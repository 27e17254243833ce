"""The encoder and its checkpoints:

    bert.py         the BERT encoder with its MLM head (`BertForMLM`), config, FLOPs per token
    checkpoint.py   checkpoint folders: safetensors weights, training state, manifest, marker; resolve and verify
"""
