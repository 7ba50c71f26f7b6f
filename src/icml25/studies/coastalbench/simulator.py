"""Mini-ROMS: a small coastal simulator that writes real ROMS history files (spec "Simulator [R]").

Faithful in file format and in regime (tides, river plume, wind and pressure forcing, shallow shelf with a barrier
island and a dredged channel), not in 3-D physics: the dynamics are 2-D nonlinear shallow water on the C-grid
(forward-backward, Flather open boundaries on the south and west), and the 3-D fields are reconstructed from the
depth-mean state at output times (log-profile + wind shear velocities, plume-scaled stratification, w from
continuity, parabolic AKs).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .scoord import s_levels, stretching, z_of_s

G, RHO0, RHO_AIR, CD_AIR, CP = 9.81, 1025.0, 1.225, 1.3e-3, 3985.0
TIDES = ((12.4206, 0.0), (23.9345, 0.7), (25.8193, 1.9))  # M2, K1, O1: period (h), phase (rad) [R]


@dataclass
class Grid:
    """Horizontal grid (rho points, eta x xi), bathymetry h (m, positive), mask (1 water) and the river cell."""

    h: np.ndarray
    mask: np.ndarray
    f: np.ndarray
    lon: np.ndarray
    lat: np.ndarray
    dx: float
    river: tuple[int, int]


def make_grid(ny: int, nx: int, dx: float = 1000.0) -> Grid:
    """Coast on the east (polygon with an estuary), a barrier island with an inlet, a dredged channel.

    Depth grows from 1 m at the coast to 30 m offshore (west and south are the open ocean).
    """
    from matplotlib.path import Path as MplPath

    y, x = np.mgrid[0:ny, 0:nx].astype(float)
    xf, yf = x / (nx - 1), y / (ny - 1)
    # Coastline polygon (fractions of the domain): land east of a wiggly line, plus the north-east corner.
    coast = [(0.78 + 0.05 * np.sin(3 * np.pi * t), t) for t in np.linspace(0.0, 1.0, 25)]
    land_poly = MplPath([(1.2, -0.2), *coast, (0.6, 1.2), (1.2, 1.2)])
    pts = np.column_stack([xf.ravel(), yf.ravel()])
    land = land_poly.contains_points(pts).reshape(ny, nx)
    # Estuary: a water channel cutting into the land at mid-latitude, ending at the river mouth.
    jm = int(0.55 * (ny - 1))
    coast_i = [int(np.argmax(land[j])) if land[j].any() else nx for j in range(ny)]
    i_end = min(nx - 2, coast_i[jm] + max(2, nx // 10))
    land[jm - 1 : jm + 1, coast_i[jm] - 1 : i_end + 1] = False
    river = (jm, i_end)
    # Barrier island: a thin strip offshore of the coast with an inlet in front of the estuary.
    for j in range(int(0.15 * ny), int(0.9 * ny)):
        if abs(j - jm) > max(1, ny // 24):
            i_bar = coast_i[j] - max(3, nx // 10)
            if 1 < i_bar < nx:
                land[j, i_bar] = True
    mask = (~land).astype(float)
    mask[:, -1] = 0.0  # closed east and north edges
    mask[-1, :] = 0.0
    mask[river] = 1.0
    # Distance to the coast (in columns) gives the depth: 1 m at the coast, 30 m offshore.
    dist = np.array([[max(coast_i[j] - i, 0) for i in range(nx)] for j in range(ny)], float)
    h = 1.0 + 29.0 * np.clip(dist / (0.45 * nx), 0, 1) ** 1.3
    h = np.where(dist == 0, 1.5, h)
    # Dredged channel from the inlet to offshore, 8 m deep at least.
    h[jm - 1 : jm + 1, :] = np.maximum(h[jm - 1 : jm + 1, :], 8.0)
    h = np.where(mask > 0, h, 1.0)
    lat = 26.0 + yf * (ny - 1) * dx / 111e3
    lon = -82.5 + xf * (nx - 1) * dx / (111e3 * np.cos(np.deg2rad(26.0)))
    f = 2 * 7.2921e-5 * np.sin(np.deg2rad(lat))
    return Grid(h=h, mask=mask, f=f, lon=lon, lat=lat, dx=dx, river=river)


class Atmosphere:
    """Diurnal cycle + AR(1) synoptic anomalies + gamma-intermittent rain + sea breeze + cold fronts [R].

    ``fields(t)`` returns the 8 ROMS forcing fields on the rho grid; call with increasing t only.
    """

    def __init__(self, grid: Grid, rng: np.random.Generator, qair_units: str = "percentage") -> None:
        ny, nx = grid.h.shape
        self.rng, self.qair_units = rng, qair_units
        self.yf, self.xf = np.mgrid[0:ny, 0:nx] / np.array([max(ny - 1, 1), max(nx - 1, 1)])[:, None, None]
        self.state = np.zeros(6)  # synoptic anomalies: u, v, pressure, temperature, humidity, cloud
        self.t_last = None
        self.front_t = 3 * 86400.0 + rng.uniform(0, 86400)
        self.rain_amp, self.rain_x0 = 0.0, 0.5

    def _advance(self, t: float) -> None:
        dt_h = 0.0 if self.t_last is None else (t - self.t_last) / 3600.0
        self.t_last = t
        phi = np.exp(-dt_h / 48.0)  # 2-day decorrelation
        sd = np.array([3.0, 3.0, 4.0, 1.5, 6.0, 0.3])
        self.state = phi * self.state + np.sqrt(1 - phi**2) * sd * self.rng.standard_normal(6)
        if dt_h > 0 and self.rng.random() < 0.02 * dt_h:  # rain events: gamma-distributed intensity
            self.rain_amp, self.rain_x0 = self.rng.gamma(0.8, 2.5e-3), self.rng.random()
        else:
            self.rain_amp *= np.exp(-dt_h / 2.0)

    def fields(self, t: float) -> dict[str, np.ndarray]:
        self._advance(t)
        s = self.state
        hour = (t / 3600.0) % 24.0
        day_phase = 2 * np.pi * (hour - 9.0) / 24.0
        # Cold front: sweeps eastwards; behind it northerly wind, colder air, higher pressure.
        if t > self.front_t + 2 * 86400:
            self.front_t += self.rng.uniform(4, 7) * 86400
        front_x = (t - self.front_t) / 86400.0 - 0.5
        behind = 1.0 / (1.0 + np.exp(-(front_x - self.xf) * 12.0))
        breeze = 3.0 * max(np.sin(2 * np.pi * (hour - 10.0) / 24.0), 0.0)  # onshore (east) in the afternoon
        uwind = s[0] + breeze * (1 - self.xf) ** 0.5 - 4.0 * behind + 1.0 * self.yf
        vwind = s[1] - 6.0 * behind + 0.5 * np.sin(np.pi * self.xf)
        pair = 1013.0 + s[2] + 2.0 * self.yf - 1.0 * self.xf + 4.0 * behind
        tair = 24.0 + 3.0 * np.sin(day_phase) + s[3] - 5.0 * behind + 1.0 * self.xf
        rh = np.clip(75.0 + s[4] - 10.0 * np.sin(day_phase) - 15.0 * behind, 20.0, 100.0)
        qair = rh if self.qair_units == "percentage" else 0.622 * rh / 100 * 6.11 * 10 ** (
            7.5 * tair / (237.3 + tair)) / pair
        cloud = np.clip(0.3 + s[5] + 3.0 * self.rain_amp * 100, 0.0, 1.0)
        elev = np.sin(2 * np.pi * (hour - 6.0) / 24.0)
        swrad = np.maximum(elev, 0.0) * 850.0 * (1 - 0.7 * cloud) * np.ones_like(self.xf)
        lwrad = -(70.0 - 40.0 * cloud) * np.ones_like(self.xf) - 0.5 * (tair - 24.0)
        rain = self.rain_amp * np.exp(-((self.xf - self.rain_x0) ** 2) / 0.05) * (0.5 + self.yf)
        return {"Pair": pair, "Tair": tair, "Qair": qair, "rain": rain, "swrad": swrad, "lwrad": lwrad,
                "Uwind": uwind, "Vwind": vwind}


class ShallowWater:
    """2-D nonlinear shallow water on the C-grid (forward-backward) with depth-mean T and S.

    State: zeta (ny, nx) on rho, ubar (ny, nx-1) on u, vbar (ny-1, nx) on v points, T/S (ny, nx).
    """

    def __init__(self, grid: Grid, *, dt: float = 30.0, drag: float = 2.5e-3, river_q: float = 200.0,
                 tides: tuple[float, ...] = (0.3, 0.15, 0.12)) -> None:
        self.g, self.dt, self.drag, self.q = grid, dt, drag, river_q
        self.tides = tides
        m = grid.mask
        self.mu, self.mv = m[:, :-1] * m[:, 1:], m[:-1] * m[1:]
        ny, nx = m.shape
        self.zeta = np.zeros((ny, nx))
        self.u, self.v = np.zeros((ny, nx - 1)), np.zeros((ny - 1, nx))
        self.temp, self.salt = np.full((ny, nx), 23.0) * m, np.full((ny, nx), 36.0) * m
        self.t = 0.0
        self.area = grid.dx**2
        self.west, self.south = m[:, 0] > 0, m[0, :] > 0
        self.residual_max = 0.0
        self.fu = 0.5 * (grid.f[:, :-1] + grid.f[:, 1:])
        self.fv = 0.5 * (grid.f[:-1] + grid.f[1:])
        self.along_w, self.along_s = np.linspace(0, 1, ny), 1 - np.linspace(0, 1, nx)
        self._atm = None

    def tide(self, t: float, along: np.ndarray) -> np.ndarray:
        """Open-boundary sea level (m): M2/K1/O1 with a phase lag along the boundary."""
        out = np.zeros_like(along)
        for amp, (period, phase) in zip(self.tides, TIDES):
            out += amp * np.cos(2 * np.pi * t / (period * 3600.0) - phase - 0.3 * along)
        return out

    def step(self, atm: dict[str, np.ndarray]) -> None:
        g, dt, dx = self.g, self.dt, self.g.dx
        h, m = g.h, g.mask
        H = np.maximum(h + self.zeta, 0.3)
        Hu, Hv = 0.5 * (H[:, :-1] + H[:, 1:]), 0.5 * (H[:-1] + H[1:])
        fx, fy = Hu * self.u * self.mu, Hv * self.v * self.mv  # transports (m2 s-1)
        div = np.zeros_like(self.zeta)
        div[:, :-1] += fx
        div[:, 1:] -= fx
        div[:-1] += fy
        div[1:] -= fy
        # Flather open boundaries (west column, south row): inflow when the interior is below the tide.
        qw = np.sqrt(G * H[:, 0]) * (self.tide(self.t, self.along_w) - self.zeta[:, 0]) * self.west
        qs = np.sqrt(G * H[0, :]) * (self.tide(self.t, self.along_s) - self.zeta[0, :]) * self.south
        div[:, 0] -= qw
        div[0, :] -= qs
        source = np.zeros_like(self.zeta)
        source[g.river] = self.q / self.area
        dzeta = dt * (-div / dx + source) * m
        self.zeta += dzeta
        # residual of the discrete volume budget (should be round-off)
        res = dzeta / dt + (div / dx - source) * m
        self.residual_max = max(self.residual_max, float(np.abs(res).max()))
        # momentum with the new zeta (backward step)
        H = np.maximum(h + self.zeta, 0.3)
        Hu, Hv = 0.5 * (H[:, :-1] + H[:, 1:]), 0.5 * (H[:-1] + H[1:])
        if atm is not self._atm:  # forcing terms change only at output times
            self._atm = atm
            ws = np.hypot(atm["Uwind"], atm["Vwind"])
            taux = RHO_AIR * CD_AIR * ws * atm["Uwind"]
            tauy = RHO_AIR * CD_AIR * ws * atm["Vwind"]
            self._tau = (0.5 * (taux[:, :-1] + taux[:, 1:]) / RHO0, 0.5 * (tauy[:-1] + tauy[1:]) / RHO0)
            self._pa = atm["Pair"] * 100.0 / (RHO0 * G)
        tau_u, tau_v = self._tau
        v_at_u = np.zeros_like(self.u)
        vc = np.zeros_like(self.zeta)
        vc[:-1] += 0.5 * self.v
        vc[1:] += 0.5 * self.v
        v_at_u[:] = 0.5 * (vc[:, :-1] + vc[:, 1:])
        uc = np.zeros_like(self.zeta)
        uc[:, :-1] += 0.5 * self.u
        uc[:, 1:] += 0.5 * self.u
        u_at_v = 0.5 * (uc[:-1] + uc[1:])
        eta = self.zeta + self._pa
        fu = -G * np.diff(eta, axis=1) / dx + self.fu * v_at_u + tau_u / Hu
        fv = -G * np.diff(eta, axis=0) / dx - self.fv * u_at_v + tau_v / Hv
        spd_u = np.hypot(self.u, v_at_u)
        spd_v = np.hypot(self.v, u_at_v)
        self.u = (self.u + dt * fu) / (1 + dt * self.drag * spd_u / Hu) * self.mu
        self.v = (self.v + dt * fv) / (1 + dt * self.drag * spd_v / Hv) * self.mv
        self.t += dt

    def tracers(self, dt_tr: float, atm: dict[str, np.ndarray]) -> None:
        """Depth-mean T and S: first-order upwind advection, river (S=0, T=22) and ocean (S=36) sources,
        surface heat flux and rain freshening."""
        g, m, dx = self.g, self.g.mask, self.g.dx
        H = np.maximum(g.h + self.zeta, 0.3)
        for name in ("temp", "salt"):
            c = getattr(self, name)
            cu = np.where(self.u > 0, c[:, :-1], c[:, 1:])
            cv = np.where(self.v > 0, c[:-1], c[1:])
            fx = self.u * self.mu * cu
            fy = self.v * self.mv * cv
            adv = np.zeros_like(c)
            adv[:, :-1] -= fx
            adv[:, 1:] += fx
            adv[:-1] -= fy
            adv[1:] += fy
            # divergence correction keeps a uniform field uniform (advective form)
            divu = np.zeros_like(c)
            divu[:, :-1] -= self.u * self.mu
            divu[:, 1:] += self.u * self.mu
            divu[:-1] -= self.v * self.mv
            divu[1:] += self.v * self.mv
            c = c + dt_tr * (adv - c * divu) / dx
            if name == "temp":
                c = c + dt_tr * (atm["swrad"] + atm["lwrad"] - 20.0 * (c - atm["Tair"])) / (RHO0 * CP * H)
            else:
                c = c * (1 - dt_tr * atm["rain"] / 1000.0 / H)
            ocean = 36.0 if name == "salt" else 23.0
            c[:, 0] = np.where(self.u[:, 0] > 0, ocean, c[:, 0])
            c[0, :] = np.where(self.v[0, :] > 0, ocean, c[0, :])
            river = 0.0 if name == "salt" else 22.0
            mix = min(1.0, dt_tr * self.q / (self.area * H[g.river]))
            c[g.river] = (1 - mix) * c[g.river] + mix * river
            setattr(self, name, np.clip(c, 0.0, 40.0) * m)


def reconstruct_3d(sw: ShallowWater, atm: dict[str, np.ndarray], n: int, *, theta_s: float, theta_b: float,
                   hc: float, vtransform: int) -> dict[str, np.ndarray]:
    """ROMS-layout 3-D fields from the depth-mean state (ROMS file layout, no time axis) [R]."""
    g = sw.g
    h, m = g.h, g.mask
    s_r, s_w = s_levels(n, "rho"), s_levels(n, "w")
    c_r, c_w = stretching(s_r, theta_s, theta_b), stretching(s_w, theta_s, theta_b)
    z_w = z_of_s(s_w[:, None, None], c_w[:, None, None], h, sw.zeta, hc, vtransform)
    z_r = z_of_s(s_r[:, None, None], c_r[:, None, None], h, sw.zeta, hc, vtransform)
    H = np.maximum(h + sw.zeta, 0.3)
    sig = (z_r - sw.zeta) / H  # in (-1, 0)
    dz = np.diff(z_w, axis=0)
    # log profile normalised to unit depth mean, plus a zero-mean wind-shear term
    z0 = 0.002
    phi = np.log1p((sig + 1.0) * H / z0)
    phi /= (phi * dz).sum(0) / H
    ws = np.hypot(atm["Uwind"], atm["Vwind"])
    shear = (sig + 0.5) * 0.03 * ws / 10.0  # m s-1 per unit wind direction
    to_u = lambda a: 0.5 * (a[..., :-1] + a[..., 1:])  # noqa: E731
    to_v = lambda a: 0.5 * (a[..., :-1, :] + a[..., 1:, :])  # noqa: E731
    u3 = sw.u[None] * to_u(phi) + to_u(shear * atm["Uwind"] / np.maximum(ws, 0.1))
    v3 = sw.v[None] * to_v(phi) + to_v(shear * atm["Vwind"] / np.maximum(ws, 0.1))
    u3 *= sw.mu
    v3 *= sw.mv
    # plume-scaled stratification: fresher and warmer at the surface where the depth-mean salinity is low
    plume = np.clip((36.0 - sw.salt) / 36.0, 0.0, 1.0)
    salt = sw.salt[None] - 2.0 * plume * 8.0 * (sig + 0.5)
    salt = np.clip(salt, 0.0, 40.0)
    warm = 0.5 + 1.5 * np.maximum(atm["swrad"], 0) / 850.0
    temp = sw.temp[None] + 2.0 * (warm * (1 + plume)) * (sig + 0.5)
    # w from continuity, integrated from the bottom (w = 0 there)
    dx = g.dx
    flux_div = np.zeros((n,) + h.shape)
    dzu, dzv = to_u(dz), to_v(dz)
    fx, fy = u3 * dzu, v3 * dzv
    flux_div[:, :, :-1] += fx
    flux_div[:, :, 1:] -= fx
    flux_div[:, :-1] += fy
    flux_div[:, 1:] -= fy
    w = np.zeros((n + 1,) + h.shape)
    w[1:] = -np.cumsum(flux_div / dx, axis=0)
    # AKs: damped parabolic profile kappa u* (z+h)(-z)/H / (1 + 5 N2 scale)
    ustar = np.sqrt(2.5e-3) * np.hypot(to_rho_u(sw.u), to_rho_v(sw.v))
    zz = np.clip(z_w - sw.zeta, -H, 0)
    aks = 0.41 * ustar * (zz + H) * (-zz) / H
    strat = 1.0 + 5.0 * plume
    aks = np.maximum(aks / strat, 1e-6)
    return {"zeta": sw.zeta * m, "ubar": sw.u, "vbar": sw.v, "u": u3, "v": v3, "w": w * m, "temp": temp * m,
            "salt": salt * m, "AKs": aks * m, **atm}


def to_rho_u(u: np.ndarray) -> np.ndarray:
    out = np.zeros(u.shape[:-1] + (u.shape[-1] + 1,))
    out[..., :-1] += 0.5 * u
    out[..., 1:] += 0.5 * u
    return out


def to_rho_v(v: np.ndarray) -> np.ndarray:
    out = np.zeros(v.shape[:-2] + (v.shape[-2] + 1, v.shape[-1]))
    out[..., :-1, :] += 0.5 * v
    out[..., 1:, :] += 0.5 * v
    return out


def grid_dict(grid: Grid, n: int, *, vtransform: int, vstretching: int, theta_s: float, theta_b: float,
              hc: float, tcline: float) -> dict:
    """What :class:`~.roms.HisWriter` needs."""
    ny, nx = grid.h.shape
    return {"h": grid.h, "f": grid.f, "pm": np.full((ny, nx), 1 / grid.dx), "pn": np.full((ny, nx), 1 / grid.dx),
            "lon_rho": grid.lon, "lat_rho": grid.lat, "mask_rho": grid.mask, "N": n, "Vtransform": vtransform,
            "Vstretching": vstretching, "theta_s": theta_s, "theta_b": theta_b, "Tcline": tcline, "hc": hc}


def simulate(sim, *, progress: bool = True, info: dict | None = None
             ) -> Iterator[tuple[str, list[tuple[float, dict]]]]:
    """Run the simulator; yield (YYYYMMDD, [(ocean_time s, record), ...]) day by day.

    ``sim`` is the study's :class:`~.config.Sim`. ocean_time counts seconds since 2008-01-01 00:00 (the
    writer's reference date); the run starts at ``sim.start_date`` 00:00 after a one-day spin-up. ``info``
    (if given) receives ``volume_residual_max`` (m s-1), the largest residual of the discrete volume budget.
    """
    from tqdm import tqdm

    rng = np.random.Generator(np.random.PCG64(sim.seed))
    grid = make_grid(sim.ny, sim.nx, sim.dx_m)
    sw = ShallowWater(grid, dt=sim.dt_s, drag=sim.drag, river_q=sim.river_q, tides=sim.tides_m)
    atm = Atmosphere(grid, rng, sim.qair_units)
    start = dt.datetime.fromisoformat(sim.start_date)
    t0 = (start - dt.datetime(2008, 1, 1)).total_seconds()
    steps_out = int(sim.output_interval_s // sim.dt_s)
    per_day = 86400 // sim.output_interval_s
    tr_every = max(1, int(300 // sim.dt_s))
    spin = 86400 // int(sim.output_interval_s)
    total = (sim.days * per_day + spin) * steps_out
    bar = tqdm(total=total, desc="mini-ROMS", disable=not progress, mininterval=2.0, unit="step")
    forcing = atm.fields(0.0)
    k_out = 0
    records: list[tuple[float, dict]] = []
    for k in range(total):
        sw.step(forcing)
        if (k + 1) % tr_every == 0:
            sw.tracers(tr_every * sim.dt_s, forcing)
        if (k + 1) % steps_out == 0:
            forcing = atm.fields(sw.t)
            k_out += 1
            if k_out > spin:
                rec = reconstruct_3d(sw, forcing, sim.n_levels, theta_s=sim.theta_s, theta_b=sim.theta_b,
                                     hc=sim.hc, vtransform=sim.vtransform)
                t_rec = t0 + (k_out - spin - 1) * sim.output_interval_s
                records.append((t_rec, rec))
                if len(records) == per_day:
                    if info is not None:
                        info["volume_residual_max"] = sw.residual_max
                    day = (dt.datetime(2008, 1, 1) + dt.timedelta(seconds=records[0][0])).strftime("%Y%m%d")
                    yield day, records
                    records = []
        bar.update(1)
    bar.close()


def make_sim_grid(sim) -> dict:
    """The writer grid of a :class:`~.config.Sim` (deterministic)."""
    grid = make_grid(sim.ny, sim.nx, sim.dx_m)
    return grid_dict(grid, sim.n_levels, vtransform=sim.vtransform, vstretching=sim.vstretching,
                     theta_s=sim.theta_s, theta_b=sim.theta_b, hc=sim.hc, tcline=sim.tcline)
