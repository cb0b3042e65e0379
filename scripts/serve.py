"""robosteer-serve: serve a checkpoint or a steering run over websockets + msgpack (see real/server.py)."""

from __future__ import annotations

from omegaconf import DictConfig

from robosteer.scripts.common import console_main, exit_codes, start_run


def _main(cfg: DictConfig) -> None:
    import torch

    from robosteer.policies.engine import resolve_device
    from robosteer.real.server import PolicyServer, load_backend

    torch.set_num_threads(int(cfg.threads))
    start_run(cfg)
    with exit_codes("robosteer-serve"):  # a missing or corrupt checkpoint, a refused setting: 2
        device = resolve_device(cfg.device)
        backend = load_backend(
            str(cfg.checkpoint),
            which=str(cfg.which),
            deterministic=bool(cfg.deterministic),
            device=str(device),
        )
        server = PolicyServer(
            backend,
            host=str(cfg.host),
            port=int(cfg.port),
            token=None if cfg.token is None else str(cfg.token),
            max_message_bytes=int(float(cfg.max_message_mb) * 2**20),
            idle_timeout_s=float(cfg.idle_timeout_s),
            max_batch=int(cfg.max_batch),
            slice_rows=int(cfg.slice_rows),
            stuck_after_s=float(cfg.stuck_after_s),
            protocol=str(cfg.protocol),
        )
    server.start()
    meta = backend.metadata()
    print(
        f"serving {cfg.checkpoint} ({'steered ' if meta['steered'] else ''}Tp={meta['horizon']}, "
        f"Ta={meta['n_action_steps']}, task={meta['task']}) on {server.url}  (GET /healthz; Ctrl-C stops)",
        flush=True,
    )
    server.serve_forever()


def main() -> None:
    """Console-script entry point."""
    console_main("robosteer-serve", "serve", _main)


if __name__ == "__main__":
    main()
