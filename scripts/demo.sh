#!/usr/bin/env bash
# `make demo`: the main job on the default task, end to end on this CPU (~15 minutes with the install).
#   1. collect 100 scripted-expert demonstrations (robomimic HDF5)
#   2. replay the dataset from its episode seeds (proves it regenerates exactly) and evaluate the expert
#   3. train a Diffusion Policy on the demos, then evaluate it on 100 unseen initial states
#   4. print the summary table; write a plot and a rollout video
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TASK=${TASK:-push-v3}
OUT=${OUT:-runs/demo}
TRAIN_STEPS=${TRAIN_STEPS:-10000}   # ~7 min at ~25 steps/s on 2 cores; the LR schedule spans exactly these
EVAL_EPISODES=${EVAL_EPISODES:-100}
export MUJOCO_GL=${MUJOCO_GL:-egl}

step() { printf '\n== %s\n' "$*"; }
if [ -d "$OUT" ]; then echo "replacing the previous demo results in $OUT"; rm -rf "$OUT"; fi
step "1/4 collect 100 expert demonstrations on $TASK"
$PY -m scripts.collect task="$TASK" episodes=100 seed=0 out="$OUT/demos"

step "2/4 replay the dataset and evaluate the scripted expert"
$PY -m scripts.evaluate policy=replay dataset="$OUT/demos/demos.hdf5" episodes=100 out="$OUT/replay"
$PY -m scripts.evaluate policy=expert task="$TASK" episodes=50 video_episodes=1 out="$OUT/expert"

step "3/4 train a Diffusion Policy for $TRAIN_STEPS steps, then evaluate it on $EVAL_EPISODES unseen episodes"
$PY -m scripts.train policy=diffusion dataset="$OUT/demos/demos.hdf5" task="$TASK" \
    steps="$TRAIN_STEPS" max_minutes=12 eval_every=0 eval_episodes=20 out="$OUT/dp"
$PY -m scripts.evaluate checkpoint="$OUT/dp" which=ema task="$TASK" episodes="$EVAL_EPISODES" seed=200000 \
    video_episodes=2 out="$OUT/dp_eval"

step "4/4 summary"
$PY -m scripts.report "$OUT"
