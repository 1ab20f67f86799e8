import { useState } from "preact/hooks";
import { execd, observe } from "./api";
import { usePoll } from "./hooks";

interface Sample {
  t: number;
  cpu: number; // percent of the sandbox's CPUs
  mem: number; // MiB
  memTotal: number;
  cpus: number;
}

/** How long a chart looks back, and how often it samples. */
const windowMs = 5 * 60 * 1000;
const everyMs = 2000;

// Samples outlive the page that shows them, for the session: coming back
// to a sandbox shows what was seen before.
const history = new Map<string, Sample[]>();

/** Metrics charts a running sandbox's CPU and memory over the last five minutes, from execd's /metrics. */
export function Metrics(props: { apiKey: string; id: string; running: boolean }) {
  const { apiKey, id, running } = props;
  const [samples, setSamples] = useState<Sample[]>(history.get(id) ?? []);
  const [err, setErr] = useState("");

  usePoll(
    async () => {
      try {
        const m = await observe<{ cpu_count: number; cpu_used_pct: number; mem_total_mib: number; mem_used_mib: number; timestamp: number }>(
          apiKey,
          execd(id, "/metrics"),
        );
        const now = Date.now();
        const next = [...(history.get(id) ?? []), { t: now, cpu: m.cpu_used_pct, mem: m.mem_used_mib, memTotal: m.mem_total_mib, cpus: m.cpu_count }].filter(
          (s) => now - s.t <= windowMs,
        );
        history.set(id, next);
        setSamples(next);
        setErr("");
      } catch (e) {
        setErr(e instanceof Error ? e.message : String(e));
      }
    },
    everyMs,
    running,
    [apiKey, id],
  );

  const last = samples[samples.length - 1];
  return (
    <section aria-labelledby="metrics-title" class="metrics">
      <h2 id="metrics-title">Resources</h2>
      <div class="charts">
        <Chart
          title="CPU"
          unit="%"
          max={100}
          now={last ? `${last.cpu.toFixed(1)} % of ${last.cpus} CPU${last.cpus === 1 ? "" : "s"}` : "—"}
          points={samples.map((s) => [s.t, s.cpu])}
        />
        <Chart
          title="Memory"
          unit="MiB"
          max={last?.memTotal || Math.max(1, ...samples.map((s) => s.mem))}
          now={last ? `${last.mem.toFixed(1)} of ${last.memTotal.toFixed(0)} MiB` : "—"}
          points={samples.map((s) => [s.t, s.mem])}
        />
      </div>
      <p class="muted small" role="status">
        {!running ? "Charts update while the sandbox runs." : err ? `Metrics could not be read: ${err}` : "The last five minutes, every 2 s, while this page is open."}
      </p>
    </section>
  );
}

/** Chart is a line over the last five minutes, scaled to max; fixed size, so live data never moves the page. */
function Chart(props: { title: string; unit: string; max: number; now: string; points: [number, number][] }) {
  const w = 300;
  const h = 90;
  const end = Date.now();
  const x = (t: number) => w - ((end - t) / windowMs) * w;
  const y = (v: number) => h - Math.min(1, Math.max(0, v / props.max)) * (h - 4) - 2;
  const d = props.points.map(([t, v], i) => `${i ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
  const summary = `${props.title}: ${props.now}`;
  return (
    <figure class="chart">
      <figcaption>
        <strong>{props.title}</strong> <span class="muted">{props.now}</span>
      </figcaption>
      <svg viewBox={`0 0 ${w} ${h}`} preserveAspectRatio="none" role="img" aria-label={summary}>
        <line x1="0" y1={h / 2} x2={w} y2={h / 2} class="grid" />
        {d && <path d={`${d} L${x(props.points[props.points.length - 1][0]).toFixed(1)},${h} L${x(props.points[0][0]).toFixed(1)},${h} Z`} class="area" />}
        {d && <path d={d} class="line" />}
      </svg>
      <div class="axis muted">
        <span>5 min ago</span>
        <span>
          max {props.max.toFixed(0)} {props.unit}
        </span>
        <span>now</span>
      </div>
    </figure>
  );
}
