# Sourced by the experiment scripts that time their runs with benchmarks/step_costs.py.
#
#   common=$(bench_settings "${RUN[@]}") || exit 2; mapfile -t common <<<"$common"
#
# A run's flags (--recipe R, --preset P, --set K=V) as the benchmark's KEY=VALUE words, one a line: the benchmark makes
# each run a budget of its own, so only settings pass. Any other flag is refused, never dropped.
bench_settings() {
    while (($#)); do
        (($# >= 2)) || { echo "$1 without its value: cannot pass it to benchmarks/step_costs.py" >&2; return 2; }
        case $1 in
            --recipe) echo "recipe=$2" ;;
            --preset) echo "preset=$2" ;;
            --set) echo "$2" ;;
            *) echo "cannot pass $1 to benchmarks/step_costs.py" >&2; return 2 ;;
        esac
        shift 2
    done
}
