"""Evaluation of trained runs: what pretraining bought, measured after (or beside) it.

    glue/             fine-tuning on GLUE: tasks, encoding, the sweep protocol, tables (`mapnet finetune-glue`)
    probe.py          a cheap frozen-feature probe at every checkpoint (`mapnet probe`)
    variance/         the gradient-variance decomposition of each masking scheme (`mapnet variance`)
    inspect_masks.py  what a trained MAP-Net proposes, token by token (`mapnet inspect-masks`)

Evaluation reads runs through `train.run_loader`; training never imports it (tests/test_imports.py).
"""
