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
  workers at once; ``--detach`` leaves it running and writes that group's id to ``--pid-file``;
* it knows its own process: the port must be free before the start, and the server counts as up only when
  ``/health`` answers *and* the socket listening on the port belongs to the server's process group (another
  server answering on that port is a failure, not a success);
* ``parent_pid``: the server is started *by* a small supervisor (``python -m icml25.core.server _supervise``)
  that ends the server's process group once that parent is gone, even by SIGKILL; the tie exists before the
  server process does (the pipeline's local server uses this);
* loopback by default; ``--host 0.0.0.0 --auth`` serves a cluster with MLflow's built-in basic authentication
  (``--app-name basic-auth``; clients send ``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD``); a
  non-loopback host without ``--auth`` is refused unless ``--insecure`` says an open server is intended.

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
LOOPBACK = ("127.0.0.1", "localhost", "::1")  #: hosts that serve this machine only
TOKEN_APP = "icml25-token"  #: the mlflow.app entry point of icml25.core.server_auth
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
                   mlflow: str = "mlflow", auth: bool = False, token: bool = False) -> list[str]:
    """The ``mlflow server`` argv: proxied artifacts under ``artifacts_destination``, checked ``Host`` headers;
    ``auth``: MLflow's basic authentication app (users in ``MLFLOW_AUTH_CONFIG_PATH``'s database); ``token``: the
    bearer-token gate of :mod:`icml25.core.server_auth` (``--app-name icml25-token``)."""
    app = ["--app-name", "basic-auth"] if auth else (["--app-name", TOKEN_APP] if token else [])
    return [mlflow, "server", "--backend-store-uri", backend_store_uri,
            "--artifacts-destination", artifacts_destination, "--serve-artifacts",
            "--host", host, "--port", str(port), "--workers", str(workers),
            "--allowed-hosts", ",".join(allowed_hosts(hosts)), *app]


def token_app_installed() -> bool:
    """Whether ``mlflow server --app-name icml25-token`` can find this package's app (its ``mlflow.app`` entry
    point is registered when the package is installed, ``pip install -e .``)."""
    from importlib.metadata import entry_points

    return any(e.name == TOKEN_APP for e in entry_points(group="mlflow.app"))


def port_owners(port: int) -> set[int] | None:
    """Pids of this user's processes holding a TCP socket that listens on ``port`` (any address); None when
    this system cannot tell (no ``/proc`` and no psutil)."""
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        try:
            import psutil
        except ImportError:
            return None
        with contextlib.suppress(psutil.Error):
            return {c.pid for c in psutil.net_connections("tcp")
                    if c.pid and c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port}
        return None
    inodes: set[str] = set()
    for table in tables:
        with contextlib.suppress(OSError):
            for line in table.read_text().splitlines()[1:]:
                f = line.split()
                if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{f[9]}]")
    owners: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or not inodes:
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(proc / "fd" / fd) in inodes for fd in os.listdir(proc / "fd")):
                owners.add(int(proc.name))
    return owners


def serves_port(pgid: int, port: int) -> bool | None:
    """Whether a process of group ``pgid`` listens on ``port`` (None: cannot tell on this system)."""
    owners = port_owners(port)
    if owners is None:
        return None
    mine = set()
    for pid in owners:
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pgid:
                mine.add(pid)
    return bool(mine)


def check_port_free(host: str, port: int) -> None:
    """``RuntimeError`` naming the port (and who holds it, if known) when ``host:port`` cannot be bound now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is no clash
        try:
            s.bind((host, port))
        except OSError as err:
            owners = port_owners(port)
            who = f" (held by pid {sorted(owners)})" if owners else ""
            raise RuntimeError(f"mlflow server cannot bind {host}:{port}: {err.strerror}{who}") from None


def prepare_backend(backend_store_uri: str) -> None:
    """Create a SQLite backend's schema (WAL mode) once, before the workers start; other URIs are left alone."""
    if backend_store_uri.startswith("sqlite:///"):
        from .tracking import init_store

        init_store(backend_store_uri, [])


@dataclass(frozen=True)
class Server:
    """A started server: the process to wait on (the server, or its supervisor), the server's process group id
    and the URL clients use."""

    process: subprocess.Popen
    url: str
    pgid: int


def start(*, backend_store_uri: str, artifacts_destination: str, host: str = "127.0.0.1",
          port: int = DEFAULT_PORT, hosts: Sequence[str] = (), workers: int = 2, log: str | Path | None = None,
          ready_timeout: float = 120.0, parent_pid: int | None = None, auth: bool = False,
          token: str | None = None) -> Server:
    """Start ``mlflow server`` in a new process group; return once it answers on ``port`` from its own socket.

    ``log``: file for the server's stdout/stderr (default: inherited). ``parent_pid``: start it under a
    supervisor that stops it when that process ends. Raises ``RuntimeError`` (with the log's tail) when the port
    is taken, when the server exits, when the port answers from another process, or when nothing answers
    within ``ready_timeout`` seconds; the server is stopped then. ``token``: serve behind
    :mod:`icml25.core.server_auth`, accepting only requests with ``Authorization: Bearer <token>`` (the server's
    environment holds only the token's sha256).
    """
    if "://" not in artifacts_destination:
        Path(artifacts_destination).mkdir(parents=True, exist_ok=True)
        artifacts_destination = Path(artifacts_destination).resolve().as_uri()
    check_port_free(host, port)
    prepare_backend(backend_store_uri)
    cmd = server_command(backend_store_uri=backend_store_uri, artifacts_destination=artifacts_destination,
                         host=host, port=port, hosts=hosts, workers=workers, auth=auth, token=token is not None)
    env = server_env()
    if token is not None:
        from .server_auth import ENV_DIGEST, token_digest

        env[ENV_DIGEST] = token_digest(token)
    out = open(log, "ab") if log else None  # noqa: SIM115 - handed to the child, closed below
    try:
        if parent_pid is None:
            proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT if out else None, start_new_session=True)
            pgid = proc.pid  # start_new_session: the leader's pid is the group id
        else:
            proc, pgid = _start_supervised(cmd, parent_pid, out, {k: v for k, v in env.items()
                                                                  if k.startswith("ICML25_SERVER_")})
    finally:
        if out:
            out.close()
    client_host = "127.0.0.1" if host in ("0.0.0.0", "127.0.0.1", "::", "") else host
    server = Server(proc, f"http://{client_host}:{port}", pgid)
    try:
        wait_ready(server.url, ready_timeout, proc, pgid=pgid, port=port)
    except RuntimeError as err:
        stop(server.pgid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        tail = Path(log).read_text(errors="replace")[-3000:] if log and Path(log).exists() else ""
        raise RuntimeError(f"{err}\n{tail}") from None
    return server


def _package_env() -> dict[str, str]:
    """The server's environment, with this package importable (the supervisor runs ``-m icml25.core.server``)."""
    env = server_env()
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([src, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


def _start_supervised(cmd: list[str], parent_pid: int, out,
                      extra_env: Mapping[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    """Start the supervisor (which starts ``cmd``, passing ``extra_env`` on); return it and the server's process
    group id."""
    sup = subprocess.Popen([sys.executable, "-m", "icml25.core.server", "_supervise", str(parent_pid), "--", *cmd],
                           env={**_package_env(), **(extra_env or {})}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=out if out else None, start_new_session=True)
    line = sup.stdout.readline().strip() if sup.stdout else b""
    if sup.stdout:
        sup.stdout.close()
    if not line.isdigit():
        sup.wait(10)
        raise RuntimeError(f"mlflow server supervisor exited with code {sup.returncode} before starting it")
    return sup, int(line)


def _supervise(parent: int, cmd: list[str], period: float = 0.2) -> int:
    """Run ``cmd`` in its own process group while process ``parent`` lives; stop the group when the parent is
    gone (checked every ``period`` s, first right after the start) or when this supervisor gets SIGTERM/SIGINT.
    Prints the group id on stdout; returns the server's exit code."""
    def _on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    proc = subprocess.Popen(cmd, env=server_env(), stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(),
                            stderr=subprocess.STDOUT, start_new_session=True)  # the log, not the pid pipe
    print(proc.pid, flush=True)
    sys.stdout.close()
    try:
        while proc.poll() is None:
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                break
            time.sleep(period)
    except KeyboardInterrupt:
        pass
    if proc.poll() is None:
        stop(proc.pid, timeout=10)
    with contextlib.suppress(ProcessLookupError):  # workers the leader left behind
        os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait()


def wait_ready(url: str, timeout: float = 120.0, proc: subprocess.Popen | None = None, *,
               pgid: int | None = None, port: int | None = None) -> None:
    """Poll ``<url>/health`` until it answers 200 (and, given ``pgid`` and ``port``, until the listening socket
    belongs to that process group); ``RuntimeError`` on timeout or if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    foreign = False
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            also = (f"; port {port} is served by another process ({sorted(port_owners(port) or [])}), not by it"
                    if foreign else "")
            raise RuntimeError(f"mlflow server exited with code {proc.returncode} before answering at {url}{also}")
        with contextlib.suppress(OSError, urllib.error.URLError):
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    ours = serves_port(pgid, port) if pgid is not None and port is not None else None
                    if ours or ours is None:
                        if proc is None or proc.poll() is None:
                            return
                    foreign = True
        time.sleep(0.25)
    raise RuntimeError(f"mlflow server did not answer at {url}/health within {timeout:.0f} s"
                       + (" from its own process (another process holds the port)" if foreign else ""))


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
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind: loopback (this machine only) unless given; 0.0.0.0 makes it reachable "
                        "from compute nodes (use --auth then)")
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
    p.add_argument("--insecure", action="store_true",
                   help="allow a non-loopback --host without --auth: anyone who can reach the port may read and "
                        "write every run (refused without this flag)")
    p.add_argument("--auth", action="store_true",
                   help="MLflow's basic authentication (--app-name basic-auth): set MLFLOW_AUTH_CONFIG_PATH to an "
                        "ini with your admin password first; clients export MLFLOW_TRACKING_USERNAME/PASSWORD")
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
    loopback = args.host in LOOPBACK
    if not loopback and not args.auth and not args.insecure:
        print(f"refusing --host {args.host} without --auth: the server would let anyone who can reach "
              f"{args.host}:{args.port} read, change and delete every run. Start it with --auth (MLflow's basic "
              "authentication), keep it on loopback and reach it through an SSH tunnel, or pass --insecure to "
              "accept an open server on a trusted network", file=sys.stderr)
        return 2
    results = Path(args.results).resolve()
    backend = args.backend_store_uri or f"sqlite:///{results / 'mlflow-server.db'}"
    artifacts = args.artifacts_destination or str(results / "mlartifacts-server")
    if args.detach and not args.log:
        args.log = str(results / "mlflow-server.log")
        results.mkdir(parents=True, exist_ok=True)
    try:
        server = start(backend_store_uri=backend, artifacts_destination=artifacts, host=args.host,
                       port=args.port, hosts=args.allowed_hosts, workers=args.workers, log=args.log,
                       auth=args.auth)
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    if args.pid_file:
        Path(args.pid_file).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(args.pid_file).with_name(f".{Path(args.pid_file).name}.part")
        tmp.write_text(f"{server.pgid}\n")
        os.replace(tmp, args.pid_file)  # atomic: a reader never sees an empty or half-written pid file
    names = [n for n in machine_names() if n != "localhost"] or ["localhost"]
    public = names[-1] if args.host == "0.0.0.0" else args.host
    if not loopback and not args.auth:
        print(f"warning (--insecure): {args.host}:{args.port} serves the store without authentication to anyone "
              "who can reach it", file=sys.stderr)
    elif not loopback:
        print(f"note: --auth sends passwords as HTTP basic auth over plain http; off a trusted network reach "
              f"{args.host}:{args.port} through an SSH tunnel or a TLS proxy", file=sys.stderr)
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
    if sys.argv[1:2] == ["_supervise"] and sys.argv[3:4] == ["--"]:
        sys.exit(_supervise(int(sys.argv[2]), sys.argv[4:]))
    sys.exit(main())
