"""The uniform stage CLI and the ``icml25`` project command.

Every study's ``__main__`` calls :func:`stage_main`, which gives it the same interface::

    python -m icml25.studies.<slug> <stage> [--config YAML --scale S | --config-json JSON]
        [--in PATH ...] [--out PATH ...] [--arm A] [--seeds K ...] [--data-source D] [--mirror M]

The stage function receives a :class:`Stage` (validated config, paths, arm, seeds) and an open MLflow run
(:class:`~icml25.core.tracking.StageRun`). A built-in ``noop`` stage opens and closes a run and does nothing: the
benchmarks time it as the fixed per-job overhead.

``icml25 <command>`` holds project-level commands (tracking set-up for the Snakefile's handlers, claims summary).
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import SCALES, ConfigError, StageView, build, load_yaml, merge_scale, to_dict

log = logging.getLogger("icml25")


@dataclass(frozen=True)
class Stage:
    """What a stage function gets: the validated study config and the job's paths and wildcards.

    ``config`` is a :class:`~icml25.core.config.StageView` of the whole validated ``Config``: it exposes only
    the keys the study's ``STAGE_KEYS`` declares for this stage (the keys Snakemake passes as the rule's params).
    """

    slug: str
    name: str
    config: Any
    scale: str
    data_source: str
    mirror: str | None
    inputs: tuple[Path, ...]
    outputs: tuple[Path, ...]
    arm: str | None = None
    seeds: tuple[int, ...] = ()
    results_dir: Path = Path("results")
    extra: Mapping[str, str] = field(default_factory=dict)
    trust_unpinned: bool = False  # accept manifest rows without a sha256 on first use (logged, then pinned)

    def output(self, i: int = 0) -> Path:
        """The i-th ``--out`` path (error naming the stage if absent)."""
        if i >= len(self.outputs):
            raise SystemExit(f"{self.slug} {self.name}: expected at least {i + 1} --out path(s)")
        return self.outputs[i]

    def input(self, i: int = 0) -> Path:
        """The i-th ``--in`` path (error naming the stage if absent)."""
        if i >= len(self.inputs):
            raise SystemExit(f"{self.slug} {self.name}: expected at least {i + 1} --in path(s)")
        return self.inputs[i]


StageFn = Callable[[Stage, Any], None]


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")


def load_study_config(slug: str, config_cls: type, *, config_path: str | None, scale: str,
                      config_json: str | None = None, device: str | None = None) -> tuple[Any, dict]:
    """The study's whole config, validated by its model, from a merged json (what Snakemake passes: the study's
    resolved config, from the environment) or from ``<yaml> + scale``; returns (config, plain dict). ``device``
    (``--device``: cpu | cuda | auto) is written into the study's device key first (:mod:`icml25.core.device`)."""
    if config_json is not None:
        try:
            raw = json.loads(config_json)
        except json.JSONDecodeError as err:
            raise ConfigError(f"--config-json: not valid json: {err}") from err
    else:
        path = Path(config_path or f"config/studies/{slug}.yaml")
        if not path.exists():
            raise ConfigError(f"{path}: study config not found (pass --config or --config-json)")
        raw = merge_scale(load_yaml(path), scale)
    if device is not None:
        from .device import apply_device, resolve

        raw = apply_device(slug, raw, resolve(device, key="--device"))
    config = build(config_cls, raw, path=slug)
    return config, to_dict(config)


def stage_parser(slug: str, stages: Sequence[str], description: str = "") -> argparse.ArgumentParser:
    """The argument parser shared by every study's stage CLI."""
    parser = argparse.ArgumentParser(
        prog=f"python -m icml25.studies.{slug}", description=description or f"Stages of the {slug} study.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("stage", choices=[*stages, "noop"], help="stage to run (noop: tracking overhead only)")
    parser.add_argument("--config", help="study yaml (default config/studies/<slug>.yaml), merged with --scale")
    parser.add_argument("--config-json", help="the whole merged study config as json (Snakemake passes "
                        "$ICML25_CONFIG_<SLUG>, set when the Snakefile is parsed)")
    parser.add_argument("--scale", choices=SCALES, default="default", help="scale used with --config")
    parser.add_argument("--in", dest="inputs", nargs="*", default=[], help="input paths, in the stage's order")
    parser.add_argument("--out", dest="outputs", nargs="*", default=[], help="output paths, in the stage's order")
    parser.add_argument("--arm", help="arm (method variant) for train stages")
    parser.add_argument("--seeds", nargs="*", type=int, default=[], help="seeds this job runs")
    parser.add_argument("--data-source", default="offline", help="offline (generators) or remote (manifest)")
    parser.add_argument("--mirror", default=None, help="URL base or directory replacing download origins")
    parser.add_argument("--trust-unpinned", action="store_true",
                        help="accept remote files whose manifest row pins no sha256 (UNPINNED) on first use; "
                             "each is logged and its hash pinned for later runs")
    parser.add_argument("--results", default="results", help="results root (MLflow store lives here)")
    parser.add_argument("--rehearsal", default=None, metavar="DIR",
                        help="paper-scale rehearsal: read the study's manifest from DIR/manifests/<slug>/ (the "
                             "miniatures' hashes; see icml25.core.rehearsal)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                        help="torch device of the study (the top-level `device` switch; Snakemake passes it to the "
                             "jobs whose stage reads the study's device key); default: the study config's key")
    parser.add_argument("--set", dest="extra", nargs="*", default=[], metavar="KEY=VALUE",
                        help="stage-specific options")
    parser.add_argument("--rule", help="Snakemake rule name (MLflow tag)")
    parser.add_argument("--jobid", help="Snakemake job id (MLflow tag)")
    parser.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    return parser


def stage_main(slug: str, config_cls: type, stages: Mapping[str, StageFn], argv: Sequence[str] | None = None,
               description: str = "", stage_keys: Mapping[str, Sequence[str]] | None = None) -> int:
    """Parse the stage CLI, load and validate the whole config, open the MLflow run, run the stage on a view of
    the config restricted to the stage's keys (``stage_keys``; default: ``STAGE_KEYS`` of the module defining
    ``config_cls``, i.e. the study's ``config.py``)."""
    _setup_logging()
    args = stage_parser(slug, list(stages), description).parse_args(argv)
    try:
        config, raw = load_study_config(slug, config_cls, config_path=args.config, scale=args.scale,
                                        config_json=args.config_json, device=args.device)
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    scale = args.scale
    if stage_keys is None:
        stage_keys = importlib.import_module(config_cls.__module__).STAGE_KEYS
    if args.stage != "noop" and args.stage not in stage_keys:
        print(f"config error: {slug}: stage {args.stage!r} has no STAGE_KEYS entry in {config_cls.__module__}",
              file=sys.stderr)
        return 2
    from . import device as dev

    try:  # before the stage touches torch: a cuda job without a GPU stops here; CUDA determinism is set up
        dev.setup_job(slug, dev.study_device(slug, raw),
                      key="device" if args.device else f"{slug}.{dev.DEVICE_KEYS.get(slug, 'device')}",
                      uses_device=dev.stage_uses_device(slug, args.stage, stage_keys, args.arm))
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    view = StageView(config, stage_keys.get(args.stage, ()), who=f"{slug} {args.stage}")
    extra = dict(item.split("=", 1) for item in args.extra if "=" in item)
    stage = Stage(slug=slug, name=args.stage, config=view, scale=scale, data_source=args.data_source,
                  mirror=args.mirror, inputs=tuple(map(Path, args.inputs)), outputs=tuple(map(Path, args.outputs)),
                  arm=args.arm, seeds=tuple(args.seeds), results_dir=Path(args.results), extra=extra,
                  trust_unpinned=args.trust_unpinned)
    if args.rehearsal:
        from .rehearsal import ENV as REHEARSAL_ENV

        os.environ[REHEARSAL_ENV] = str(Path(args.rehearsal).resolve())
    if args.rule:
        os.environ["ICML25_RULE"] = args.rule
    if args.jobid:
        os.environ["ICML25_JOBID"] = str(args.jobid)
    fn = stages.get(args.stage, lambda s, r: None)
    t0 = time.perf_counter()
    log.info("%s %s: arm=%s seeds=%s scale=%s", slug, args.stage, args.arm, list(args.seeds), scale)
    from .download import verify_recorded_inputs

    install_error_hook(f"{slug} {args.stage}")
    watch_parent(f"{slug} {args.stage}")
    # every raw input that a download recorded (<file>.sha256) is re-hashed before any stage reads it
    verify_recorded_inputs(stage.inputs)
    if args.no_track:
        work = _timed(fn, stage, _NullRun())
    else:
        from .tracking import stage_run

        seed = args.seeds[0] if len(args.seeds) == 1 else None
        with stage_run(slug, args.stage, arm=args.arm, seed=seed, scale=scale, data_source=args.data_source,
                       config=raw, results_dir=args.results, inputs=stage.inputs, outputs=stage.outputs,
                       seeds=stage.seeds, tags=dev.run_tags()) as run:
            work = _timed(fn, stage, run)
            run.log_metric("job/wall_s", time.perf_counter() - t0)
            run.log_metric("job/startup_cpu_s", work[0])
            run.log_metric("job/work_cpu_s", work[1])
    log.info("%s %s: done in %.1f s", slug, args.stage, time.perf_counter() - t0)
    # one machine-readable line per job: benchmarks/pipeline.py splits each job's CPU time into start-up and work;
    # total = the process's CPU from interpreter start to here (tracking teardown included) plus reaped children
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    print(f"{JOB_CPU_MARK} startup={work[0]:.3f} work={work[1]:.3f} total={total:.3f}", file=sys.stderr, flush=True)
    return 0


JOB_CPU_MARK = "icml25-job-cpu:"  #: prefix of the per-job CPU line in every stage's log


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[float, float]:
    """Run the stage function; return (start-up, work) in CPU seconds of all the process's threads
    (``process_time``). Start-up is what the job spent before the function (interpreter, imports, tracking
    set-up, input re-hashing) plus the imports the function itself triggered (a lazy ``import torch`` is start-up
    wherever it happens; timed by :class:`_ImportClock`); work is the rest of the function."""
    before = time.process_time()
    with _ImportClock() as imports:
        fn(*args)
    inside = time.process_time() - before
    return before + imports.cpu, max(0.0, inside - imports.cpu)


class _ImportClock:
    """Context manager summing the CPU seconds spent in outermost ``import`` statements (``builtins.__import__``;
    nested imports are inside their parent's time). Cost: one Python call per import statement executed."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self._depth = 0

    def __enter__(self) -> _ImportClock:
        import builtins

        self._builtins, self._original = builtins, builtins.__import__

        def timed_import(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return self._original(*args, **kwargs)
            self._depth += 1
            t0 = time.process_time()
            try:
                return self._original(*args, **kwargs)
            finally:
                self.cpu += time.process_time() - t0
                self._depth -= 1
        builtins.__import__ = timed_import
        return self

    def __exit__(self, *exc: object) -> None:
        self._builtins.__import__ = self._original


def expected_errors() -> tuple[type[BaseException], ...]:
    """Errors a user meets with bad input, not bugs: a failed or unverified download, a broken archive or data
    file, a bad config. The stage CLI prints them as one line naming the file and the fix, not a traceback.
    A study's own error class joins them by subclassing one of these (e.g. pid's ``ArchiveError(DataError)``)."""
    from .datasets import DataError
    from .download import DownloadError, IntegrityError

    return DownloadError, IntegrityError, DataError, ConfigError


ENV_PARENT = "ICML25_PARENT"  #: "<host>:<pid>:<start ticks>" of the Snakemake process that starts the jobs
PARENT_EXIT = 75  #: exit status of a job stopped because its Snakemake is gone (EX_TEMPFAIL)


def parent_token(pid: int | None = None) -> str:
    """``<host>:<pid>:<start>`` naming a process (``pid``, default this one) so that a reused pid is not mistaken
    for it: the Snakefile exports it for its jobs as ``$ICML25_PARENT``."""
    import socket

    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux ``/proc/<pid>/stat`` field 22), "" elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def parent_alive(token: str) -> bool:
    """Whether the process named by :func:`parent_token` still runs (a zombie or a reused pid does not count);
    True for a token of another host (a cluster job cannot see its Snakemake) or a malformed one."""
    import socket

    host, _, rest = token.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return Path("/proc").is_dir() is False  # no /proc: kill(0) said it exists
    state = stat.rsplit(")", 1)[1].split()
    return state[0] not in ("Z", "X") and (not start or state[19] == start)


def watch_parent(who: str, interval: float = 0.5) -> None:
    """Stop this job within ``interval`` seconds once the Snakemake that started it is gone (``$ICML25_PARENT``;
    e.g. ``kill -9`` of Snakemake's own process): a job nobody waits for would otherwise stall on the dead
    pipeline's tracking server, spool, and then write outputs that look complete although no Snakemake recorded
    them. The job exits with status :data:`PARENT_EXIT` before writing more; what it wrote atomically is left to
    ``snakemake --rerun-incomplete`` (Snakemake marked the job incomplete when it started it)."""
    import threading

    token = os.environ.get(ENV_PARENT, "")
    if not token or not parent_alive(token):
        return  # not started by a Snakemake on this host (a test, a user, a cluster node), or no such process

    def watch() -> None:
        while parent_alive(token):
            time.sleep(interval)
        print(f"{who}: error: the Snakemake process that started this job ({token}) is gone; stopping without "
              "writing further outputs (rerun with snakemake --rerun-incomplete)", file=sys.stderr, flush=True)
        os._exit(PARENT_EXIT)
    threading.Thread(target=watch, name="icml25-parent-watch", daemon=True).start()


def install_error_hook(who: str) -> None:
    """Make an expected error (:func:`expected_errors`) that ends this process print one line, ``<who>: error:
    <Class>: <message naming the file and the fix>``, instead of a traceback (exit status 1); other exceptions
    keep Python's traceback. Only the process's top level is affected: callers in the same process (tests, the
    tune driver) still get the exception."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], err: BaseException, tb: Any) -> None:
        if issubclass(kind, expected_errors()):
            print(f"{who}: error: {one_line(err)}", file=sys.stderr)
        else:
            previous(kind, err, tb)
    sys.excepthook = hook


def one_line(err: BaseException) -> str:
    """``err``'s message on one line (newlines folded), prefixed by its class name."""
    text = " ".join(str(err).split()) or repr(err)
    return f"{type(err).__name__}: {text}"


class _NullRun:
    """Stands in for a StageRun with ``--no-track`` (nested runs are itself)."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *a, **k: None

    def child(self, **kwargs: Any) -> Any:
        import contextlib

        return contextlib.nullcontext(self)

    def seed_run(self, seed: int) -> Any:
        return self.child(seed=seed)


def main(argv: Sequence[str] | None = None) -> int:
    """``icml25``: project commands used by the Snakefile's handlers and by users."""
    _setup_logging()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["server"]:  # its own parser: icml25 server --help
        from .server import main as server_main

        return server_main(argv[1:])
    if argv[:1] == ["gpu-check"]:  # its own parser: icml25 gpu-check --help
        from .gpucheck import main as gpucheck_main

        return gpucheck_main(argv[1:])
    if argv[:1] == ["tune"]:  # its own parser: icml25 tune --help
        from .tune import main as tune_main

        return tune_main(argv[1:])
    parser = argparse.ArgumentParser(prog="icml25", description=main.__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("server", help="start/stop the MLflow tracking server for cluster runs (see icml25 server --help)")
    sub.add_parser("gpu-check", help="time every study's paper train step on a device and print the GPU-hours "
                                     "table (see icml25 gpu-check --help)")
    sub.add_parser("tune", help="run a study on tuning seeds and append the run to tuning/<slug>.jsonl "
                                "(see icml25 tune --help)")
    p = sub.add_parser("init-tracking", help="create the MLflow store and experiments (Snakefile onstart)")
    p.add_argument("--studies", nargs="+", required=True)
    p.add_argument("--results", default="results")
    p = sub.add_parser("finish-tracking", help="close this invocation's parent runs (onsuccess/onerror)")
    p.add_argument("--status", choices=["FINISHED", "FAILED"], default="FINISHED")
    p.add_argument("--results", default="results")
    p = sub.add_parser("schema", help="print the JSON schema of a study yaml, generated from its Config model")
    p.add_argument("slug")
    p = sub.add_parser("summary", help="gather claims.json files into claims.md / claims.csv")
    p.add_argument("--in", dest="inputs", nargs="+", required=True, help="claims.json files")
    p.add_argument("--md", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--html", help="also write the table as an HTML fragment (the Snakemake report shows it)")
    p.add_argument("--figure", help="the overview figure (PNG; default claims_overview.png beside --md)")
    p.add_argument("--results", default="results")
    p.add_argument("--no-track", action="store_true")
    args = parser.parse_args(argv)
    if args.cmd == "init-tracking":
        from .tracking import init_store, resolve_tracking_uri

        uri = resolve_tracking_uri(args.results)
        ids = init_store(uri, [*args.studies, "summary"], args.results)
        from .mlflow_rest import redact

        log.info("MLflow store %s ready: %s", redact(uri), ids)
    elif args.cmd == "finish-tracking":
        from .tracking import finish_invocation

        n = finish_invocation(args.status, args.results)
        log.info("closed %d parent run(s) as %s", n, args.status)
    elif args.cmd == "schema":
        from icml25.studies import study_config_class

        from .config import study_schema

        print(json.dumps(study_schema(study_config_class(args.slug), f"config/studies/{args.slug}.yaml"), indent=2))
    elif args.cmd == "summary":
        from .summary import run_summary

        run_summary([Path(p) for p in args.inputs], Path(args.md), Path(args.csv), Path(args.results),
                    track=not args.no_track, html_out=Path(args.html) if args.html else None,
                    figure=Path(args.figure) if args.figure else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
