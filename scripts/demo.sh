#!/usr/bin/env bash
# `make demo`: the main job on the default task, end to end on this 2-core CPU (about 14 minutes, plus the install).
#   1. collect 100 scripted-expert demonstrations (robomimic HDF5)
#   2. replay the dataset from its episode seeds (proves it regenerates exactly) and evaluate the expert
#   3. train a Diffusion Policy on the demos, then evaluate it on 100 unseen initial states
#   4. DSRL: a deliberately weak Diffusion Policy (trained on noisy demonstrations: the README headline's
#      recipe and collection seed) is steered by DSRL-NA through its latent noise, weights frozen, with
#      robosteer-steer's defaults (offline data = the base's own demos, shaped reward, averaged actor);
#      base and steered policy evaluated on the same 100 states
#   5. print the summary table; write a plot and rollout videos
# Steps 2 and 3 run in the background beside step 4 (one core each).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TASK=${TASK:-push-v3}
OUT=${OUT:-runs/demo}
TRAIN_STEPS=${TRAIN_STEPS:-4000}    # ~3 min on one core; the LR schedule spans exactly these
WEAK_STEPS=${WEAK_STEPS:-3000}      # the weak base: 3000 steps on demos with N(0, 0.3) action noise
DSRL_STEPS=${DSRL_STEPS:-10000}     # env steps of DSRL-NA: ~4 min here; the run ends on this count, so its
DSRL_MINUTES=${DSRL_MINUTES:-10}    # result repeats from run to run; the minutes are only a safety cap
EVAL_EPISODES=${EVAL_EPISODES:-100}  # the final evaluations; the intermediate checks take fewer
CHECK_EPISODES=${CHECK_EPISODES:-20}
export MUJOCO_GL=${MUJOCO_GL:-egl}

START=$SECONDS
step() { printf '\n== %s   (%d s into the demo)\n' "$*" $((SECONDS - START)); }
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
# Only steps 1 → 4 → the summary depend on each other; every command uses one torch thread. So on 2 cores the
# main line runs steps 1 and 4 while steps 2 and 3 (and, beside DSRL, the weak base's evaluation) run in the
# background, each with its output in a log under $OUT that the demo shows when it ends.
PIDS=() LOGS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT  # an interrupted demo leaves nothing running behind
background() {  # background LOG FUNCTION: run FUNCTION beside the main line, its output to LOG
  local log=$1
  shift
  "$@" > "$log" 2>&1 &
  PIDS+=("$!") LOGS+=("$log")
}
check_dataset_and_train() {  # steps 2 and 3
  $PY -m robosteer.scripts.evaluate policy=replay dataset="$OUT/demos/demos.hdf5" episodes="$CHECK_EPISODES" \
      progress=false out="$OUT/replay"
  $PY -m robosteer.scripts.evaluate policy=expert task="$TASK" episodes="$CHECK_EPISODES" video_episodes=1 \
      progress=false out="$OUT/expert"
  $PY -m robosteer.scripts.train policy=diffusion dataset="$OUT/demos/demos.hdf5" task="$TASK" \
      steps="$TRAIN_STEPS" max_minutes=12 eval_every=0 eval_episodes=10 progress=false out="$OUT/dp"
  $PY -m robosteer.scripts.evaluate checkpoint="$OUT/dp" which=ema task="$TASK" episodes="$EVAL_EPISODES" \
      seed=200000 video_episodes=2 progress=false out="$OUT/dp_eval"
}
evaluate_weak_base() {
  $PY -m robosteer.scripts.evaluate checkpoint="$OUT/weak_dp" which=ema task="$TASK" episodes="$EVAL_EPISODES" \
      seed=200000 video_episodes=1 progress=false out="$OUT/weak_dp_eval"
}

step "1/5 collect 100 expert demonstrations on $TASK"
$PY -m robosteer.scripts.collect task="$TASK" episodes=100 seed=0 out="$OUT/demos"

step "2/5 and 3/5 in the background ($OUT/dp.log): replay the dataset and evaluate the scripted expert on \
$CHECK_EPISODES episodes; train a Diffusion Policy for $TRAIN_STEPS steps, then evaluate it on $EVAL_EPISODES unseen episodes"
background "$OUT/dp.log" check_dataset_and_train

step "4/5 DSRL: steer a weak base (trained on noisy demos) through its latent noise, base frozen"
$PY -m robosteer.scripts.collect task="$TASK" episodes=100 seed=0 action_noise_std=0.3 keep=all out="$OUT/noisy_demos"
$PY -m robosteer.scripts.train policy=diffusion dataset="$OUT/noisy_demos/demos.hdf5" task="$TASK" \
    steps="$WEAK_STEPS" eval_every=0 eval_episodes=10 out="$OUT/weak_dp"
background "$OUT/weak_dp_eval.log" evaluate_weak_base  # the "before" figure, beside DSRL
$PY -m robosteer.scripts.steer base="$OUT/weak_dp" env_steps="$DSRL_STEPS" run.max_minutes="$DSRL_MINUTES" \
    eval_base=false run.eval_every=5000 run.eval_episodes=20 out="$OUT/dsrl"
$PY -m robosteer.scripts.evaluate checkpoint="$OUT/dsrl" task="$TASK" episodes="$EVAL_EPISODES" seed=200000 \
    video_episodes=1 out="$OUT/dsrl_eval"

step "wait for the background steps"
for i in "${!PIDS[@]}"; do
  if ! wait "${PIDS[$i]}"; then
    echo "make demo: a background step failed; its log, ${LOGS[$i]}, ends with:" >&2
    tail -n 20 "${LOGS[$i]}" >&2
    exit 1
  fi
done
trap - EXIT

step "5/5 summary"
$PY -m robosteer.scripts.report "$OUT"
printf '\nDSRL before/after (the frozen weak base vs base + the best DSRL-NA actor of the periodic evaluations,\nboth on the same %s unseen episodes):\n' "$EVAL_EPISODES"
$PY -m robosteer.scripts.report "$OUT" weak_dp_eval dsrl_eval
printf '\nmake demo: %d s from the first demonstration to this table (the install not counted)\n' $((SECONDS - START))
