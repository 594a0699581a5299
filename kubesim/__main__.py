"""python -m kubesim: run the simulated cluster as a server."""
from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
import threading
from pathlib import Path

from .cluster import Cluster


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kubesim",
                                description="A Kubernetes-API-compatible simulated GPU cluster.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6443)
    p.add_argument("--profile", default="default", help="profile name or YAML file")
    p.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second")
    p.add_argument("--state", type=Path, help="JSON state file: loaded on start, saved "
                                              "periodically and on exit")
    p.add_argument("--kubeconfig", type=Path, default=Path("var/kubesim/kubeconfig"),
                   help="where to write a kubeconfig for kubectl and the portal")
    p.add_argument("--no-sim", action="store_true", help="API server only, no simulation")
    p.add_argument("--deterministic", action="store_true",
                   help="the clock moves only when advanced (no background ticks)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-interval", type=float, default=30.0)
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--access-log", action="store_true", help="log every request")
    p.add_argument("--watch-cache-size", type=int, default=None,
                   help="events kept per resource for watch resumes (default: sized as "
                        "kube-apiserver's watch cache, 100 growing to 102400)")
    p.add_argument("--kueue-config", type=Path, default=None,
                   help="Kueue's Configuration (the kueue-system/kueue-manager-config "
                        "ConfigMap's manifest, or a bare Configuration), put in the store "
                        "at start (kubesim/KUEUE.md)")
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("kubesim")
    try:
        cluster = Cluster(profile=args.profile, speed=args.speed,
                          deterministic=args.deterministic, simulate=not args.no_sim,
                          state_file=args.state, seed=args.seed,
                          save_interval=args.save_interval, access_log=args.access_log,
                          watch_cache_size=args.watch_cache_size)
        url = cluster.start(args.host, args.port)
        if args.kueue_config is not None:
            from .sim.kueue_config import install
            text = args.kueue_config.read_text()
            cluster.call(install, cluster.store, text)
    except (OSError, ValueError) as e:
        log.error("cannot start: %s", e)
        return 1
    # Stored objects are acyclic JSON trees freed by reference counting; the cyclic GC
    # only rescans them, at a cost that grows with the store. Run it far less often, and
    # never over what exists at startup.
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    kc = cluster.write_kubeconfig(args.kubeconfig)
    log.info("kubesim serving %s (kubeconfig %s, profile %s, speed %s, sim %s)", url, kc,
             args.profile, args.speed, "off" if cluster.sim is None else "on")
    print(f"kubesim listening on {url}; KUBECONFIG={kc}", flush=True)
    done = threading.Event()

    def on_signal(signum, frame):
        log.info("signal %s: shutting down", signum)
        done.set()
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    done.wait()
    cluster.stop()
    log.info("stopped%s", f"; state saved to {args.state}" if args.state else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
