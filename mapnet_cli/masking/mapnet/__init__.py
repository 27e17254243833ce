"""MAP-Net: a mask proposal network trained jointly with the encoder (Chen et al., sections 3.2-3.3).

    from mapnet_cli.masking.mapnet import ProposalConfig, ProposalNetwork, MapnetJoint

- `proposal`: the half-width Transformer that scores positions (shares the encoder's token embedding)
- `sampling`: Gumbel-top-k without replacement, importance weights, the exploration schedule
- `objective`: the MAP-Net loss (eq. 10) and the joint loss of one micro-batch
- `stats`: cheap per-step numbers for the metrics file
- `training`: the strategy object `train.Run` uses with `masking.strategy = "mapnet"`
"""

from .objective import (
    MapnetJoint,
    MaskDraw,
    MicroBatchLoss,
    draw_masks,
    map_training_sequences,
    mapnet_micro_batch_loss,
    mapnet_objective,
)
from .proposal import (
    ProposalConfig,
    ProposalNetwork,
    has_proposal_weights,
    load_proposal_state_dict,
    proposal_state_dict,
)
from .sampling import exploration_coins, explore_probability, gumbel_top_k, importance_weights, log_importance_ratio
from .stats import MapnetStats, summary_keys

__all__ = [
    "MapnetJoint",
    "MaskDraw",
    "MicroBatchLoss",
    "draw_masks",
    "map_training_sequences",
    "mapnet_micro_batch_loss",
    "mapnet_objective",
    "ProposalConfig",
    "ProposalNetwork",
    "has_proposal_weights",
    "load_proposal_state_dict",
    "proposal_state_dict",
    "explore_probability",
    "exploration_coins",
    "gumbel_top_k",
    "importance_weights",
    "log_importance_ratio",
    "MapnetStats",
    "summary_keys",
]
