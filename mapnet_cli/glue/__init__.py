"""GLUE fine-tuning: task readers (tasks), text encoding (encode), metrics, the head (model), one run (finetune), the protocol (sweep), tables and curves (report)."""
