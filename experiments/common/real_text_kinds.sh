# The real-text shards by kind, one table for the scripts of sections G, H and I (sourced, from the repository root).
# Two tokenizers of the same text (RESULTS 0's): the 8,192-token BPE (runs/real-text: its preparation, shards and
# held-out books and wiki; runs/real-text-x5: the 5x training text through it) and a 16,384-token one trained on the
# same text (runs/real-text-16k, runs/real-text-x5-16k). Each training text is cut into 128- or 64-token sequences:
#   base            8,192 BPE, 128 tokens (the lever search's baseline)
#   seq64           8,192 BPE, 64 tokens (the same tokens, cut shorter)
#   vocab16k        16,384 BPE, 128 tokens
#   vocab16k-seq64  16,384 BPE, 64 tokens (the `hour` recipe's: recipes.MEASURED_ON)
# The held-out sets are 128-token sequences of the same tokenizer whatever the kind: a held-out loss predicts the
# targets of its own vocabulary only. Section G's `levers_cpu.sh OUT prepare KIND...` builds them.
REAL_TEXT_KINDS="base seq64 vocab16k vocab16k-seq64"
REAL_TEXT=$(realpath -m runs/real-text); REAL_TEXT_X5=$(realpath -m runs/real-text-x5)
REAL_TEXT_16K=$(realpath -m runs/real-text-16k); REAL_TEXT_X5_16K=$(realpath -m runs/real-text-x5-16k)

real_text_kind() {  # KIND: sets KIND_SHARDS, KIND_PREP (what they were cut from), KIND_HELDOUT (the folder holding
    # heldout-books and heldout-wiki) and KIND_SEQ (tokens a sequence); an unknown KIND returns 2 and sets nothing
    local x5=$REAL_TEXT_X5 held=$REAL_TEXT
    case $1 in vocab16k | vocab16k-seq64) x5=$REAL_TEXT_X5_16K; held=$REAL_TEXT_16K ;; esac
    case $1 in
        base | vocab16k) KIND_SHARDS=$x5/shards; KIND_SEQ=128 ;;
        seq64 | vocab16k-seq64) KIND_SHARDS=$x5/shards-64; KIND_SEQ=64 ;;
        *) return 2 ;;
    esac
    KIND_PREP=$x5/prep; KIND_HELDOUT=$held
}
