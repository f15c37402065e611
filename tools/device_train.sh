#!/bin/bash
# A training run from scratch on a lent GPU machine, inside one device call, keeping what is worth keeping.
#
#   bash tools/device_setup.sh run bash tools/device_train.sh SECONDS CONFIG [--set ...]
#
# Builds numba's cache once (so the actors load machine code instead of each compiling), samples the GPU's
# use every 5 s, trains CONFIG under a SIGINT when SECONDS have passed (train's own Ctrl-C path: the state
# is saved), and archives the run's small files (networks, state.json, events, metrics, arena games; not
# the replay) into $OUT/run.tgz. If the run fails within its first two minutes with the learner on the GPU,
# it is tried once more with the learner on the CPU, so one device call still gives a run.
set -u
seconds=$1 config=$2
shift 2
out=${OUT:-/tmp/out}
mkdir -p "$out"
{ nvidia-smi; lscpu | head -20; python3 -c "import torch, numba; print(torch.__version__, numba.__version__)"; } >"$out/machine.txt" 2>&1
started=$(date +%s)
python3 -m alphazero.search.warmup >"$out/warmup.log" 2>&1 || echo "warmup failed (rc $?)" >>"$out/warmup.log"
echo "warmup: $(($(date +%s) - started)) s" | tee -a "$out/warmup.log"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 5 >"$out/gpu.csv" 2>&1 &
smi=$!
left=$((seconds - ($(date +%s) - started)))
begun=$(date +%s)
timeout -s INT -k 30 "$left" az train --config "$config" --run-dir /tmp/run "$@" >"$out/train.log" 2>&1
rc=$?
echo "train rc $rc after $(($(date +%s) - begun)) s" | tee -a "$out/train.log"
run=/tmp/run
left=$((seconds - ($(date +%s) - started)))
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ $(($(date +%s) - begun)) -lt 120 ] && [ "$left" -gt 60 ]; then
    timeout -s INT -k 30 "$left" az train --config "$config" --run-dir /tmp/run-cpu-learner "$@" \
        --set workers.learner_gpus=0 --set train.device=cpu >"$out/train-cpu-learner.log" 2>&1
    echo "train (learner on the CPU) rc $?" | tee -a "$out/train-cpu-learner.log"
    run=/tmp/run-cpu-learner
fi
kill "$smi" 2>/dev/null
# One archive: a device call brings back only a few files.
parts=$(cd "$run" && ls -d config.yaml state.json events.jsonl metrics.jsonl arena networks 2>/dev/null)
tar czf "$out/run.tgz" -C "$run" $parts
du -sh "$out"/* | tee "$out/sizes.txt"
tail -n 30 "$out/train.log"
