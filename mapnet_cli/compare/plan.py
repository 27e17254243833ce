"""The comparison's plan: the strategies table (each arm's masking settings) and one run per strategy x seed."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from .. import settings as settings_mod
from ..comma_list import comma_list
from ..errors import MapnetError
from .costs import clock_updates

_PAPER = {"importance": "clipped", "explore_start": 1.0, "explore_end": 0.33, "target": "loss", "mix_uniform": 0.0}
# The principled arms: per-position Horvitz-Thompson weights over systematic PPS masks, a per-token
# mixture with uniform (alpha = 0.5: every weight <= 2) instead of the per-sequence exploration coin.
_HT = {"importance": "ht", "mix_uniform": 0.5, "explore_start": 0.0, "explore_end": 0.0}


def _mapnet(**table) -> dict:
    return {"strategy": "mapnet", "mapnet": table}


def _adaptive(score: str, weights: str) -> dict:
    return {
        "strategy": "adaptive",
        "adaptive": {"score": score, "weights": weights, **({"mix_uniform": 0.5} if weights == "ht" else {})},
    }


# Each ablation is the paper's MAP-Net with one thing changed.
STRATEGIES = {
    "uniform": {"strategy": "uniform"},
    "mapnet": _mapnet(**_PAPER),
    "mapnet-noweight": _mapnet(**{**_PAPER, "importance": "none"}),
    "mapnet-unclipped": _mapnet(**{**_PAPER, "importance": "unclipped"}),
    "mapnet-noexplore": _mapnet(**{**_PAPER, "explore_start": 0.0, "explore_end": 0.0}),
    # The paper's exploration schedule is 1M steps long; a short run compresses it ~1000x. Here it
    # is set to 10x the run (train.steps), so the run ends at ~93% uniform masking (a fairness check).
    "mapnet-uncompressed": _mapnet(**{**_PAPER, "explore_steps": "10x"}),
    "mapnet-ht": _mapnet(**_HT, target="gradnorm"),
    "mapnet-ht-loss": _mapnet(**_HT, target="loss"),
    "mapnet-ht-learnability": _mapnet(**_HT, target="learnability"),
    # The HT arm made cheap (the "step efficiency" issue's <= 1.15x target): a one-block proposal that
    # learns on every 4th step only and just draws masks in between (masking.mapnet.train_every).
    "mapnet-ht-lite": _mapnet(**_HT, target="gradnorm", layers=1, train_every=4),
    "stratified": {"strategy": "stratified"},
    "frequency-ht": {"strategy": "frequency", "frequency": {"mix_uniform": 0.5}},
    # Loss-adaptive masking (AMLM, masking/adaptive.py): the published objective (unweighted; hard or soft
    # scores) and mapnet's unbiased HT version (alpha = 0.5 as the other HT arms: every weight <= 2).
    "adaptive": _adaptive("hard", "none"),
    "adaptive-soft": _adaptive("soft", "none"),
    "adaptive-ht": _adaptive("hard", "ht"),
    "adaptive-soft-ht": _adaptive("soft", "ht"),
    # The no-network unit schemes people use (masking/units.py, masking/pmi_units.py): unweighted, the uniform token
    # budget.
    "whole-word": {"strategy": "whole-word"},
    "span": {"strategy": "span"},
    "pmi": {"strategy": "pmi"},
    # GPT-BERT's hybrid objective (masking/hybrid.py): one slot in 16 a causal row, the others uniform.
    "hybrid": {"strategy": "hybrid"},
}
# The variance-decomposition scheme that matches what each strategy trains with.
SCHEME = {
    "uniform": "uniform",
    "mapnet": "mapnet_clipped",
    "mapnet-noweight": "mapnet_unweighted",
    "mapnet-unclipped": "mapnet_unclipped",
    "mapnet-noexplore": "mapnet_clipped",
    "mapnet-uncompressed": "mapnet_clipped",
    "mapnet-ht": "ht",
    "mapnet-ht-loss": "ht",
    "mapnet-ht-learnability": "ht",
    "mapnet-ht-lite": "ht",
    "stratified": "stratified",
    "frequency-ht": "frequency",
    # Unit masks and the adaptive table are not a variance scheme yet: their arms show no variance curve
    # (uniform is still measured).
    "whole-word": None,
    "span": None,
    "pmi": None,
    "hybrid": None,
    "adaptive": None,
    "adaptive-soft": None,
    "adaptive-ht": None,
    "adaptive-soft-ht": None,
}


def split_name(name: str) -> tuple[str, float | None]:
    """ "uniform@0.4" -> ("uniform", 0.4): any strategy at another masking rate (masking.mask_prob)."""
    base, at, rate = name.partition("@")
    if not at:
        return base, None
    try:
        value = float(rate)
    except ValueError:
        raise MapnetError(f"strategy {name!r}: the masking rate after @ must be a number, e.g. uniform@0.3") from None
    if not 0.0 < value < 1.0:
        raise MapnetError(f"strategy {name!r}: the masking rate must be in (0, 1)")
    return base, value


def strategy_masking(name: str, steps: int, budget: bool = False) -> dict:
    """The masking settings strategy `name` (optionally NAME@RATE) trains with, for a run of `steps` steps
    (`budget`: a train.time_budget run, whose steps are not known in advance)."""
    base, rate = split_name(name)
    values = {key: dict(v) if isinstance(v, dict) else v for key, v in STRATEGIES[base].items()}
    if values.get("mapnet", {}).get("explore_steps") == "10x":
        if budget:
            raise MapnetError(
                f"strategy {name} stretches MAP-Net's exploration to 10x train.steps, which a "
                "train.time_budget does not fix; compare it by steps"
            )
        values["mapnet"]["explore_steps"] = 10 * steps
    if rate is not None:
        values["mask_prob"] = rate
    return values


@dataclass(frozen=True)
class PlannedRun:
    strategy: str
    index: int  # seed index k: train.seed = base seed + k
    settings: settings_mod.Settings
    path: Path

    @property
    def label(self) -> str:
        return f"{self.strategy}/seed-{self.index}"


def eval_steps(train) -> list[int] | None:
    """The steps `train.Run` evaluates at: 0, every eval_every, and the last (None with a train.time_budget:
    every eval_every and the step the budget ends at, which each run finds for itself)."""
    if train.time_budget:
        return None
    every = range(train.eval_every, train.steps + 1, train.eval_every) if train.eval_every else []
    return sorted({0, *every, train.steps})


def parse_strategies(text: str) -> list[str]:
    """`--strategies`: known names, each optionally NAME@RATE; duplicates dropped, order kept."""
    try:
        names = comma_list(text, "strategy", allowed=STRATEGIES, key=lambda name: split_name(name)[0])
    except MapnetError as exc:
        raise MapnetError(f"{exc}; NAME@RATE sets the masking rate, e.g. uniform@0.3") from None
    return list(dict.fromkeys(names))


def plan_runs(
    base: settings_mod.Settings,
    strategies: list[str],
    seeds: int,
    out: Path,
    step_costs: dict[str, tuple[float, float]] | None = None,
) -> list[PlannedRun]:
    """One run per strategy x seed index, in the order they are trained (seed-major, so a stopped
    comparison already holds complete seeds). `step_costs` ({strategy: (step, short step) seconds}, `costs.py`)
    puts every arm of a budget comparison on the modelled clock at its own costs."""
    if seeds < 1:
        raise MapnetError(f"--seeds must be >= 1 (got {seeds})")
    t = base.train
    if step_costs is not None:
        if not t.time_budget:
            raise MapnetError("--step-costs gives each arm's cost toward a budget: it needs --time-budget")
        if t.step_seconds or t.short_step_seconds:
            raise MapnetError(
                "--step-costs and train.step_seconds are two modelled clocks: give one (--step-costs "
                "gives each arm its own)"
            )
    # Every evaluated state is kept (for --blimp/--glue-every-checkpoint); a budget run's steps are not known in
    # advance, so it keeps every checkpoint, one per evaluation.
    kept = (
        {"keep_steps": [s for s in eval_steps(t) if s > 0]}
        if not t.time_budget
        else {"keep_steps": [], "keep_last": t.steps}
    )
    out_runs: list[PlannedRun] = []
    unused: dict[str, tuple] | None = None  # strategy-specific keys given that no arm uses
    for k in range(seeds):
        for name in strategies:
            clock = clock_updates(step_costs[name], t) if step_costs is not None else {}
            updates = {
                "masking": strategy_masking(name, t.steps, bool(t.time_budget)),
                "train": {"seed": t.seed + k, "checkpoint_every": t.eval_every, **kept, **clock},
            }
            s = settings_mod.apply(base, updates, f"compare strategy {name}")
            # A strategy-specific key (--set masking.span.p=0.3) goes to the arms that use it; the others
            # keep its default, as their own `pretrain` would need.
            ignored = s.masking.ignored()
            unused = dict(ignored) if unused is None else {key: w for key, w in unused.items() if key in ignored}
            s = replace(s, masking=s.masking.without_ignored())
            if s.problems():
                raise MapnetError(f"invalid settings for strategy {name}: " + "; ".join(s.problems()))
            out_runs.append(PlannedRun(name, k, s, Path(out) / "runs" / name / f"seed-{k}"))
    if unused:
        raise MapnetError(
            "; ".join(
                f"masking.{key} = {value!r} only applies with {where}, and no compared strategy uses it"
                for key, (value, where) in unused.items()
            )
        )
    return out_runs


def check_inputs(
    plan: list[PlannedRun],
    shards: Path,
    glue_tasks: list[str] = (),
    glue_data: Path | None = None,
    finetune=None,
    blimp_suite=None,
) -> None:
    """Everything the comparison will read, checked before its first run trains, every problem in one line:
    what each arm's run needs from the shards (a `pmi` arm's vocabulary, `train.inputs`), an --init-from
    SOURCE's tokenizer against the shards', every GLUE task's files (read and parsed as the sweep will), and
    that the BLiMP sentences fit model.max_position in the runs' text path (the shards' tokenizer and cleaning)."""
    from ..data.shards import ShardReader
    from ..train import init_from
    from ..train.inputs import run_input_problems

    problems: list[str] = []

    def collect(check) -> None:
        try:
            check()
        except MapnetError as exc:
            if str(exc) not in problems:
                problems.append(str(exc))

    with ShardReader(shards, "train", verify="size") as reader:  # each run verifies in full when it opens them
        arms: dict[str, list[str]] = {}  # problem -> the arms that have it
        for pr in {pr.strategy: pr for pr in plan}.values():  # one per arm: the seeds differ in train.seed only
            for text in run_input_problems(pr.settings, reader, shards):
                arms.setdefault(text, []).append(pr.strategy)
        problems += [
            f"{'strategy' if len(names) == 1 else 'strategies'} {', '.join(names)}: {text}"
            for text, names in arms.items()
        ]
        if blimp_suite is not None and plan:
            collect(lambda: _blimp_fits(plan, Path(reader.tokenizer_path), blimp_suite))
        source = plan[0].settings.model.init_from if plan else ""
        if source:
            collect(
                lambda: init_from.check_tokenizer(
                    init_from.open_source(source), reader.tokenizer_path, f"the shards in {shards}"
                )
            )
    if glue_tasks and not Path(glue_data).is_dir():
        problems.append(
            f"--glue-data {glue_data}: no such folder (GLUE in the standard layout: <Task>/train.tsv, dev.tsv)"
        )
    elif glue_tasks:
        from ..evaluation.glue.sweep import load_tasks

        collect(lambda: load_tasks(list(glue_tasks), glue_data, finetune))
    if problems:
        raise MapnetError("; ".join(problems))


def _blimp_fits(plan: list[PlannedRun], tokenizer: Path, suite) -> None:
    """Refuse a BLiMP suite whose longest sentence (+ [CLS], [SEP]) the runs' model cannot read: `blimp` finds it
    before scoring, but in a comparison that is after every run has trained."""
    from ..evaluation.blimp.models import mapnet_text

    settings = plan[0].settings
    text = mapnet_text(tokenizer.parent, settings)  # the checkpoints' own path: they carry these shards' tokenizer
    longest = max(len(ids) for ids in text.tokenise(suite.sentences())) + 2
    if longest > settings.model.max_position:
        raise MapnetError(
            f"--blimp: its longest sentence is {longest} tokens with [CLS] and [SEP] in the shards' "
            f"tokenizer, more than model.max_position ({settings.model.max_position}) can read; "
            "score other paradigms, or train a longer model"
        )
