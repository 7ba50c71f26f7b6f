"""A small wrapper around ``mlflow server`` for cluster runs: one tracking server that every SLURM job logs to.

Why a server on a cluster: jobs on several nodes cannot share one SQLite file (its WAL journal needs shared
memory, which network file systems do not give), and MLflow 3.x refuses the old ``./mlruns`` file store. One
server on the login node owns the store; jobs talk HTTP to it through ``MLFLOW_TRACKING_URI``.

What the wrapper adds to a bare ``mlflow server``:

* the SQLite backend is created (schema, WAL journaling) by this process *before* the server's workers start,
  since several processes creating a fresh SQLite store at once corrupt it for good;
* ``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false`` (no job runner inside the server) and telemetry off;
* ``--allowed-hosts``: MLflow's defaults (localhost, private IPs) plus this machine's names, so that jobs on
  compute nodes may call it ``http://<login-node>:<port>`` (MLflow rejects unknown ``Host`` headers);
* the server runs in its own process group (``start_new_session``), so :func:`stop` ends it and all its
  workers at once; ``--detach`` leaves it running and writes that group's id to ``--pid-file``.

Usage (also ``icml25 server ...``)::

    python -m icml25.core.server --port 5000 --pid-file results/mlflow-server.pid --detach
    export MLFLOW_TRACKING_URI=http://$(hostname -f):5000
    snakemake --profile workflow/profiles/slurm ...
    python -m icml25.core.server --stop --pid-file results/mlflow-server.pid
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PORT = 5000
# MLflow's own defaults (mlflow.server.security_utils), kept when the list is given explicitly.
_MLFLOW_DEFAULT_HOSTS = ("localhost", "127.0.0.1", "[::1]", "0.0.0.0", "192.168.*", "10.*",
                         *(f"172.{i}.*" for i in range(16, 32)))


def machine_names() -> list[str]:
    """This machine's short and fully qualified host names (as compute nodes may address it)."""
    names = [socket.gethostname(), socket.getfqdn()]
    return list(dict.fromkeys(n for n in names if n))


def allowed_hosts(extra: Sequence[str] = ()) -> list[str]:
    """``Host`` header patterns the server accepts: MLflow's defaults, this machine's names, ``extra``.

    Every name is allowed bare and with any port (``name:*``), since clients send ``Host: name:port``.
    """
    out: list[str] = []
    for name in [*_MLFLOW_DEFAULT_HOSTS, *machine_names(), *extra]:
        out.append(name)
        if not name.endswith("*"):
            out.append(("[[]" + name[1:] if name.startswith("[") else name) + ":*")
    return list(dict.fromkeys(out))


def server_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: ``base`` (default ``os.environ``) with job execution and telemetry off."""
    env = dict(os.environ if base is None else base)
    env.update(MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false", MLFLOW_DISABLE_TELEMETRY="true")
    env.pop("MLFLOW_TRACKING_URI", None)  # the server is the store; a client URI here would only confuse
    return env


def server_command(*, backend_store_uri: str, artifacts_destination: str, host: str = "127.0.0.1",
                   port: int = DEFAULT_PORT, hosts: Sequence[str] = (), workers: int = 2,
                   mlflow: str = "mlflow") -> list[str]:
    """The ``mlflow server`` argv: proxied artifacts under ``artifacts_destination``, checked ``Host`` headers."""
    return [mlflow, "server", "--backend-store-uri", backend_store_uri,
            "--artifacts-destination", artifacts_destination, "--serve-artifacts",
            "--host", host, "--port", str(port), "--workers", str(workers),
            "--allowed-hosts", ",".join(allowed_hosts(hosts))]


def prepare_backend(backend_store_uri: str) -> None:
    """Create a SQLite backend's schema (WAL mode) once, before the workers start; other URIs are left alone."""
    if backend_store_uri.startswith("sqlite:///"):
        from .tracking import init_store

        init_store(backend_store_uri, [])


@dataclass(frozen=True)
class Server:
    """A started server: its process (group leader) and the URL clients use."""

    process: subprocess.Popen
    url: str

    @property
    def pgid(self) -> int:
        return self.process.pid  # start_new_session: the leader's pid is the group id


def start(*, backend_store_uri: str, artifacts_destination: str, host: str = "127.0.0.1",
          port: int = DEFAULT_PORT, hosts: Sequence[str] = (), workers: int = 2, log: str | Path | None = None,
          ready_timeout: float = 120.0) -> Server:
    """Start ``mlflow server`` in a new process group and wait until ``/health`` answers.

    ``log``: file for the server's stdout/stderr (default: inherited). Raises ``RuntimeError`` with the log's
    tail if the server exits or does not answer within ``ready_timeout`` seconds (then it is stopped).
    """
    if "://" not in artifacts_destination:
        Path(artifacts_destination).mkdir(parents=True, exist_ok=True)
        artifacts_destination = Path(artifacts_destination).resolve().as_uri()
    prepare_backend(backend_store_uri)
    cmd = server_command(backend_store_uri=backend_store_uri, artifacts_destination=artifacts_destination,
                         host=host, port=port, hosts=hosts, workers=workers)
    out = open(log, "ab") if log else None  # noqa: SIM115 - handed to the child, closed below
    try:
        proc = subprocess.Popen(cmd, env=server_env(), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT if out else None, start_new_session=True)
    finally:
        if out:
            out.close()
    client_host = "127.0.0.1" if host in ("0.0.0.0", "127.0.0.1", "::", "") else host
    server = Server(proc, f"http://{client_host}:{port}")
    try:
        wait_ready(server.url, ready_timeout, proc)
    except RuntimeError as err:
        stop(server.pgid)
        tail = Path(log).read_text(errors="replace")[-3000:] if log and Path(log).exists() else ""
        raise RuntimeError(f"{err}\n{tail}") from None
    return server


def wait_ready(url: str, timeout: float = 120.0, proc: subprocess.Popen | None = None) -> None:
    """Poll ``<url>/health`` until it answers 200; ``RuntimeError`` on timeout or if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited with code {proc.returncode} before answering at {url}")
        with contextlib.suppress(OSError, urllib.error.URLError):
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        time.sleep(0.25)
    raise RuntimeError(f"mlflow server did not answer at {url}/health within {timeout:.0f} s")


def stop(pgid: int, timeout: float = 15.0) -> bool:
    """Stop the server's whole process group: SIGTERM, then SIGKILL after ``timeout`` s. False if none left."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pgid, os.WNOHANG)  # reap the leader if it is our child
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return True


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="icml25 server", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Start (or stop) the MLflow tracking server that cluster jobs log to. Jobs find it through "
                    "MLFLOW_TRACKING_URI=http://<this host>:<port>; the UI is at the same address.")
    p.add_argument("--host", default="0.0.0.0", help="interface to bind (0.0.0.0: reachable from compute nodes)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--backend-store-uri", default=None,
                   help="run store (SQLite or a database URL); default sqlite:///<results>/mlflow-server.db")
    p.add_argument("--artifacts-destination", default=None,
                   help="where uploaded artifacts land (directory or URI); default <results>/mlartifacts-server")
    p.add_argument("--results", default="results", help="results root used for the defaults above")
    p.add_argument("--allowed-hosts", nargs="*", default=[], metavar="NAME",
                   help="more Host names/patterns to accept (MLflow's defaults and this machine's names always are)")
    p.add_argument("--workers", type=int, default=2, help="server worker processes")
    p.add_argument("--log", default=None, help="server log file (default: this terminal)")
    p.add_argument("--detach", action="store_true", help="return once the server answers, leave it running")
    p.add_argument("--pid-file", default=None, help="write the server's process group id here")
    p.add_argument("--stop", action="store_true", help="stop the server whose group id is in --pid-file")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: start the server (foreground or ``--detach``) or ``--stop`` it."""
    args = _parser().parse_args(argv)
    if args.stop:
        if not args.pid_file or not Path(args.pid_file).exists():
            print("--stop needs --pid-file of a running server", file=sys.stderr)
            return 2
        pgid = int(Path(args.pid_file).read_text().strip())
        stopped = stop(pgid)
        Path(args.pid_file).unlink()
        print(f"mlflow server (process group {pgid}) {'stopped' if stopped else 'was not running'}")
        return 0
    results = Path(args.results).resolve()
    backend = args.backend_store_uri or f"sqlite:///{results / 'mlflow-server.db'}"
    artifacts = args.artifacts_destination or str(results / "mlartifacts-server")
    if args.detach and not args.log:
        args.log = str(results / "mlflow-server.log")
        results.mkdir(parents=True, exist_ok=True)
    try:
        server = start(backend_store_uri=backend, artifacts_destination=artifacts, host=args.host,
                       port=args.port, hosts=args.allowed_hosts, workers=args.workers, log=args.log)
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    if args.pid_file:
        Path(args.pid_file).parent.mkdir(parents=True, exist_ok=True)
        Path(args.pid_file).write_text(f"{server.pgid}\n")
    names = [n for n in machine_names() if n != "localhost"] or ["localhost"]
    public = names[-1] if args.host == "0.0.0.0" else args.host
    print(f"mlflow server up (process group {server.pgid}); for jobs and the UI:\n"
          f"  export MLFLOW_TRACKING_URI=http://{public}:{args.port}", flush=True)
    if args.detach:
        return 0

    def _on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _on_signal)
    try:
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop(server.pgid)
        if args.pid_file:
            with contextlib.suppress(FileNotFoundError):
                Path(args.pid_file).unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
