#!/usr/bin/env bash
# `make demo`: the main job on the default task, end to end on this CPU (~17 minutes with the install).
#   1. collect 100 scripted-expert demonstrations (robomimic HDF5)
#   2. replay the dataset from its episode seeds (proves it regenerates exactly) and evaluate the expert
#   3. train a Diffusion Policy on the demos, then evaluate it on 100 unseen initial states
#   4. DSRL: a deliberately weak Diffusion Policy (trained on noisy demonstrations: the README headline's
#      recipe and collection seed) is steered by DSRL-NA through its latent noise, weights frozen, with
#      robosteer-steer's defaults (offline data = the base's own demos, shaped reward, averaged actor);
#      base and steered policy evaluated on the same 100 states
#   5. print the summary table; write a plot and rollout videos
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TASK=${TASK:-push-v3}
OUT=${OUT:-runs/demo}
TRAIN_STEPS=${TRAIN_STEPS:-8000}    # ~5.5 min at ~25 steps/s on 2 cores; the LR schedule spans exactly these
WEAK_STEPS=${WEAK_STEPS:-3000}      # the weak base: 3000 steps on demos with N(0, 0.3) action noise
DSRL_STEPS=${DSRL_STEPS:-20000}     # env steps of DSRL-NA: ~6 min here; the run ends on this count, so its
DSRL_MINUTES=${DSRL_MINUTES:-10}    # result repeats from run to run; the minutes are only a safety cap
EVAL_EPISODES=${EVAL_EPISODES:-100}
export MUJOCO_GL=${MUJOCO_GL:-egl}

step() { printf '\n== %s\n' "$*"; }
# Only a folder this script made (it carries MARKER) is ever deleted; anything else at $OUT is refused.
MARKER=.robosteer-demo
if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  if [ ! -f "$OUT/$MARKER" ]; then
    echo "make demo: error: OUT=$OUT holds files this demo did not write (no $OUT/$MARKER): choose another OUT=" >&2
    exit 2
  fi
  echo "replacing the previous demo results in $OUT"; rm -rf "$OUT"
fi
mkdir -p "$OUT" && echo "written by scripts/demo.sh; make demo replaces this folder" > "$OUT/$MARKER"
step "1/5 collect 100 expert demonstrations on $TASK"
$PY -m robosteer.scripts.collect task="$TASK" episodes=100 seed=0 out="$OUT/demos"

step "2/5 replay the dataset and evaluate the scripted expert"
$PY -m robosteer.scripts.evaluate policy=replay dataset="$OUT/demos/demos.hdf5" episodes=100 out="$OUT/replay"
$PY -m robosteer.scripts.evaluate policy=expert task="$TASK" episodes=50 video_episodes=1 out="$OUT/expert"

step "3/5 train a Diffusion Policy for $TRAIN_STEPS steps, then evaluate it on $EVAL_EPISODES unseen episodes"
$PY -m robosteer.scripts.train policy=diffusion dataset="$OUT/demos/demos.hdf5" task="$TASK" \
    steps="$TRAIN_STEPS" max_minutes=12 eval_every=0 eval_episodes=20 out="$OUT/dp"
$PY -m robosteer.scripts.evaluate checkpoint="$OUT/dp" which=ema task="$TASK" episodes="$EVAL_EPISODES" seed=200000 \
    video_episodes=2 out="$OUT/dp_eval"

step "4/5 DSRL: steer a weak base (trained on noisy demos) through its latent noise, base frozen"
$PY -m robosteer.scripts.collect task="$TASK" episodes=100 seed=0 action_noise_std=0.3 keep=all out="$OUT/noisy_demos"
$PY -m robosteer.scripts.train policy=diffusion dataset="$OUT/noisy_demos/demos.hdf5" task="$TASK" \
    steps="$WEAK_STEPS" eval_every=0 eval_episodes=20 out="$OUT/weak_dp"
$PY -m robosteer.scripts.evaluate checkpoint="$OUT/weak_dp" which=ema task="$TASK" episodes="$EVAL_EPISODES" seed=200000 \
    video_episodes=1 out="$OUT/weak_dp_eval"
$PY -m robosteer.scripts.steer base="$OUT/weak_dp" env_steps="$DSRL_STEPS" run.max_minutes="$DSRL_MINUTES" \
    eval_base=false run.eval_every=5000 run.eval_episodes=20 out="$OUT/dsrl"
$PY -m robosteer.scripts.evaluate checkpoint="$OUT/dsrl" task="$TASK" episodes="$EVAL_EPISODES" seed=200000 \
    video_episodes=1 out="$OUT/dsrl_eval"

step "5/5 summary"
$PY -m robosteer.scripts.report "$OUT"
printf '\nDSRL before/after (the frozen weak base vs base + the best DSRL-NA actor of the periodic evaluations,\nboth on the same %s unseen episodes):\n' "$EVAL_EPISODES"
$PY -m robosteer.scripts.report "$OUT" weak_dp_eval dsrl_eval
