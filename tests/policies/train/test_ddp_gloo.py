"""Two-process data-parallel training on CPU (gloo): identical weights on both ranks, disjoint data,
only rank 0 writes, and exact resume with per-rank RNG states."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _trainkit import SHAPE_META, TinyDataset, TinyPolicy

import robosteer.policies.train.trainer as tr
from robosteer.policies.checkpoint import load_checkpoint, state_dict_hash
from robosteer.policies.train import TrainConfig, Trainer

CFG = dict(batch_size=4, lr=3e-3, lr_warmup_steps=2, checkpoint_every=3, log_every=2, progress=False, seed=5)


class RecordingDataset(TinyDataset):
    def __init__(self) -> None:
        super().__init__(40)
        self.seen: list[int] = []

    def __getitem__(self, i: int):
        self.seen.append(int(i))
        return super().__getitem__(i)


def _fit(out: Path, steps: int, **over) -> tuple[Trainer, RecordingDataset]:
    torch.manual_seed(100 + dist.get_rank())  # different init per rank: DDP must broadcast rank 0's weights
    ds = RecordingDataset()
    trainer = Trainer(
        TinyPolicy(),
        ds,
        TrainConfig.from_dict({**CFG, "steps": steps, **over}),
        out,
        policy_name="tiny",
        shape_meta=SHAPE_META,
    )
    trainer.fit()
    return trainer, ds


def _worker(rank: int, world: int, init_file: str, root: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world, timeout=timedelta(seconds=60)
    )
    try:
        if rank != 0:

            def refuse(*a, **k):
                raise AssertionError("rank != 0 must not write checkpoints")

            tr.save_checkpoint = refuse
        root_p = Path(root)
        full, ds = _fit(root_p / "full", 8)
        _fit(root_p / "split", 8, stop_at_step=4)
        resumed, _ = _fit(root_p / "split", 8, resume=True)
        result = {
            "model": state_dict_hash(full.policy),
            "ema": state_dict_hash(full.ema.averaged_model),
            "resumed_model": state_dict_hash(resumed.policy),
            "resumed_ema": state_dict_hash(resumed.ema.averaged_model),
            "seen": ds.seen,
            "world_size": full.world_size,
        }
        (root_p / f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(180)
def test_two_process_gloo(tmp_path):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    r0 = json.loads((tmp_path / "rank0.json").read_text())
    r1 = json.loads((tmp_path / "rank1.json").read_text())
    assert r0["world_size"] == r1["world_size"] == 2
    assert r0["model"] == r1["model"] and r0["ema"] == r1["ema"]  # ranks agree
    assert r0["resumed_model"] == r0["model"] and r0["resumed_ema"] == r0["ema"]  # exact DDP resume
    assert r1["resumed_model"] == r1["model"]
    assert len(r0["seen"]) == len(r1["seen"]) == 8 * 4
    assert not set(r0["seen"][:20]) & set(r1["seen"][:20])  # first epoch: disjoint shards
    latest = load_checkpoint(tmp_path / "full" / "checkpoints" / "latest")
    assert latest.extra["world_size"] == 2 and len(latest.extra["rng"]) == 2
    assert state_dict_hash(latest.modules["model"]) == r0["model"]
    assert json.loads((tmp_path / "full" / "metrics.json").read_text())["world_size"] == 2
