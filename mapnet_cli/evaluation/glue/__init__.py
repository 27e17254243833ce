"""GLUE fine-tuning: task readers (tasks), text encoding (encode), metrics, the head (model), one run (finetune),
the protocol (sweep), tables and curves (report), loading pretrained checkpoints and their random-init controls
(pretrained). The frozen-feature probe built on these is `evaluation/probe.py`."""
